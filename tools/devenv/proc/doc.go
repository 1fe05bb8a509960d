// Package proc is how the tooling runs child processes on this machine: Tie starts one
// that cannot outlive the tool (a killed test run leaves nothing behind), Detach one that
// must (make cluster-up), and FreePorts finds loopback ports for them to listen on. Every
// part of the tooling (harness, bench, chaos, the integration tests) uses these, so the
// rules live in one place.
package proc
