// Package testenv is what every integration test uses: one real control plane per
// `go test` run, a fresh namespace per test, an embedded NATS server per test, and
// clean-up of all of it.
//
// A package opts in with
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// The cluster starts lazily, on the first test that asks for it, and is stopped when the
// test binary ends. When KUBECONFIG names a harness cluster (context "sp-harness", as
// `make test` and `make cluster-up` provide) that cluster is reused instead, so all test
// packages of one run share it. The same goes for the optional real node (RealNode).
package testenv
