// Package bench measures the service against the physical limit — the Kubernetes API
// itself, measured in the same run on the same machine — and writes the results
// (docs/reports/benchmarks.md and .json). `make bench` runs it.
package bench
