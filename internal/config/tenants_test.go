package config

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The safe defaults of issue 34: a registry allow-list, no label prefix, bounds on
// resources, four external ports, mixed visibility exposed (the seed's contract), Always, ephemeral storage.
func TestTenantDefaults(t *testing.T) {
	c, err := Load(required)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	if !slices.Equal(p.Registries, []string{"docker.io", "quay.io", "ghcr.io", "registry.k8s.io", "gcr.io"}) || p.LabelPrefixes != nil ||
		p.LabelKeys != nil || p.ExternalRefused || p.MaxExternalPorts != 4 || p.RefuseMixed ||
		p.MaxCPURatio != 10 || p.MaxMemoryRatio != 4 || p.MinCPU.String() != "10m" || p.MaxCPU.String() != "16" || p.MinMemory.String() != "16Mi" || p.MaxMemory.String() != "64Gi" {
		t.Errorf("policy %+v", p)
	}
	o := c.Objects()
	if o.ImagePullPolicy != corev1.PullAlways || o.EphemeralStorageRequest.String() != "64Mi" || o.EphemeralStorageLimit.String() != "1Gi" ||
		o.LoadBalancerSourceRanges != nil || o.Namespace != "default" || o.ExternalServiceType != corev1.ServiceTypeLoadBalancer {
		t.Errorf("objects %+v", o)
	}
}

func TestTenantSettings(t *testing.T) {
	c, err := Load(append(slices.Clone(required),
		"SP_IMAGE_REGISTRIES=quay.io, *.example.com ,image-registry.openshift-image-registry.svc:5000",
		"SP_LABEL_PREFIXES=example.com/", "SP_LABEL_KEYS=app, tier", "SP_K8S_EXTERNAL_SVC_TYPE=None", "SP_MAX_EXTERNAL_PORTS=0",
		"SP_K8S_MIXED_VISIBILITY=refuse", "SP_K8S_LOAD_BALANCER_SOURCE_RANGES=203.0.113.0/24,2001:db8::/32",
		"SP_MIN_CPU=0", "SP_MAX_CPU=0", "SP_K8S_IMAGE_PULL_POLICY=IfNotPresent", "SP_K8S_EPHEMERAL_STORAGE_REQUEST=0", "SP_K8S_EPHEMERAL_STORAGE_LIMIT=0"))
	if err != nil {
		t.Fatal(err)
	}
	p, o := c.Policy(), c.Objects()
	if !slices.Equal(p.Registries, []string{"quay.io", "*.example.com", "image-registry.openshift-image-registry.svc:5000"}) ||
		!slices.Equal(p.LabelPrefixes, []string{"example.com/"}) || !slices.Equal(p.LabelKeys, []string{"app", "tier"}) || !p.ExternalRefused || p.MaxExternalPorts != 0 || !p.RefuseMixed ||
		!p.MinCPU.IsZero() || !p.MaxCPU.IsZero() {
		t.Errorf("policy %+v", p)
	}
	if o.ImagePullPolicy != corev1.PullIfNotPresent || !o.EphemeralStorageLimit.IsZero() || len(o.LoadBalancerSourceRanges) != 2 {
		t.Errorf("objects %+v", o)
	}
}

func TestTenantSettingsRefused(t *testing.T) {
	for setting, want := range map[string]string{
		"SP_IMAGE_REGISTRIES=quay.io,Quay.IO":                   `SP_IMAGE_REGISTRIES: "Quay.IO" must be lower case`,
		"SP_IMAGE_REGISTRIES=quay.io:99999":                     `"quay.io:99999" has a port`,
		"SP_IMAGE_REGISTRIES=https://quay.io":                   `"https://quay.io"`,
		"SP_IMAGE_REGISTRIES=[::1":                              `"[::1" is not a host`,
		"SP_IMAGE_REGISTRIES=[fe80::zz]:5000":                   `"[fe80::zz]:5000" is not a host`,
		"SP_IMAGE_REGISTRIES= , ":                               "SP_IMAGE_REGISTRIES: must list at least one registry host",
		"SP_LABEL_PREFIXES=example.com":                         `SP_LABEL_PREFIXES: "example.com" is not a label key prefix`,
		"SP_LABEL_PREFIXES=sidecar.istio.io/":                   `"sidecar.istio.io/" is under istio.io, which is reserved`,
		"SP_LABEL_PREFIXES=app.kubernetes.io/":                  "under kubernetes.io",
		"SP_LABEL_KEYS=app,example.com/x":                       `SP_LABEL_KEYS: "example.com/x" is not an unprefixed label key`,
		"SP_LABEL_KEYS=pod-template-hash":                       `SP_LABEL_KEYS: "pod-template-hash" is reserved`,
		"SP_MAX_MEMORY_RATIO=0.5":                               "SP_MAX_MEMORY_RATIO (0.5): must be 0 (none) or 1 or more",
		"SP_MAX_CPU=lots":                                       `SP_MAX_CPU="lots": not a Kubernetes quantity`,
		"SP_MIN_MEMORY=-1Gi":                                    `SP_MIN_MEMORY="-1Gi"`,
		"SP_MIN_CPU=32":                                         "SP_MIN_CPU (32) must not exceed SP_MAX_CPU (16)",
		"SP_MAX_EXTERNAL_PORTS=-1":                              "SP_MAX_EXTERNAL_PORTS: must be 0",
		"SP_K8S_MIXED_VISIBILITY=split":                         `SP_K8S_MIXED_VISIBILITY="split": must be refuse or expose`,
		"SP_K8S_LOAD_BALANCER_SOURCE_RANGES=203.0.113.0/24,any": `SP_K8S_LOAD_BALANCER_SOURCE_RANGES: "any" is not a CIDR`,
		"SP_K8S_IMAGE_PULL_POLICY=Never":                        `SP_K8S_IMAGE_PULL_POLICY="Never": must be Always or IfNotPresent`,
		"SP_K8S_EPHEMERAL_STORAGE_REQUEST=2Gi":                  "SP_K8S_EPHEMERAL_STORAGE_REQUEST (2Gi) must not exceed SP_K8S_EPHEMERAL_STORAGE_LIMIT (1Gi)",
	} {
		_, err := Load(append(slices.Clone(required), setting))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", setting, err, want)
		}
	}
}

// The resolver may dial the hosts SP_IMAGE_REGISTRIES lists exactly, IPv6 literals and
// ports included, as a dialer names them; never a glob's or a path prefix's host.
func TestResolverTrustsExactRegistryHosts(t *testing.T) {
	c, err := Load(append(slices.Clone(required),
		"SP_IMAGE_REGISTRIES=registry.example:5000,[fd00::1]:5000,[fd00::2],10.88.0.1:5000,*.example.com,quay.io/org/"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ResolverOptions().Trusted, []string{"registry.example", "fd00::1", "fd00::2", "10.88.0.1"}; !slices.Equal(got, want) {
		t.Errorf("trusted %q, want %q", got, want)
	}
}
