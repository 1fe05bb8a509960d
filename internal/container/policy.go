package container

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"golang.org/x/net/publicsuffix"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Policy is what the operator lets a tenant's spec ask for (the settings of
// internal/config's Tenants). Every tenant is a stranger to the others and to the
// operator, so each field of a spec is checked against it before anything is built.
// The zero Policy applies only the rules that hold whatever the operator says (the
// image hosts and label prefixes that are always refused); the settings' defaults are
// the safe ones.
type Policy struct {
	// Registries are the image registry hosts a reference may name: "quay.io",
	// "registry.example.com:5000" (that port only), "gcr.io/distroless/" (repositories
	// under that path only), "*.example.com" (its subdomains), "*" (any host). nil: any
	// host the fixed rules allow. A host the fixed rules refuse, or one without a public
	// suffix, is allowed only when listed exactly, never by a glob.
	Registries []string
	// LabelPrefixes are the label key prefixes ("example.com/") a tenant may use besides
	// unprefixed keys. ReservedLabelDomains are refused whatever this says.
	LabelPrefixes []string
	// LabelKeys, when set, are the only unprefixed label keys a tenant may use.
	LabelKeys []string
	// ExternalRefused: no port may be external (SP_K8S_EXTERNAL_SVC_TYPE=None).
	ExternalRefused bool
	// MaxExternalPorts caps a container's external ports; 0: no cap.
	MaxExternalPorts int
	// RefuseMixed refuses internal ports beside external ones: the one Service of a
	// container has one type, so with an external port every exposed port is external.
	RefuseMixed bool
	// Bounds of spec.resources; a zero Quantity is no bound. Min* bound the requests
	// (min), Max* the limits (max).
	MinCPU, MaxCPU, MinMemory, MaxMemory resource.Quantity
	// MaxCPURatio and MaxMemoryRatio bound max / min of each; 0: no bound.
	MaxCPURatio, MaxMemoryRatio float64
}

// ReservedLabelDomains are label key prefixes no tenant may use, whatever the
// operator allows, each with its subdomains: Kubernetes' own (well-known labels that
// Services, controllers and schedulers select on), DCM's, and the meshes', policy
// engines' and platforms' that grant a pod an identity, a sidecar, a credential or an
// exemption ("sidecar.istio.io/inject", "security.istio.io/tlsMode",
// "azure.workload.identity/use", "policy.cilium.io/..."): a tenant's pod with one of
// them could join another workload or claim what the platform grants by label.
var ReservedLabelDomains = []string{
	"kubernetes.io", "k8s.io", "x-k8s.io", "dcm.project",
	"istio.io", "linkerd.io", "kuma.io", "consul.hashicorp.com", "cilium.io", "projectcalico.org",
	"openshift.io", "knative.dev", "kyverno.io", "gke.io", "azure.workload.identity",
}

// ReservedLabelDomain is the reserved domain a label key prefix (without its "/") falls
// under, or "".
func ReservedLabelDomain(prefix string) string {
	prefix = strings.ToLower(prefix)
	for _, d := range ReservedLabelDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return d
		}
	}
	return ""
}

// ReservedLabelKeys and ReservedLabelKeyPrefixes are unprefixed label keys other
// systems act on: the kubelet's and the runtime's (io.kubernetes.), Cilium's and
// Calico's identities (io.cilium., pcns., pcsa.), AAD pod identity's binding, and the
// hashes the Deployment and StatefulSet controllers select their pods by.
var (
	ReservedLabelKeys        = []string{"aadpodidbinding", "pod-template-hash", "controller-revision-hash"}
	ReservedLabelKeyPrefixes = []string{"io.kubernetes.", "io.cilium.", "pcns.", "pcsa."}
)

// labelKeyProblem says why a tenant may not use a label key, or "". The key is
// otherwise valid (IsQualifiedName is checked apart).
func (p Policy) labelKeyProblem(key string) string {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return p.unprefixedKeyProblem(key)
	}
	key = Clip(key, MaxQuoted)
	if d := ReservedLabelDomain(prefix); d != "" {
		return fmt.Sprintf("label %q: the prefix %q is reserved (%s and its subdomains are refused: they select or grant something outside the container)", key, prefix+"/", d)
	}
	if slices.Contains(p.LabelPrefixes, prefix+"/") {
		return ""
	}
	allowed := "none"
	if len(p.LabelPrefixes) > 0 {
		allowed = strings.Join(p.LabelPrefixes, ", ")
	}
	return fmt.Sprintf("label %q: a label key must be unprefixed or carry a prefix this provider allows (SP_LABEL_PREFIXES: %s)", key, allowed)
}

// ReservedLabelKey reports an unprefixed key another system acts on.
func ReservedLabelKey(key string) bool {
	key = strings.ToLower(key)
	return slices.Contains(ReservedLabelKeys, key) ||
		slices.ContainsFunc(ReservedLabelKeyPrefixes, func(r string) bool { return strings.HasPrefix(key, r) })
}

// unprefixedKeyProblem is labelKeyProblem for a key without a prefix.
func (p Policy) unprefixedKeyProblem(key string) string {
	if ReservedLabelKey(key) {
		return fmt.Sprintf("label %q: the key is reserved (another system acts on it: a runtime, a network policy engine, an identity or a controller)", Clip(key, MaxQuoted))
	}
	if p.LabelKeys != nil && !slices.Contains(p.LabelKeys, key) {
		return fmt.Sprintf("label %q: this provider allows only these unprefixed keys (SP_LABEL_KEYS: %s)", Clip(key, MaxQuoted), strings.Join(p.LabelKeys, ", "))
	}
	return ""
}

// Registry host rules. What a node pulls from it reaches from the node's own network,
// where no NetworkPolicy applies: an image reference must name a registry by a public
// DNS name, never the node's loopback, a cloud's metadata address, the cluster's
// Services or an address of the node's network.
const (
	ruleIPLiteral       = "an IP address (registries are named by DNS)"
	ruleLoopback        = "a loopback name (localhost)"
	ruleClusterInternal = "a cluster-internal name"
	ruleSingleLabel     = "a name without a domain (resolved by the node's search path)"
)

// internalSuffixes are DNS names that resolve inside a cluster, a node or a private
// network, never on the public internet.
var internalSuffixes = []string{
	".svc", ".cluster.local", ".local", ".localdomain", ".internal", ".home.arpa", ".lan",
}

// hostRule is the fixed rule a registry host breaks, or "". host is lower case, without
// its port.
func hostRule(host string) string {
	host = strings.TrimSuffix(host, ".")
	if strings.HasPrefix(host, "[") || isIPLike(host) {
		return ruleIPLiteral
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return ruleLoopback
	}
	if host == "kubernetes.default" || strings.HasPrefix(host, "kubernetes.default.") {
		return ruleClusterInternal
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(host, s) {
			return ruleClusterInternal
		}
	}
	if !strings.Contains(host, ".") {
		return ruleSingleLabel
	}
	return ""
}

// isIPLike reports a host a resolver may read as an address: an IP literal, and the
// forms inet_aton takes (2130706433, 0x7f.1, 127.1): a name whose last label is all
// digits or hexadecimal with 0x (no top-level domain is).
func isIPLike(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	last := host[strings.LastIndex(host, ".")+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// splitHostPort splits a reference's domain ("quay.io", "localhost:5000",
// "[::1]:10250") into its lower-case host and port ("" when none).
func splitHostPort(domain string) (host, port string) {
	domain = strings.ToLower(domain)
	if strings.HasPrefix(domain, "[") {
		if i := strings.Index(domain, "]"); i >= 0 {
			return domain[:i+1], strings.TrimPrefix(domain[i+1:], ":")
		}
		return domain, ""
	}
	host, port, _ = strings.Cut(domain, ":")
	return host, port
}

// RegistryHost is the host a registry entry or a reference's domain names, without its
// port and an IPv6 literal's brackets: what a dialer sees.
func RegistryHost(domain string) string {
	host, _ := splitHostPort(domain)
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// registryProblem says why the policy refuses an image from domain (a reference's
// registry part, as distribution/reference normalizes it: docker.io for "nginx") and
// repository path (library/nginx), or "".
func (p Policy) registryProblem(domain, path string) string {
	host, port := splitHostPort(domain)
	// An entry names a host and, after a colon, a port: "h" is h without a port (the
	// registry's default), "h:5000" that port only; then, after a slash, a repository
	// path prefix; "*.example.com" the subdomains of example.com (not example.com), "*"
	// any host on any port. exact: globs do not count.
	listed := func(exact bool) bool {
		for _, e := range p.Registries {
			e = strings.ToLower(e)
			eDomain, ePath, _ := strings.Cut(e, "/")
			eHost, ePort := splitHostPort(eDomain)
			switch {
			case e == "*":
				if !exact && publicSuffixed(host) {
					return true
				}
			case ePort != port || !strings.HasPrefix(path+"/", ePath):
			case eHost == host:
				return true
			case !exact && strings.HasPrefix(eHost, "*.") && strings.HasSuffix(host, eHost[1:]) && publicSuffixed(host):
				return true
			}
		}
		return false
	}
	domain = Clip(domain, MaxQuoted)
	if rule := hostRule(host); rule != "" {
		if listed(true) {
			return ""
		}
		return fmt.Sprintf("registry host %q is %s: images from it are refused unless the operator lists that host in SP_IMAGE_REGISTRIES", domain, rule)
	}
	if p.Registries == nil || listed(false) {
		return ""
	}
	if slices.ContainsFunc(p.Registries, func(e string) bool { return strings.HasPrefix(e, "*") }) && !publicSuffixed(host) {
		return fmt.Sprintf("registry host %q has no public suffix: wildcards match only public names, so the operator must list it exactly (SP_IMAGE_REGISTRIES: %s)", domain, strings.Join(p.Registries, ", "))
	}
	return fmt.Sprintf("registry %q is not one this provider pulls from (SP_IMAGE_REGISTRIES: %s)", Clip(domain+"/"+path, MaxQuoted), strings.Join(p.Registries, ", "))
}

// publicSuffixed: host ends in a public suffix of the ICANN section (io, com, co.uk)
// and is more than the suffix. Names like nats.dcm, registry.corp or
// kube-dns.kube-system resolve only inside a network, through the node's resolver.
func publicSuffixed(host string) bool {
	suffix, icann := publicsuffix.PublicSuffix(host)
	return icann && suffix != host
}

// RegistryEntryProblem says what is wrong with one entry of Policy.Registries (a
// setting), or "": it must be a form registryProblem matches.
func RegistryEntryProblem(e string) string {
	if e == "*" {
		return ""
	}
	if strings.ToLower(e) != e {
		return "must be lower case"
	}
	domain, path, hasPath := strings.Cut(e, "/")
	if hasPath {
		if strings.Contains(domain, "*") || !strings.HasSuffix(path, "/") {
			return "is not a registry host (host, host:port, host/path/ or *.domain; a path ends in / and takes no wildcard)"
		}
		if _, err := reference.ParseNamed(domain + "/" + strings.TrimSuffix(path, "/")); err != nil {
			return "has a path that is not a repository path"
		}
	}
	host, port := splitHostPort(domain)
	if strings.HasPrefix(host, "*.") && !publicSuffixed(host[2:]) {
		return "is a wildcard under a name without a public suffix: list such hosts exactly"
	}
	if n, err := strconv.Atoi(port); port != "" && (err != nil || len(validation.IsValidPortNum(n)) > 0) {
		return "has a port that is not a number from 1 to 65535"
	}
	if strings.HasPrefix(host, "[") { // an IPv6 literal, allowed only listed exactly
		if _, err := netip.ParseAddr(strings.TrimSuffix(host[1:], "]")); err != nil || !strings.HasSuffix(host, "]") {
			return "is not a host"
		}
		return ""
	}
	if len(validation.IsDNS1123Subdomain(strings.TrimPrefix(host, "*."))) > 0 {
		return "is not a registry host (host, host:port or *.domain)"
	}
	return ""
}
