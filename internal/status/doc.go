// Package status reports every container's status to DCM: informer events ->
// per-container debounce -> workqueue -> plan (pure: snapshot and last sent status ->
// what to publish and which container-record steps to take) -> CloudEvents on NATS
// and the cluster steps, with nothing lost across NATS outages, restarts and leader
// changes. Only the replica holding the leader lock (a ConfigMap) reports (election.go,
// configmaplock.go).
package status
