// Package status is the status controller: informer events are debounced per container
// into a workqueue; Reconcile plans each from its snapshot (a pure function), then deletes
// orphans, publishes CloudEvents on NATS and finalizes records. Nothing is lost across
// NATS outages, restarts or leader changes. Only the leader runs it (internal/election).
package status
