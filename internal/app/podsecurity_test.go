package app

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The decision (podSecurityOf); the namespace read itself runs against the real control
// plane in tools/devenv/e2e/app: TestPodSecurityFollowsTheNamespace (read with deploy/base's
// grant, enforce restricted, baseline, none); TestDCMRoleIsEnough starts a provider
// that may not read its namespace (the failed read: baseline, a warning).
func TestPodSecurityOf(t *testing.T) {
	enforcing := func(level string) map[string]string {
		if level == "" {
			return map[string]string{"kubernetes.io/metadata.name": "dcm"}
		}
		return map[string]string{podSecurityEnforce: level}
	}
	forbidden := apierrors.NewForbidden(corev1.Resource("namespaces"), "dcm", errors.New("no get"))
	cases := []struct {
		name       string
		configured string
		labels     map[string]string
		readErr    error
		want       container.PodSecurity
		reads      int
	}{
		{"configured baseline: no read", "baseline", enforcing("restricted"), nil, container.Baseline, 0},
		{"configured restricted: no read", "restricted", enforcing(""), nil, container.Restricted, 0},
		{"auto, the namespace enforces restricted", "auto", enforcing("restricted"), nil, container.Restricted, 1},
		{"auto, the namespace enforces baseline", "auto", enforcing("baseline"), nil, container.Baseline, 1},
		{"auto, no label", "auto", enforcing(""), nil, container.Baseline, 1},
		{"auto, the namespace cannot be read", "auto", nil, forbidden, container.Baseline, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			got, why, err := podSecurityOf(tc.configured, func() (map[string]string, error) {
				reads++
				return tc.labels, tc.readErr
			})
			if got != tc.want || why == "" {
				t.Errorf("profile %q (why %q), want %q", got, why, tc.want)
			}
			if !errors.Is(err, tc.readErr) {
				t.Errorf("error %v, want %v (for the log)", err, tc.readErr)
			}
			if reads != tc.reads {
				t.Errorf("%d reads of the namespace, want %d", reads, tc.reads)
			}
		})
	}
}

// Before start (never so for the HTTP API, which starts after it): the configured
// profile, or baseline for "auto".
func TestPodSecurityProfileBeforeStart(t *testing.T) {
	for configured, want := range map[string]container.PodSecurity{
		"auto": container.Baseline, "baseline": container.Baseline, "restricted": container.Restricted,
	} {
		if got := (&podSecurity{configured: configured}).profile(); got != want {
			t.Errorf("configured %q: %q before start, want %q", configured, got, want)
		}
	}
}
