// Package testbed is the world the benchmark and the chaos run both measure: a fresh
// harness control plane with NATS (JetStream), the service binary built from this
// checkout, and that binary run as processes (Service) against them, each with its own
// address, log file and /metrics. Neither bench nor chaos imports the other: what they
// share is here.
package testbed
