package container

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

var (
	cpuString = regexp.MustCompile(`^([1-9][0-9]*)(m?)$`)
	// memString is openapi.yaml's MemoryQuantity pattern (TestLimitsMatchTheContract).
	memString = regexp.MustCompile(`^[0-9]+(MB|GB|TB|Mi|Gi|Ti|MiB|GiB|TiB)$`)
)

// Upper bounds keep every value far from int64 overflow in milli-units; no node has more.
const (
	maxCores    = 1_000_000
	maxMemBytes = 1 << 62
	// maxNumber bounds the JSON number notWholeCores reads for its advice (0.5 is
	// "500m"): no sensible number of cores is longer.
	maxNumber = 32
)

// parseCPU turns a DCM cpu value (integer cores, "2", or "500m") into a quantity.
func parseCPU(q v1alpha1.CpuQuantity) (resource.Quantity, error) {
	raw, err := q.MarshalJSON()
	if err != nil || len(raw) == 0 || string(raw) == "null" {
		return resource.Quantity{}, fmt.Errorf("required: an integer number of cores or a string like \"2\" or \"500m\"")
	}
	var n json.Number
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		m := cpuString.FindStringSubmatch(s)
		if m == nil {
			return resource.Quantity{}, fmt.Errorf("%q is not a cpu quantity: use cores (\"2\") or millicores (\"500m\")", Clip(s, MaxQuoted))
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || (m[2] == "" && v > maxCores) || (m[2] == "m" && v > maxCores*1000) {
			return resource.Quantity{}, fmt.Errorf("%q is more than %d cores", Clip(s, MaxQuoted), maxCores)
		}
		if m[2] == "m" {
			return *resource.NewMilliQuantity(v, resource.DecimalSI), nil
		}
		return *resource.NewQuantity(v, resource.DecimalSI), nil
	case json.Unmarshal(raw, &n) == nil:
		v, err := n.Int64()
		if err != nil {
			return resource.Quantity{}, notWholeCores(n)
		}
		if v < 1 {
			return resource.Quantity{}, fmt.Errorf("%d is less than 1 core: use 1 or more, or a string of millicores such as \"500m\"", v)
		}
		if v > maxCores {
			return resource.Quantity{}, fmt.Errorf("%d is more than %d cores", v, maxCores)
		}
		return *resource.NewQuantity(v, resource.DecimalSI), nil
	default:
		return resource.Quantity{}, fmt.Errorf("must be an integer number of cores or a string like \"2\" or \"500m\"")
	}
}

// notWholeCores says what to write for a number of cores that is not an integer: a
// fraction of a core is a string of millicores (0.5 is "500m"; DCM's contract has no
// fractional number), and a whole number written with a fraction or an exponent (1.0,
// 2e0) is written as the integer.
func notWholeCores(n json.Number) error {
	if len(n) > maxNumber { // not parsed, and quoted clipped
		return fmt.Errorf("%s is not a whole number of cores; use an integer, or a string of millicores such as \"500m\"", Clip(n.String(), MaxQuoted))
	}
	q, err := resource.ParseQuantity(n.String())
	switch {
	case err != nil || q.Sign() <= 0:
		return fmt.Errorf("%s is less than 1 core: use 1 or more, or a string of millicores such as \"500m\"", n)
	case q.Cmp(*resource.NewQuantity(maxCores, resource.DecimalSI)) > 0:
		return fmt.Errorf("%s is more than %d cores", n, maxCores)
	case q.Cmp(*resource.NewQuantity(q.Value(), resource.DecimalSI)) == 0:
		return fmt.Errorf("%s is not written as a whole number of cores: write %d", n, q.Value())
	case q.Cmp(*resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)) != 0:
		return fmt.Errorf("%s is not a whole number of cores, nor of millicores; use a string of millicores such as \"500m\"", n)
	}
	return fmt.Errorf("%s is not a whole number of cores; use a string of millicores such as \"%dm\"", n, q.MilliValue())
}

// memoryMultiplier: DCM's units are read as binary, as the reference provider and its
// sibling providers read them (1GB = 2^30 bytes = 1Gi), so one order gets the same
// memory from any DCM provider. The exact binary units (Kubernetes' Mi, Gi, Ti and
// MiB, GiB, TiB) are the same values.
var memoryMultiplier = map[string]int64{
	"MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40,
	"Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
	"MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// parseMemory turns "512MB", "2GB", "1TB" (binary: MiB, GiB, TiB), "512Mi", "2GiB" and
// the like into a quantity of bytes.
func parseMemory(s string) (resource.Quantity, error) {
	m := memString.FindStringSubmatch(s)
	if m == nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a memory quantity: use a whole number with MB, GB or TB (read as MiB, GiB and TiB), "+
			"or with Mi, Gi, Ti, MiB, GiB or TiB, e.g. \"512MB\" or \"2Gi\"", Clip(s, MaxQuoted))
	}
	v, err := strconv.ParseInt(strings.TrimSuffix(s, m[1]), 10, 64)
	mult := memoryMultiplier[m[1]]
	if err != nil || v > maxMemBytes/mult {
		return resource.Quantity{}, fmt.Errorf("%q is too large", Clip(s, MaxQuoted))
	}
	if v == 0 {
		return resource.Quantity{}, fmt.Errorf("%q: memory must be more than 0", Clip(s, MaxQuoted))
	}
	return *resource.NewQuantity(v*mult, resource.BinarySI), nil
}
