// Package store is the cluster side of the container API: it creates and deletes a
// container's objects through client-go and answers reads from shared informer caches,
// so a GET or LIST costs no apiserver request once the caches are synced.
//
// Every container has a record, a ConfigMap named after its id (see
// internal/container/record.go): creating it reserves the id, and it stays while DCM is
// owed the container's DELETED. The decisions about records and reads are pure
// functions in decide.go, table-tested without a cluster (decide_test.go); the other
// files make the client calls around them:
//
//   - create.go: Create reserves the id (claimID decides what to do with a record that
//     holds it), checks the workload at the apiserver (buildAfterReserving), creates
//     the Service and then the Deployment (its commit point), and rolls back on failure
//     (finding what it made by its incarnation).
//   - delete.go: Delete reads the id's objects and record at the apiserver, planDelete
//     decides (404; wait for a create in progress, or 409; mark the record owed and
//     delete them all; clean up an abandoned create).
//   - confirm.go: a GET that misses the cache asks the apiserver before answering 404
//     (answerMiss: 404, 503, or wait for the cache).
//   - record.go: every request that writes a record (reserve, EnsureRecord with
//     fixRecord, DeleteRecord, and the uninstall's delete).
//   - apiserver_snapshot.go: Confirmed, a container as the apiserver has it, which the
//     status reporter plans again from before any destructive step.
//   - release.go: Release, the `release` command (uninstall): every record deleted,
//     workloads left running.
//   - store.go, transform.go, cached.go, compact.go, packed.go: the informers and their
//     caches, each object cut to what readers need and packed (one string of its
//     variable-length fields; a container's objects share one copy of its id).
//   - index.go: the ordered id set that pages a LIST; capacity.go: Count, what
//     SP_MAX_CONTAINERS bounds.
//   - freshness.go: each cache knows whether its watch is healthy (cacheState, a pure
//     function of what its ListerWatcher saw and when); GET and LIST answer 503 once a
//     cache they read has been out of date past the bound (Store.MaxStaleness for a
//     broken watch, SilenceBound for a silent one).
//   - errors.go: client-go errors classified into what a client can act on.
//   - permissions.go: the RBAC the service needs (Required, deploy/base/role.yaml).
package store
