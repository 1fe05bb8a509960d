package config

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Tenants are what the operator lets a tenant's container ask for and what every pod is
// built with. Tenants are strangers to each other and to the operator: the defaults are
// the safe ones (docs/security.md), each a knob.
type Tenants struct {
	ImageRegistries string `env:"SP_IMAGE_REGISTRIES" envDefault:"docker.io,quay.io,ghcr.io,registry.k8s.io,gcr.io" help:"image registries a container may pull from, comma-separated: quay.io, registry.example.com:5000 (that port only), gcr.io/distroless/ (repositories under that path only), *.example.com (its subdomains), * (any public host); IP addresses, localhost, cluster-internal names (*.svc, *.cluster.local, kubernetes.default, names without a dot) and, under a wildcard, names without a public suffix are refused unless listed exactly"`
	LabelKeys       string `env:"SP_LABEL_KEYS" help:"the only unprefixed label keys a container may use, comma-separated (empty: any key but the reserved ones: io.kubernetes.*, io.cilium.*, pcns.*, pcsa.*, aadpodidbinding, pod-template-hash, controller-revision-hash)"`
	LabelPrefixes   string `env:"SP_LABEL_PREFIXES" help:"label key prefixes a container's labels may carry besides unprefixed keys, comma-separated (e.g. example.com/); kubernetes.io, k8s.io, dcm.project and the meshes' and policy engines' domains are refused whatever this says"`
	MinCPU          string `env:"SP_MIN_CPU" envDefault:"10m" help:"smallest cpu request (spec.resources.cpu.min) a container may ask for, a Kubernetes quantity; 0 = none"`
	MaxCPU          string `env:"SP_MAX_CPU" envDefault:"16" help:"largest cpu limit (spec.resources.cpu.max) a container may ask for, a Kubernetes quantity; 0 = none"`
	MinMemory       string `env:"SP_MIN_MEMORY" envDefault:"16Mi" help:"smallest memory request (spec.resources.memory.min), a Kubernetes quantity; 0 = none"`
	MaxMemory       string `env:"SP_MAX_MEMORY" envDefault:"64Gi" help:"largest memory limit (spec.resources.memory.max), a Kubernetes quantity; 0 = none"`
	// The ratios bound what a container may use beyond what the scheduler reserved for
	// it, as a LimitRange's maxLimitRequestRatio does: memory is not compressible, so
	// its overcommit is what gets neighbours killed or evicted.
	MaxCPURatio    float64 `env:"SP_MAX_CPU_RATIO" envDefault:"10" help:"largest cpu.max / cpu.min a container may ask for (cpu is throttled, not killed); 0 = none"`
	MaxMemoryRatio float64 `env:"SP_MAX_MEMORY_RATIO" envDefault:"4" help:"largest memory.max / memory.min a container may ask for (memory beyond the request is taken from neighbours on the node); 0 = none"`
	// MaxExternalPorts: each external port takes a node port from the cluster's shared
	// range (2,768 by default) or a load balancer.
	MaxExternalPorts int    `env:"SP_MAX_EXTERNAL_PORTS" envDefault:"4" unit:"ports" help:"external ports one container may have; 0 = no cap (set a ResourceQuota on services.nodeports too)"`
	MixedVisibility  string `env:"SP_K8S_MIXED_VISIBILITY" envDefault:"expose" help:"a container with an external port and an internal one: expose (the seed's contract: one Service of SP_K8S_EXTERNAL_SVC_TYPE exposes both; the create's answer and GET say external for both) or refuse (400 naming the internal port)"`
	// LoadBalancerSourceRanges: empty leaves the cloud's default (any source).
	LoadBalancerSourceRanges string `env:"SP_K8S_LOAD_BALANCER_SOURCE_RANGES" help:"client CIDRs a LoadBalancer Service admits, comma-separated (e.g. 203.0.113.0/24); empty = the cloud's default, any"`
	ImagePullPolicy          string `env:"SP_K8S_IMAGE_PULL_POLICY" envDefault:"Always" help:"imagePullPolicy of every container: Always (the node checks the right to the image at every start) or IfNotPresent (a private image another tenant's pull left on the node runs without credentials)"`
	EphemeralStorageRequest  string `env:"SP_K8S_EPHEMERAL_STORAGE_REQUEST" envDefault:"64Mi" help:"ephemeral-storage request of every container (node disk: writable layer, logs), a Kubernetes quantity; 0 = none"`
	EphemeralStorageLimit    string `env:"SP_K8S_EPHEMERAL_STORAGE_LIMIT" envDefault:"1Gi" help:"ephemeral-storage limit of every container: past it the kubelet evicts that pod, not its neighbours; 0 = none"`
}

// ExternalNone is SP_K8S_EXTERNAL_SVC_TYPE's value that refuses external ports.
const ExternalNone = "None"

// Policy is the container.Policy the settings make (Load has validated them).
func (c *Config) Policy() container.Policy {
	t := c.Tenants
	p := container.Policy{
		Registries:       list(t.ImageRegistries),
		LabelPrefixes:    list(t.LabelPrefixes),
		LabelKeys:        list(t.LabelKeys),
		ExternalRefused:  c.Kubernetes.ExternalServiceType == ExternalNone,
		MaxExternalPorts: t.MaxExternalPorts,
		RefuseMixed:      t.MixedVisibility == "refuse",
		MaxCPURatio:      t.MaxCPURatio,
		MaxMemoryRatio:   t.MaxMemoryRatio,
	}
	p.MinCPU, _ = resource.ParseQuantity(t.MinCPU)
	p.MaxCPU, _ = resource.ParseQuantity(t.MaxCPU)
	p.MinMemory, _ = resource.ParseQuantity(t.MinMemory)
	p.MaxMemory, _ = resource.ParseQuantity(t.MaxMemory)
	return p
}

// Objects are the container.Options every container is built with, but the pod
// security profile, which the service learns at start (SP_K8S_POD_SECURITY=auto).
func (c *Config) Objects() container.Options {
	t := c.Tenants
	o := container.Options{
		Namespace:                c.Kubernetes.Namespace,
		ExternalServiceType:      corev1.ServiceType(c.Kubernetes.ExternalServiceType),
		LoadBalancerSourceRanges: list(t.LoadBalancerSourceRanges),
		ImagePullPolicy:          corev1.PullPolicy(t.ImagePullPolicy),
		ImagePullSecrets:         c.PullSecretNames(),
	}
	o.EphemeralStorageRequest, _ = resource.ParseQuantity(t.EphemeralStorageRequest)
	o.EphemeralStorageLimit, _ = resource.ParseQuantity(t.EphemeralStorageLimit)
	return o
}

// list splits a comma-separated setting, dropping blanks; nil when empty.
func list(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (t Tenants) validate() []string {
	var p []string
	for _, e := range list(t.ImageRegistries) {
		if msg := container.RegistryEntryProblem(e); msg != "" {
			p = append(p, fmt.Sprintf("SP_IMAGE_REGISTRIES: %q %s", e, msg))
		}
	}
	if len(list(t.ImageRegistries)) == 0 {
		p = append(p, "SP_IMAGE_REGISTRIES: must list at least one registry host (* for any)")
	}
	for _, e := range list(t.LabelPrefixes) {
		name, rest, ok := strings.Cut(e, "/")
		switch {
		case !ok || rest != "" || len(validation.IsDNS1123Subdomain(name)) > 0:
			p = append(p, fmt.Sprintf("SP_LABEL_PREFIXES: %q is not a label key prefix (a DNS subdomain followed by /, e.g. example.com/)", e))
		case container.ReservedLabelDomain(name) != "":
			p = append(p, fmt.Sprintf("SP_LABEL_PREFIXES: %q is under %s, which is reserved and never allowed", e, container.ReservedLabelDomain(name)))
		}
	}
	for _, k := range list(t.LabelKeys) {
		if strings.Contains(k, "/") || len(validation.IsQualifiedName(k)) > 0 {
			p = append(p, fmt.Sprintf("SP_LABEL_KEYS: %q is not an unprefixed label key", k))
		} else if container.ReservedLabelKey(k) {
			p = append(p, fmt.Sprintf("SP_LABEL_KEYS: %q is reserved and never allowed", k))
		}
	}
	quantities := []struct{ name, value string }{
		{"SP_MIN_CPU", t.MinCPU}, {"SP_MAX_CPU", t.MaxCPU}, {"SP_MIN_MEMORY", t.MinMemory}, {"SP_MAX_MEMORY", t.MaxMemory},
		{"SP_K8S_EPHEMERAL_STORAGE_REQUEST", t.EphemeralStorageRequest}, {"SP_K8S_EPHEMERAL_STORAGE_LIMIT", t.EphemeralStorageLimit},
	}
	parsed := map[string]resource.Quantity{}
	for _, q := range quantities {
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			p = append(p, fmt.Sprintf("%s=%q: not a Kubernetes quantity of 0 or more (e.g. 500m, 2, 512Mi, 4Gi)", q.name, q.value))
			continue
		}
		parsed[q.name] = v
	}
	for _, pair := range [][2]string{{"SP_MIN_CPU", "SP_MAX_CPU"}, {"SP_MIN_MEMORY", "SP_MAX_MEMORY"}, {"SP_K8S_EPHEMERAL_STORAGE_REQUEST", "SP_K8S_EPHEMERAL_STORAGE_LIMIT"}} {
		lo, okLo := parsed[pair[0]]
		hi, okHi := parsed[pair[1]]
		if okLo && okHi && !hi.IsZero() && lo.Cmp(hi) > 0 {
			p = append(p, fmt.Sprintf("%s (%s) must not exceed %s (%s)", pair[0], lo.String(), pair[1], hi.String()))
		}
	}
	if t.MaxCPURatio != 0 && t.MaxCPURatio < 1 || t.MaxMemoryRatio != 0 && t.MaxMemoryRatio < 1 {
		p = append(p, fmt.Sprintf("SP_MAX_CPU_RATIO (%g) and SP_MAX_MEMORY_RATIO (%g): must be 0 (none) or 1 or more", t.MaxCPURatio, t.MaxMemoryRatio))
	}
	if t.MaxExternalPorts < 0 {
		p = append(p, "SP_MAX_EXTERNAL_PORTS: must be 0 (no cap) or more")
	}
	if m := t.MixedVisibility; m != "refuse" && m != "expose" {
		p = append(p, fmt.Sprintf("SP_K8S_MIXED_VISIBILITY=%q: must be refuse or expose", m))
	}
	for _, r := range list(t.LoadBalancerSourceRanges) {
		if _, err := netip.ParsePrefix(r); err != nil {
			p = append(p, fmt.Sprintf("SP_K8S_LOAD_BALANCER_SOURCE_RANGES: %q is not a CIDR (e.g. 203.0.113.0/24)", r))
		}
	}
	if pp := t.ImagePullPolicy; pp != string(corev1.PullAlways) && pp != string(corev1.PullIfNotPresent) {
		p = append(p, fmt.Sprintf("SP_K8S_IMAGE_PULL_POLICY=%q: must be Always or IfNotPresent", pp))
	}
	return p
}
