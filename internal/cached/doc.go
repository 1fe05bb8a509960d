// Package cached is the store's cache of the cluster: one entry per container (table.go)
// holding its record, Deployment, pods and Service, each cut to what the service reads
// of it and packed (cached.go, compact.go, packed.go). client-go's reflectors list and
// watch each kind straight into it (source.go), with no informer in between, and
// readers get internal/container's views back (Table.Snapshot, Table.Walk).
package cached
