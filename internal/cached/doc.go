// Package cached is what the store's informer caches hold: every container's
// Deployment, pods, Service and record, each cut to what the service reads of it and
// packed (cached.go, compact.go, packed.go), made by the informers' transform (Of) and
// read back as internal/container's views (AppendView, RecordOf).
package cached
