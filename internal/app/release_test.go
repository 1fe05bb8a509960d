package app

import (
	"testing"
	"time"
)

// A leader election record shows a running replica while it is held and renewed within
// three lease durations.
func TestRenewed(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		holder string
		renew  time.Time
		secs   int
		want   bool
	}{
		{"renewed a moment ago", "r1", now.Add(-2 * time.Second), 12, true},
		{"renewed just under three durations ago", "r1", now.Add(-35 * time.Second), 12, true},
		{"three durations ago: gone", "r1", now.Add(-36 * time.Second), 12, false},
		{"resigned (no holder)", "", now, 12, false},
		{"never renewed", "r1", time.Time{}, 12, false},
		{"no duration", "r1", now, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewed(tc.holder, tc.renew, tc.secs, now); got != tc.want {
				t.Errorf("renewed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKindsLine(t *testing.T) {
	want := "records: ConfigMaps (label dcm.project/record=container); election: ConfigMap sp-status"
	if got := kindsLine("sp-status"); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}
