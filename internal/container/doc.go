// Package container is the container domain: it validates a DCM container spec, maps it to
// the Kubernetes objects that run it, and maps those objects back to the API resource and
// its status. Everything here is pure: no client calls.
package container
