// Package devenv is the root of the developer tooling of k8s-container-sp: a Go module of
// its own (tools/devenv/go.mod), so the service's go.mod names only what the service
// links. Nothing here is linked into the k8s-container-sp binary. The go.work at the
// repository root puts both modules in one workspace; the Makefile's go commands name
// both (./... ./tools/devenv/...), because ./... stops at a nested module.
//
//   - harness: a real control plane (etcd, kube-apiserver, controller-manager, scheduler,
//     kwok; optionally a real node), NATS and the DCM registry on 127.0.0.1, built from
//     the pinned tool modules in tools/; harness/testenv is what integration tests use.
//   - e2e/app, e2e/store, e2e/binary: the service's integration tests that need the
//     harness (of internal/app; of internal/store's methods called directly, with hooks
//     at exact requests for the races; and of the built binary).
//   - testbed: a control plane, NATS and the service binary run as processes: what
//     bench (make bench) and chaos (make chaos, with its planted bugs) share.
//   - agent: a test double of DCM's environment agent (registration, health poll, the
//     forwarding of creates and deletes), with where it may differ from the real one.
//   - localstack: the whole DCM loop on one machine (make run).
//   - model: the capacity model (make model): the service's store, API and status
//     controller fed by an in-process list-watch server with up to 150,000 containers.
//   - proc: starting child processes and finding free ports, for all of the above.
//   - cmd/sp-harness, sp-bench, sp-model, sp-chaos, sp-local: the commands behind the make targets.
//
// The tooling may import the service's internal packages: Go's internal rule is by import
// path, and this module's path is under the service's.
package devenv
