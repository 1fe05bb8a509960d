package container

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// ReservedID can never be a container id: /containers/health is the health endpoint.
const ReservedID = "health"

var (
	idPattern   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// ValidateID checks a client-chosen container id (AEP-122), the query parameter param.
func ValidateID(param, id string) []Violation {
	switch {
	case id == ReservedID:
		return []Violation{{Param: param, Detail: fmt.Sprintf("%s %q is reserved (it is the health endpoint)", param, id)}}
	case !idPattern.MatchString(id):
		return []Violation{{Param: param, Detail: fmt.Sprintf("%s %q must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", param, id)}}
	}
	return nil
}

// Validate checks everything a client can get wrong in a create request, so that nothing
// is left for the apiserver to refuse, and what the operator's policy refuses. It
// returns every problem, not just the first.
func Validate(spec *v1alpha1.ContainerSpec, p Policy) []Violation {
	var vs []Violation
	add := func(v ...Violation) { vs = append(vs, v...) }

	// In the contract's order (see SortViolations): resources, labels, then body order.
	add(validateResources(&spec.Resources, p)...)
	if spec.Metadata.Labels != nil {
		add(validateLabels(*spec.Metadata.Labels, p)...)
	}
	if spec.ServiceType != v1alpha1.ContainerSpecServiceTypeContainer {
		add(violation(Pointer("spec", "service_type"), "service_type %q must be %q", spec.ServiceType, v1alpha1.ContainerSpecServiceTypeContainer))
	}
	name, namePtr := spec.Metadata.Name, Pointer("spec", "metadata", "name")
	switch {
	case name == "":
		add(violation(namePtr, "metadata.name is required"))
	case len(name) > 63 || !namePattern.MatchString(name):
		add(violation(namePtr, "metadata.name %q must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", name))
	case exposedPorts(spec) > 0 && (name[0] < 'a' || name[0] > 'z'):
		// The Service is named after the container, and Service names must start with a letter.
		add(violation(namePtr, "metadata.name %q must start with a letter when a port is exposed (Kubernetes Service names do)", name))
	}
	add(validateImage(spec.Image.Reference, p)...)
	if spec.Image.Digest != nil {
		add(violation(Pointer("spec", "image", "digest"), "image.digest is response-only: the provider resolves the reference (give a digest in image.reference: repository@sha256:...)"))
	}
	if p := spec.Process; p != nil {
		if p.Command != nil {
			add(tooMany(Pointer("spec", "process", "command"), "process.command", len(*p.Command), MaxArgs)...)
		}
		if p.Args != nil {
			add(tooMany(Pointer("spec", "process", "args"), "process.args", len(*p.Args), MaxArgs)...)
		}
		if p.Env != nil {
			add(validateEnv(*p.Env)...)
		}
	}
	if n := spec.Network; n != nil && n.Ports != nil {
		add(validatePorts(*n.Ports, p)...)
	}
	if spec.ProviderHints != nil {
		add(validateHints(*spec.ProviderHints)...)
	}
	return vs
}

func validateLabels(labels map[string]string, p Policy) []Violation {
	if vs := tooMany(Pointer("spec", "metadata", "labels"), "metadata.labels", len(labels), MaxLabels); vs != nil {
		return vs
	}
	var vs []Violation
	for _, k := range sortedKeys(labels) {
		ptr := Pointer("spec", "metadata", "labels", k)
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			vs = append(vs, violation(ptr, "label %q is reserved by DCM", k))
			continue
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			for _, msg := range msgs {
				vs = append(vs, violation(ptr, "label %q: key: %s", k, rule(msg)))
			}
		} else if problem := p.labelKeyProblem(k); problem != "" {
			vs = append(vs, Violation{Pointer: ptr, Detail: problem}) // quotes the key clipped
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			vs = append(vs, violation(ptr, "label %q: value %q: %s", k, labels[k], rule(msg)))
		}
	}
	return vs
}

func validateImage(ref string, p Policy) []Violation {
	ptr := Pointer("spec", "image", "reference")
	if ref == "" {
		return []Violation{violation(ptr, "image.reference is required")}
	}
	if strings.TrimSpace(ref) != ref {
		return []Violation{violation(ptr, "image.reference %q must not start or end with whitespace", ref)}
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return []Violation{violation(ptr, "image.reference %q is not an image reference ([registry/]repository[:tag][@digest]): %v", ref, err)}
	}
	if problem := p.registryProblem(reference.Domain(named), reference.Path(named)); problem != "" {
		return []Violation{{Pointer: ptr, Detail: fmt.Sprintf("image.reference %q: %s", Clip(ref, MaxQuoted), problem)}}
	}
	return nil
}

func validateResources(r *v1alpha1.ContainerResources, p Policy) []Violation {
	cpuMin, errMin := parseCPU(r.Cpu.Min)
	cpuMax, errMax := parseCPU(r.Cpu.Max)
	vs := validateRange("cpu", cpuMin, cpuMax, errMin, errMax, cpuMin.String(), cpuMax.String())
	vs = append(vs, validateBounds("cpu", cpuMin, cpuMax, errMin, errMax, p.MinCPU, p.MaxCPU, "SP_MIN_CPU", "SP_MAX_CPU")...)
	if errMin == nil && errMax == nil {
		vs = append(vs, validateRatio("cpu", cpuMin, cpuMax, p.MaxCPURatio, "SP_MAX_CPU_RATIO")...)
	}
	memMin, errMin := parseMemory(r.Memory.Min)
	memMax, errMax := parseMemory(r.Memory.Max)
	vs = append(vs, validateRange("memory", memMin, memMax, errMin, errMax, r.Memory.Min, r.Memory.Max)...)
	vs = append(vs, validateBounds("memory", memMin, memMax, errMin, errMax, p.MinMemory, p.MaxMemory, "SP_MIN_MEMORY", "SP_MAX_MEMORY")...)
	if errMin == nil && errMax == nil {
		vs = append(vs, validateRatio("memory", memMin, memMax, p.MaxMemoryRatio, "SP_MAX_MEMORY_RATIO")...)
	}
	return vs
}

// validateRatio bounds max / min: a container scheduled for min that may use far more
// takes it from its neighbours on the node.
func validateRatio(name string, lo, hi resource.Quantity, ratio float64, ratioVar string) []Violation {
	if ratio == 0 || lo.Sign() <= 0 || hi.AsApproximateFloat64() <= ratio*lo.AsApproximateFloat64() {
		return nil
	}
	return []Violation{violation(Pointer("spec", "resources", name, "max"), "%s.max (%s) is more than %g times %s.min (%s), this provider's largest ratio (%s)",
		name, hi.String(), ratio, name, lo.String(), ratioVar)}
}

// validateBounds holds spec.resources.<name> to the operator's minimum request (floor,
// for min) and maximum limit (ceiling, for max); a zero bound is none. One container
// must not take a node (or a quota) on its own, nor ask for a request so small that
// the scheduler packs it beside everyone else for nothing.
func validateBounds(name string, lo, hi resource.Quantity, errLo, errHi error, floor, ceiling resource.Quantity, floorVar, ceilingVar string) []Violation {
	var vs []Violation
	if errLo == nil && !floor.IsZero() && lo.Cmp(floor) < 0 {
		vs = append(vs, violation(Pointer("spec", "resources", name, "min"), "%s.min (%s) is below this provider's minimum request, %s (%s)", name, lo.String(), floor.String(), floorVar))
	}
	if errHi == nil && !ceiling.IsZero() && hi.Cmp(ceiling) > 0 {
		vs = append(vs, violation(Pointer("spec", "resources", name, "max"), "%s.max (%s) is above this provider's maximum, %s (%s)", name, hi.String(), ceiling.String(), ceilingVar))
	}
	return vs
}

// validateRange reports a bad min or max, or min above max (shown as minText/maxText,
// pointing at min), of spec.resources.<name>.
func validateRange(name string, lo, hi resource.Quantity, errLo, errHi error, minText, maxText string) []Violation {
	var vs []Violation
	minPtr, maxPtr := Pointer("spec", "resources", name, "min"), Pointer("spec", "resources", name, "max")
	// The parse errors quote the value clipped already; their advice is kept whole.
	if errLo != nil {
		vs = append(vs, violation(minPtr, "%s.min: %s", name, rule(errLo.Error())))
	}
	if errHi != nil {
		vs = append(vs, violation(maxPtr, "%s.max: %s", name, rule(errHi.Error())))
	}
	if errLo == nil && errHi == nil && lo.Cmp(hi) > 0 {
		vs = append(vs, violation(minPtr, "%s.min (%s) must not exceed %s.max (%s)", name, minText, name, maxText))
	}
	return vs
}

// envNameRule is what validation.IsEnvVarName accepts (Kubernetes' strict rule, as an
// apiserver without RelaxedEnvironmentVariableValidation does), in words.
const envNameRule rule = "must be letters, digits, '_', '-' or '.', and not start with a digit (e.g. MY_VAR, my.var-1)"

func validateEnv(env []v1alpha1.EnvVar) []Violation {
	if vs := tooMany(Pointer("spec", "process", "env"), "process.env", len(env), MaxEnv); vs != nil {
		return vs
	}
	var vs []Violation
	seen := map[string]int{}
	for i, e := range env {
		ptr, field := Pointer("spec", "process", "env", strconv.Itoa(i), "name"), fmt.Sprintf("process.env[%d].name", i)
		if e.Name == "" {
			vs = append(vs, violation(ptr, "%s is required", field))
			continue
		}
		for _, msg := range validation.IsEnvVarName(e.Name) {
			if strings.HasPrefix(msg, "a valid environment variable name") {
				// Kubernetes' text of the rule is 247 bytes with its regular expression.
				vs = append(vs, violation(ptr, "%s %q %s", field, e.Name, envNameRule))
				continue
			}
			vs = append(vs, violation(ptr, "%s %q %s", field, e.Name, rule(msg))) // "must not start with '..'"
		}
		if j, dup := seen[e.Name]; dup {
			vs = append(vs, violation(ptr, "%s %q is already set by process.env[%d]", field, e.Name, j))
		} else {
			seen[e.Name] = i
		}
	}
	return vs
}

func validatePorts(ports []v1alpha1.ContainerPort, p Policy) []Violation {
	if vs := tooMany(Pointer("spec", "network", "ports"), "network.ports", len(ports), MaxPorts); vs != nil {
		return vs
	}
	var vs []Violation
	seen := map[int32]int{}
	for i, port := range ports {
		ptr := func(f string) string { return Pointer("spec", "network", "ports", strconv.Itoa(i), f) }
		field := fmt.Sprintf("network.ports[%d]", i)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			vs = append(vs, violation(ptr("container_port"), "%s.container_port %d is not a port (1-65535)", field, port.ContainerPort))
		} else if j, dup := seen[port.ContainerPort]; dup {
			vs = append(vs, violation(ptr("container_port"), "%s.container_port %d is already listed by network.ports[%d]", field, port.ContainerPort, j))
		} else {
			seen[port.ContainerPort] = i
		}
		if !port.Visibility.Valid() {
			vs = append(vs, violation(ptr("visibility"), "%s.visibility %q must be one of none, internal, external", field, port.Visibility))
		}
	}
	return append(vs, p.exposure(ports)...)
}

// exposure holds the ports' visibilities to the operator's policy: external exposure
// refused, a cap on external ports (each costs a node port of the cluster's shared
// range, 2,768 by default, or a load balancer), and internal ports beside external
// ones (the container's one Service has one type, so they would be external too).
func (p Policy) exposure(ports []v1alpha1.ContainerPort) []Violation {
	var vs []Violation
	var external, internal []int
	for i, port := range ports {
		switch port.Visibility {
		case v1alpha1.ContainerPortVisibilityExternal:
			external = append(external, i)
		case v1alpha1.ContainerPortVisibilityInternal:
			internal = append(internal, i)
		}
	}
	at := func(i int) string { return Pointer("spec", "network", "ports", strconv.Itoa(i), "visibility") }
	switch {
	case len(external) == 0:
	case p.ExternalRefused:
		for _, i := range external {
			vs = append(vs, violation(at(i), "network.ports[%d] (port %d) is external, and this provider exposes nothing outside the cluster (SP_K8S_EXTERNAL_SVC_TYPE=None): use internal or none",
				i, ports[i].ContainerPort))
		}
		return vs
	case p.MaxExternalPorts > 0 && len(external) > p.MaxExternalPorts:
		vs = append(vs, violation(Pointer("spec", "network", "ports"), "network.ports has %d external ports; at most %d are allowed (SP_MAX_EXTERNAL_PORTS)",
			len(external), p.MaxExternalPorts))
	}
	if len(external) > 0 && p.RefuseMixed {
		for _, i := range internal {
			vs = append(vs, violation(at(i), "network.ports[%d] (port %d) is internal beside external network.ports[%d] (port %d): a container's ports are exposed by one Service, so it would be external too; make it external or none (SP_K8S_MIXED_VISIBILITY=refuse)",
				i, ports[i].ContainerPort, external[0], ports[external[0]].ContainerPort))
		}
	}
	return vs
}

// exposedPorts counts ports with a visibility other than none.
func exposedPorts(spec *v1alpha1.ContainerSpec) int {
	n := 0
	if spec.Network != nil && spec.Network.Ports != nil {
		for _, p := range *spec.Network.Ports {
			if p.Visibility == v1alpha1.ContainerPortVisibilityInternal || p.Visibility == v1alpha1.ContainerPortVisibilityExternal {
				n++
			}
		}
	}
	return n
}
