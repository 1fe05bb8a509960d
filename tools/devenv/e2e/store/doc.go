// Package store holds the integration tests of internal/store that call the store's
// methods directly: a store.Store on a real clientset, against the harness's real
// control plane (testenv), with a wrapping RoundTripper that runs a test's hook at an
// exact request (before it is sent, or once the apiserver answered it) or holds a watch.
// They script the interleavings a race needs (an answer lost, a record deleted between
// two reads, a cache that has not seen an object yet) deterministically. Tests that go
// through the HTTP API are in ../app.
package store
