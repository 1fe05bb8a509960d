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
// is left for the apiserver to refuse. It returns every problem, not just the first.
func Validate(spec *v1alpha1.ContainerSpec) []Violation {
	var vs []Violation
	add := func(v ...Violation) { vs = append(vs, v...) }

	// In the contract's order (see SortViolations): resources, labels, then body order.
	add(validateResources(&spec.Resources)...)
	if spec.Metadata.Labels != nil {
		add(validateLabels(*spec.Metadata.Labels)...)
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
	add(validateImage(spec.Image.Reference)...)
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
		add(validatePorts(*n.Ports)...)
	}
	if spec.ProviderHints != nil {
		add(validateHints(*spec.ProviderHints)...)
	}
	return vs
}

func validateLabels(labels map[string]string) []Violation {
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
		for _, msg := range validation.IsQualifiedName(k) {
			vs = append(vs, violation(ptr, "label %q: key: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			vs = append(vs, violation(ptr, "label %q: value %q: %s", k, labels[k], msg))
		}
	}
	return vs
}

func validateImage(ref string) []Violation {
	ptr := Pointer("spec", "image", "reference")
	if ref == "" {
		return []Violation{violation(ptr, "image.reference is required")}
	}
	if strings.TrimSpace(ref) != ref {
		return []Violation{violation(ptr, "image.reference %q must not start or end with whitespace", ref)}
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return []Violation{violation(ptr, "image.reference %q is not an image reference ([registry/]repository[:tag][@digest]): %v", ref, err)}
	}
	return nil
}

func validateResources(r *v1alpha1.ContainerResources) []Violation {
	cpuMin, errMin := parseCPU(r.Cpu.Min)
	cpuMax, errMax := parseCPU(r.Cpu.Max)
	vs := validateRange("cpu", cpuMin, cpuMax, errMin, errMax, cpuMin.String(), cpuMax.String())
	memMin, errMin := parseMemory(r.Memory.Min)
	memMax, errMax := parseMemory(r.Memory.Max)
	return append(vs, validateRange("memory", memMin, memMax, errMin, errMax, r.Memory.Min, r.Memory.Max)...)
}

// validateRange reports a bad min or max, or min above max (shown as minText/maxText,
// pointing at min), of spec.resources.<name>.
func validateRange(name string, lo, hi resource.Quantity, errLo, errHi error, minText, maxText string) []Violation {
	var vs []Violation
	minPtr, maxPtr := Pointer("spec", "resources", name, "min"), Pointer("spec", "resources", name, "max")
	if errLo != nil {
		vs = append(vs, violation(minPtr, "%s.min: %v", name, errLo))
	}
	if errHi != nil {
		vs = append(vs, violation(maxPtr, "%s.max: %v", name, errHi))
	}
	if errLo == nil && errHi == nil && lo.Cmp(hi) > 0 {
		vs = append(vs, violation(minPtr, "%s.min (%s) must not exceed %s.max (%s)", name, minText, name, maxText))
	}
	return vs
}

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
			vs = append(vs, violation(ptr, "%s %q: %s", field, e.Name, msg))
		}
		if j, dup := seen[e.Name]; dup {
			vs = append(vs, violation(ptr, "%s %q is already set by process.env[%d]", field, e.Name, j))
		} else {
			seen[e.Name] = i
		}
	}
	return vs
}

func validatePorts(ports []v1alpha1.ContainerPort) []Violation {
	if vs := tooMany(Pointer("spec", "network", "ports"), "network.ports", len(ports), MaxPorts); vs != nil {
		return vs
	}
	var vs []Violation
	seen := map[int32]int{}
	for i, p := range ports {
		ptr := func(f string) string { return Pointer("spec", "network", "ports", strconv.Itoa(i), f) }
		field := fmt.Sprintf("network.ports[%d]", i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			vs = append(vs, violation(ptr("container_port"), "%s.container_port %d is not a port (1-65535)", field, p.ContainerPort))
		} else if j, dup := seen[p.ContainerPort]; dup {
			vs = append(vs, violation(ptr("container_port"), "%s.container_port %d is already listed by network.ports[%d]", field, p.ContainerPort, j))
		} else {
			seen[p.ContainerPort] = i
		}
		if !p.Visibility.Valid() {
			vs = append(vs, violation(ptr("visibility"), "%s.visibility %q must be one of none, internal, external", field, p.Visibility))
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
