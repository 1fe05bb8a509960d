// Package model is the in-process capacity model of the service (make model, issue 26):
// the service's real store, HTTP API and status controller (internal/app as the binary
// wires them) fed by a list-watch server (Server) that speaks the part of the
// Kubernetes REST API the service uses, for 1,000 to 150,000 running containers, and
// publishing to a real NATS server; no apiserver, no etcd: this machine cannot hold one
// with 600,000 objects.
//
// The objects are the service's own (container.Build, container.NewRecord) with what the
// apiserver, the controllers and the kubelet add (objects.go), encoded from per-kind
// templates cut at the values that differ between containers (template.go: byte for
// byte Build's, checked) and generated while they are written, never held: the
// server's memory does not depend on the number of containers. Run measures each size
// in a child process of its own (the service alone: the server, NATS and the event
// subscriber stay in the parent), so its RSS is the service's.
package model
