// Package chart renders the Helm chart (deploy/helm/k8s-container-sp) as `helm template`
// does, without a cluster or the helm binary: with Helm's own chart loader, values
// schema validation and template engine (helm.sh/helm/v3, the version the Makefile's
// helm is built from), so the chart's tests are plain Go tests that need nothing built
// first.
//
// Its tests hold the chart to the service and to the kustomize base (deploy/base): the
// Role grants exactly deploy/base/role.yaml's rules; nothing in either pins a uid, gid or
// fsGroup (OpenShift's restricted-v2 assigns them); every variable the chart sets is one
// the service reads (internal/config) and the defaults make a configuration it accepts;
// the provider's own pods are selected by a label the service refuses in a container's
// spec, so no tenant pod can join them; a values file of the wrong type is refused,
// naming the field; kubeconfigRef mounts the Secret and sets SP_K8S_KUBECONFIG. And the
// isolation by default (isolation_test.go): tenants' containers in a namespace of their
// own, the provider's NetworkPolicy on and admitting DCM's namespace alone, the
// containers' policies (ingress on the exposed-<i> ports the service names, egress to
// DNS, the namespace and the internet outside the private ranges), the same in
// deploy/base as kustomize builds it.
package chart
