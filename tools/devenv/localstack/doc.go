// Package localstack runs the whole DCM loop on one machine for `make run`: the
// harness control plane (or an existing cluster), an embedded NATS with JetStream (or an
// existing one), the real DCM registry (or an existing one), and the service itself,
// registered with it.
package localstack
