package access

import (
	"testing"
	"time"
)

// A refused write asks the apiserver what is missing (one access review per
// permission) at most once per explainEvery. The requests themselves are counted against
// the real apiserver in tools/devenv/e2e/app (TestRBACDenialNamesTheMissingPermissions).
func TestCheckDue(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		checked time.Time
		now     time.Time
		wantDue bool
	}{
		{"never checked", time.Time{}, t0, true},
		{"checked a moment ago", t0, t0.Add(time.Second), false},
		{"checked just inside the window", t0, t0.Add(explainEvery - time.Nanosecond), false},
		{"the window passed", t0, t0.Add(explainEvery), true},
		{"long ago", t0, t0.Add(time.Hour), true},
	} {
		if got := checkDue(tc.checked, tc.now); got != tc.wantDue {
			t.Errorf("%s: checkDue = %v, want %v", tc.name, got, tc.wantDue)
		}
	}
}
