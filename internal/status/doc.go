// Package status is the status controller: informer events -> per-container debounce
// -> workqueue (controller.go) -> Reconcile (reconcile.go): plan (pure: snapshot and
// last sent status -> orphans to delete, what to publish, which record steps to take),
// then the cluster steps and CloudEvents on NATS, with nothing lost across NATS
// outages, restarts and leader changes. Only the replica that leads
// (internal/election) runs it.
package status
