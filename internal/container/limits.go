package container

import (
	"encoding/json"
	"fmt"
)

// What one container may ask for. Each bounds what one request can cost (decoding,
// validation, the answer) and what one container adds to the informer caches and to
// etcd. The list and string limits are also in api/v1alpha1/openapi.yaml (the request
// validator enforces them first; TestLimitsMatchTheContract keeps both in step);
// Validate checks the counts again so that a long list costs one violation, not one
// per item.
const (
	MaxLabels    = 64
	MaxEnv       = 128
	MaxEnvName   = 256
	MaxEnvValue  = 32768
	MaxArgs      = 256 // command and args, each
	MaxArg       = 8192
	MaxPorts     = 32
	MaxHintKeys  = 64
	MaxHintBytes = 16384
	MaxHintDepth = 8
	// MaxViolations is how many problems one answer lists; the rest are counted.
	MaxViolations = 50
)

// The worst case of the provider's memory is every container at the largest size a
// create accepts, SP_MAX_CONTAINERS of them. The two defaults below fit the default
// memory limit (deploy/base/deployment.yaml: 256 MiB; the service sets the Go memory
// limit to 90% of it, 230 MiB). Measured, not estimated: make bench's "memory at the
// limit" fills the namespace with SP_MAX_CONTAINERS containers of exactly
// SP_CONTAINER_MAX_BYTES, starts the service with its defaults and lists everything
// with 8 clients at once. At 10,000 containers of 8 KiB (the first defaults) that took
// RSS to 230 MiB idle (Go heap 169 MiB) and 254 MiB at the LISTs' peak: 1.6 MiB from
// the limit, so the count was halved; docs/benchmarks.md section 9 has the run at
// 5,000. A container whose objects are 8 KiB costs ~9.6 KB in the caches
// (BenchmarkCacheBytesPerMaxSizeContainer; ~14 KB of heap in the bench, indexes and
// the informers' bookkeeping included; at 256 KiB, the size allowed before these
// limits, 265,810 bytes: 1,000 of them took 260 MiB and every replica crash-looped on
// its initial list). Raising one default means raising the memory limit with it, by
// about SP_MAX_CONTAINERS × SP_CONTAINER_MAX_BYTES × 1.8.
const (
	// DefaultMaxObjectBytes is SP_CONTAINER_MAX_BYTES's default: a container's
	// Kubernetes objects (the Deployment and the Service, as JSON) may be this large.
	// A typical container's are 1.6 KB, so this leaves ~6.5 KB for env, command, args
	// and labels.
	DefaultMaxObjectBytes = 8 << 10
	// DefaultMaxContainers is SP_MAX_CONTAINERS's default: the containers one provider
	// (namespace) holds at most, each as large as DefaultMaxObjectBytes allows.
	DefaultMaxContainers = 5000
)

// tooMany is the one violation for a list longer than its limit.
func tooMany(pointer, field string, n, limit int) []Violation {
	if n <= limit {
		return nil
	}
	return []Violation{violation(pointer, "%s has %d entries; at most %d are allowed", field, n, limit)}
}

// validateHints bounds provider_hints, which are accepted and ignored: an open object
// must not be a way to make every request expensive.
func validateHints(h map[string]any) []Violation {
	ptr := Pointer("spec", "provider_hints")
	if vs := tooMany(ptr, "provider_hints", len(h), MaxHintKeys); vs != nil {
		return vs
	}
	if d := depth(h); d > MaxHintDepth {
		return []Violation{violation(ptr, "provider_hints is nested %d levels deep; at most %d are allowed", d, MaxHintDepth)}
	}
	if b, err := json.Marshal(h); err != nil || len(b) > MaxHintBytes {
		return []Violation{violation(ptr, "provider_hints is %d bytes as JSON; at most %d are allowed", len(b), MaxHintBytes)}
	}
	return nil
}

func depth(v any) int {
	d := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			d = max(d, depth(e))
		}
	case []any:
		for _, e := range t {
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// CheckSize refuses a container whose Kubernetes objects would be larger than limit
// bytes (SP_CONTAINER_MAX_BYTES): a clear 400 long before etcd's limit (1.5 MiB) refuses
// the write, and a known bound on what each container adds to every replica's caches.
func CheckSize(objs Objects, limit int) []Violation {
	n, err := ObjectBytes(objs)
	if err != nil {
		return []Violation{violation(Pointer("spec"), "the container cannot be encoded: %v", err)}
	}
	if n > limit {
		return []Violation{{Pointer: Pointer("spec"), Detail: fmt.Sprintf(
			"the container's Kubernetes objects would be %d bytes; at most %d are allowed (shorten env, command, args or labels)", n, limit)}}
	}
	return nil
}

// Capped keeps the first MaxViolations problems (in contract order) and reports how
// many were left out.
func Capped(vs []Violation) ([]Violation, int) {
	SortViolations(vs)
	if len(vs) <= MaxViolations {
		return vs, 0
	}
	return vs[:MaxViolations], len(vs) - MaxViolations
}

// ObjectBytes is the size of a container's Kubernetes objects (the Deployment and the
// Service) as JSON: what the per-container limit bounds.
func ObjectBytes(objs Objects) (int, error) {
	n := 0
	for _, o := range []any{objs.Deployment, objs.Service} {
		b, err := json.Marshal(o)
		if err != nil {
			return 0, err
		}
		n += len(b)
	}
	return n, nil
}
