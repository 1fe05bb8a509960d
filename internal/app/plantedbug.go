//go:build !chaosbug

package app

import "github.com/dcm-project/k8s-container-sp/internal/status"

// plantBug is where `sp-chaos -inject drop-unsent-deleted` plants its bug, at the wiring
// and never in the controller: built with -tags chaosbug it is plantedbug_chaos.go's. In
// every real build it gives the publisher back as it is.
func plantBug(p status.Publisher) status.Publisher { return p }
