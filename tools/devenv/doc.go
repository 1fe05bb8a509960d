// Package devenv holds the tools for people working on the service, not the service:
// the test harness (a real control plane, NATS and the DCM registry on 127.0.0.1),
// the benchmark harness and the local stack behind `make run`. Nothing under it is
// linked into the k8s-container-sp binary.
package devenv
