package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/testbed"
)

// quietSamples needs n quiet samples in a row: a busy one starts the count again, and
// past the timeout it says so and lets the caller measure anyway.
func TestQuietSamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []bool
		n       int
		timeout time.Duration
		calls   int // -1: as many as the timeout allows
		busy    bool
	}{
		{"quiet at once", []bool{true, true, true}, 3, time.Minute, 3, false},
		{"a busy sample starts again", []bool{true, true, false, true, true, true}, 3, time.Minute, 6, false},
		{"never quiet: the timeout", nil, 3, 30 * time.Millisecond, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			e := &Env{Env: &testbed.Env{Log: &log}}
			calls := 0
			_, err := e.quietSamples(context.Background(), time.Now(), tc.timeout, 5*time.Millisecond, tc.n, "still busy", func() (bool, error) {
				calls++
				return calls <= len(tc.samples) && tc.samples[calls-1], nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.calls >= 0 && calls != tc.calls {
				t.Errorf("%d samples, want %d", calls, tc.calls)
			}
			if got := strings.Contains(log.String(), "still busy after"); got != tc.busy {
				t.Errorf("timeout logged %v, want %v: %q", got, tc.busy, log.String())
			}
		})
	}
}
