// Package binary holds the integration tests of the k8s-container-sp binary itself (the
// command in cmd/k8s-container-sp, built from this checkout and run as processes) that
// need the harness: two replicas failing over, `release` against a real control plane.
// The binary's tests that need nothing but the binary stay beside it.
package binary
