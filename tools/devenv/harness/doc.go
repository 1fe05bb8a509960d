// Package harness runs real test infrastructure on 127.0.0.1: a Kubernetes control plane
// (etcd, kube-apiserver, controller-manager, scheduler) with kwok as the kubelet of fake
// nodes, optionally one real node (a real kubelet with containerd, realnode*.go), an
// embedded NATS server with JetStream, and the real DCM registry. The parts are
// built from pinned tool modules (tools/) into a per-user cache and every process is
// stopped by PID. Tests use it through testenv; `make run` and `make bench` use it too.
package harness
