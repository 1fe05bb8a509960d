// Package app assembles the provider from its configuration: Kubernetes client, store
// (informer caches), HTTP API, NATS and the status controller (run by the elected
// replica); and runs it until its context ends, then stops gracefully. The binary and
// the integration tests both use it, so tests run what ships.
package app
