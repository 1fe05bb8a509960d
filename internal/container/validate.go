package container

import (
	"fmt"
	"regexp"
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

// Violation is one problem with a request, named by its JSON path.
type Violation = v1alpha1.FieldViolation

func violation(field, format string, args ...any) Violation {
	return Violation{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ValidateID checks a client-chosen container id (AEP-122).
func ValidateID(field, id string) []Violation {
	switch {
	case id == ReservedID:
		return []Violation{violation(field, "%q is reserved (it is the health endpoint)", id)}
	case !idPattern.MatchString(id):
		return []Violation{violation(field, "%q must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", id)}
	}
	return nil
}

// Validate checks everything a client can get wrong in a create request, so that nothing
// is left for the apiserver to refuse. It returns every problem, not just the first.
func Validate(spec *v1alpha1.ContainerSpec) []Violation {
	var vs []Violation
	add := func(v ...Violation) { vs = append(vs, v...) }

	if spec.ServiceType != v1alpha1.ContainerSpecServiceTypeContainer {
		add(violation("spec.service_type", "must be %q", v1alpha1.ContainerSpecServiceTypeContainer))
	}
	name := spec.Metadata.Name
	switch {
	case name == "":
		add(violation("spec.metadata.name", "required"))
	case len(name) > 63 || !namePattern.MatchString(name):
		add(violation("spec.metadata.name", "%q must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit", name))
	case exposedPorts(spec) > 0 && (name[0] < 'a' || name[0] > 'z'):
		// The Service is named after the container, and Service names must start with a letter.
		add(violation("spec.metadata.name", "%q must start with a letter when a port is exposed (Kubernetes Service names do)", name))
	}
	if spec.Metadata.Labels != nil {
		add(validateLabels(*spec.Metadata.Labels)...)
	}
	add(validateImage(spec.Image.Reference)...)
	add(validateResources(&spec.Resources)...)
	if p := spec.Process; p != nil && p.Env != nil {
		add(validateEnv(*p.Env)...)
	}
	if n := spec.Network; n != nil && n.Ports != nil {
		add(validatePorts(*n.Ports)...)
	}
	return vs
}

func validateLabels(labels map[string]string) []Violation {
	var vs []Violation
	for _, k := range sortedKeys(labels) {
		field := fmt.Sprintf("spec.metadata.labels[%q]", k)
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			vs = append(vs, violation(field, "the %q prefix is reserved for DCM", ReservedLabelPrefix))
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			vs = append(vs, violation(field, "key: %s", msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			vs = append(vs, violation(field, "value: %s", msg))
		}
	}
	return vs
}

func validateImage(ref string) []Violation {
	const field = "spec.image.reference"
	if ref == "" {
		return []Violation{violation(field, "required")}
	}
	if strings.TrimSpace(ref) != ref {
		return []Violation{violation(field, "must not start or end with whitespace")}
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return []Violation{violation(field, "%q is not an image reference ([registry/]repository[:tag][@digest]): %v", ref, err)}
	}
	return nil
}

func validateResources(r *v1alpha1.ContainerResources) []Violation {
	cpuMin, errMin := parseCPU(r.Cpu.Min)
	cpuMax, errMax := parseCPU(r.Cpu.Max)
	vs := validateRange("spec.resources.cpu", cpuMin, cpuMax, errMin, errMax, cpuMin.String(), cpuMax.String())
	memMin, errMin := parseMemory(r.Memory.Min)
	memMax, errMax := parseMemory(r.Memory.Max)
	return append(vs, validateRange("spec.resources.memory", memMin, memMax, errMin, errMax, r.Memory.Min, r.Memory.Max)...)
}

// validateRange reports a bad min or max, or min above max (shown as minText/maxText).
func validateRange(field string, lo, hi resource.Quantity, errLo, errHi error, minText, maxText string) []Violation {
	var vs []Violation
	if errLo != nil {
		vs = append(vs, violation(field+".min", "%v", errLo))
	}
	if errHi != nil {
		vs = append(vs, violation(field+".max", "%v", errHi))
	}
	if errLo == nil && errHi == nil && lo.Cmp(hi) > 0 {
		vs = append(vs, violation(field, "min (%s) is more than max (%s)", minText, maxText))
	}
	return vs
}

func validateEnv(env []v1alpha1.EnvVar) []Violation {
	var vs []Violation
	seen := map[string]int{}
	for i, e := range env {
		field := fmt.Sprintf("spec.process.env[%d].name", i)
		if e.Name == "" {
			vs = append(vs, violation(field, "required"))
			continue
		}
		for _, msg := range validation.IsEnvVarName(e.Name) {
			vs = append(vs, violation(field, "%q: %s", e.Name, msg))
		}
		if j, dup := seen[e.Name]; dup {
			vs = append(vs, violation(field, "%q is already set by spec.process.env[%d]", e.Name, j))
		} else {
			seen[e.Name] = i
		}
	}
	return vs
}

func validatePorts(ports []v1alpha1.ContainerPort) []Violation {
	var vs []Violation
	seen := map[int32]int{}
	for i, p := range ports {
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			vs = append(vs, violation(fmt.Sprintf("spec.network.ports[%d].container_port", i), "%d is not a port (1-65535)", p.ContainerPort))
		} else if j, dup := seen[p.ContainerPort]; dup {
			vs = append(vs, violation(fmt.Sprintf("spec.network.ports[%d].container_port", i), "%d is already listed by spec.network.ports[%d]", p.ContainerPort, j))
		} else {
			seen[p.ContainerPort] = i
		}
		if !p.Visibility.Valid() {
			vs = append(vs, violation(fmt.Sprintf("spec.network.ports[%d].visibility", i), "%q must be one of none, internal, external", p.Visibility))
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
