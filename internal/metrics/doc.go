// Package metrics defines the provider's Prometheus metrics (served on /metrics):
// HTTP requests, Kubernetes calls, status events, informer sync, leadership and
// registration. Components report through small hooks so they do not depend on it.
package metrics
