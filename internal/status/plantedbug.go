//go:build !chaosbug

package status

import "context"

// plantedBug is where `sp-chaos -inject drop-unsent-deleted` plants its bug, to show the
// chaos run's checker catches what it claims to: built with -tags chaosbug it is
// plantedbug_chaos.go's. Here, in every real build, it does nothing and the compiler
// drops the call.
func plantedBug(context.Context, Cluster, Plan) bool { return false }
