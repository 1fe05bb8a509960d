// Package store is the cluster side of the container API: it creates and deletes a
// container's objects through client-go and answers reads from client-go's informers,
// so a GET or LIST of a known container costs no apiserver request.
//
// A container is its record, a ConfigMap named after its id (internal/container,
// record.go), and the Deployment the record controls; the Deployment and the Service
// carry an ownerReference to the record, whose UID is the container's incarnation.
// Creating the record reserves the id; deleting it deletes the container. The record's
// finalizer keeps a deleted record until the status controller has delivered its
// DELETED; what a lost answer, a race or a crash left under it, the controller deletes
// as an orphan first (the garbage collector waits for the record).
//
// The decisions are pure functions in decide.go, table-tested without a cluster
// (decide_test.go); the other files make the client calls around them, whose exact
// requests and handling of each answer are table-tested against a scripted apiserver
// (scripted_test.go: create_test.go, delete_test.go), and what the cluster does with
// them against the real control plane (tools/devenv/e2e/store):
//
//   - create.go: Create makes the record (claimID decides about a record that holds the
//     id), then the Deployment and the Service at once; a failure takes the record back
//     (undo). Two round trips, three requests.
//   - delete.go: Delete deletes the record, the Deployment and the Service at once
//     (planDelete; three requests), reading the record by name first when the cache
//     shows none.
//   - confirm.go: a GET that misses the cache reads the record by name before it
//     answers 404 (answerMiss).
//   - record.go: the writes after a create (Finalize, DeleteRecord, DeleteOrphans),
//     each request guarded by the object's UID.
//   - apiserver_snapshot.go: Confirmed, a container as the apiserver has it, which the
//     status controller plans again from before any destructive step.
//   - release.go: Release, the `release` command (uninstall): every record deleted,
//     its workloads orphaned and left running.
//   - store.go: the informers, one per kind, label-selected and started one after
//     another; informers.go: their indexers by container id, this replica's own writes
//     laid over them (Store.wrote), so a read that follows a create or a DELETE on this
//     replica sees it before the watch does, and the ids in order, which page a LIST;
//     object.go: the transform that cuts each object to the view internal/container
//     reads. capacity.go: Count, what SP_MAX_CONTAINERS bounds.
//   - freshness.go: each cache's watch is tracked (internal/freshness: cacheState, a
//     pure function of what its ListerWatcher saw and when); GET and LIST answer 503
//     once a cache they read has been out of date past the bound (Store.MaxStaleness
//     for a broken watch, SilenceBound for a silent one).
//   - errors.go: ErrNotFound, and a refusal by RBAC named (internal/access); every
//     other client-go error is classified by internal/kubeerr.
package store
