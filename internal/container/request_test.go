package container

import (
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

func TestIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		header, want string
		bad          bool
	}{
		{header: "8e03978e-40d5-43e8-bc93-6894a57f9324", want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{header: `"8e03978e-40d5"`, want: "8e03978e-40d5"}, // the draft's Structured Field string
		{header: `"a \"b\""`, want: `a "b"`},
		{header: `"unterminated`, want: `"unterminated`}, // not a quoted string: the bare token
		{header: strings.Repeat("k", MaxIdempotencyKey), want: strings.Repeat("k", MaxIdempotencyKey)},
		{header: strings.Repeat("k", MaxIdempotencyKey+1), bad: true},
		{header: "", bad: true},
		{header: `""`, bad: true},
		{header: "tab\there", bad: true},
		{header: "caf\u00e9", bad: true},
	} {
		got, vs := IdempotencyKey(tc.header)
		if got != tc.want || (len(vs) > 0) != tc.bad || (tc.bad && vs[0].Param != "Idempotency-Key") {
			t.Errorf("IdempotencyKey(%q) = %q, %v", tc.header, got, vs)
		}
	}
}

// A key names one id, a valid container id; another key another.
func TestIDForKey(t *testing.T) {
	a, b := IDForKey("event-1"), IDForKey("event-2")
	if a != IDForKey("event-1") || a == b || len(ValidateID("id", a)) > 0 {
		t.Errorf("ids %s, %s", a, b)
	}
}

// The digest is the spec's, not its encoding's: maps in any order are one spec; any
// change is another.
func TestRequestDigest(t *testing.T) {
	spec := func(hints map[string]any, image string) *v1alpha1.ContainerSpec {
		return &v1alpha1.ContainerSpec{ServiceType: "container", Image: v1alpha1.ContainerImage{Reference: image}, ProviderHints: &hints}
	}
	one := RequestDigest(spec(map[string]any{"a": 1, "b": 2}, "nginx"))
	if one == "" || one != RequestDigest(spec(map[string]any{"b": 2, "a": 1}, "nginx")) ||
		one == RequestDigest(spec(map[string]any{"a": 1, "b": 2}, "nginx:1")) {
		t.Error("digest does not follow the spec")
	}
}
