// Package deploy installs the service onto the harness cluster the way a user installs it
// on theirs: the image `make image` built, pushed to the real node's registry under its
// real name; the project's Helm chart (deploy/helm/k8s-container-sp) installed with
// Helm's own library; the pods on the real node, where they reach the apiserver through
// the kubernetes Service with their service account, and NATS and DCM's registry on the
// node's bridge. `make deploy` and the tests that prove the service as a pod use it.
package deploy
