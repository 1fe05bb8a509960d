package container

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

var (
	cpuString = regexp.MustCompile(`^([1-9][0-9]*)(m?)$`)
	memString = regexp.MustCompile(`^([0-9]+)(MB|GB|TB)$`)
)

// Upper bounds keep every value far from int64 overflow in milli-units; no node has more.
const (
	maxCores    = 1_000_000
	maxMemBytes = 1 << 62
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
			return resource.Quantity{}, fmt.Errorf("%q is not a cpu quantity: use cores (\"2\") or millicores (\"500m\")", s)
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || (m[2] == "" && v > maxCores) || (m[2] == "m" && v > maxCores*1000) {
			return resource.Quantity{}, fmt.Errorf("%q is more than %d cores", s, maxCores)
		}
		if m[2] == "m" {
			return *resource.NewMilliQuantity(v, resource.DecimalSI), nil
		}
		return *resource.NewQuantity(v, resource.DecimalSI), nil
	case json.Unmarshal(raw, &n) == nil:
		v, err := n.Int64()
		if err != nil || v < 1 {
			return resource.Quantity{}, fmt.Errorf("%s is not a whole number of cores >= 1", n)
		}
		if v > maxCores {
			return resource.Quantity{}, fmt.Errorf("%d is more than %d cores", v, maxCores)
		}
		return *resource.NewQuantity(v, resource.DecimalSI), nil
	default:
		return resource.Quantity{}, fmt.Errorf("must be an integer number of cores or a string like \"2\" or \"500m\"")
	}
}

// memoryMultiplier: DCM's units are read as binary, as the reference provider and its
// sibling providers read them (1GB = 2^30 bytes = 1Gi), so one order gets the same
// memory from any DCM provider.
var memoryMultiplier = map[string]int64{"MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}

// parseMemory turns "512MB", "2GB" or "1TB" into a quantity of bytes.
func parseMemory(s string) (resource.Quantity, error) {
	m := memString.FindStringSubmatch(s)
	if m == nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a memory quantity: use a whole number with MB, GB or TB, e.g. \"512MB\"", s)
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	mult := memoryMultiplier[m[2]]
	if err != nil || v > maxMemBytes/mult {
		return resource.Quantity{}, fmt.Errorf("%q is too large", s)
	}
	if v == 0 {
		return resource.Quantity{}, fmt.Errorf("%q: memory must be more than 0", s)
	}
	return *resource.NewQuantity(v*mult, resource.BinarySI), nil
}
