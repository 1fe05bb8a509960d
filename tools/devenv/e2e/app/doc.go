// Package app holds the integration tests of internal/app: the whole service wired by
// app.New, run in the test process against the harness's real control plane, NATS and
// DCM registry (testenv). They moved here from internal/app so the service's module
// needs none of the harness's dependencies; internal/app keeps its unit tests.
package app
