// Package store is the cluster side of the container API: it creates and deletes a
// container's objects through client-go and answers reads from client-go's informers,
// so a GET or LIST of a known container costs no apiserver request.
//
// A container is its record, a ConfigMap named after its id, and the Deployment and
// Service the record owns; the record's UID is the container's incarnation. Creating
// the record reserves the id and deleting it deletes the container. The record's
// finalizer keeps it until the status controller has delivered its DELETED.
//
// Decisions are pure functions (decide.go) with table tests; the other files make the
// client calls around them. docs/architecture.md walks a create and a DELETE through
// these files.
package store
