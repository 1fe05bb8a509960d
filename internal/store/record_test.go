package store

import (
	"testing"
	"time"
)

func TestTakeOverAllowed(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		age  time.Duration
		want bool
	}{
		{0, false}, {20 * time.Second, false}, {39 * time.Second, false}, {40 * time.Second, true}, {time.Hour, true},
		{-time.Second, false}, // clock skew: a reservation "from the future" is young
	} {
		if got := takeOverAllowed(created, created.Add(tc.age), 20*time.Second); got != tc.want {
			t.Errorf("age %s: take over %v, want %v", tc.age, got, tc.want)
		}
	}
}
