package app

import (
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// /readyz names each cache that is behind, since when and why.
func TestReadinessNamesCachesBehind(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		lags []store.Lag
		want string // "" for ready
	}{
		{"none behind", nil, ""},
		{"pods", []store.Lag{{Cache: store.CachePods, Title: "Pods", Since: since, For: 12 * time.Second, Behind: true, Why: "its watch is disconnected"}},
			"Pods out of date since 2026-01-01T12:00:00Z (12s): its watch is disconnected"},
		{"two", []store.Lag{
			{Cache: store.CacheDeployments, Title: "Deployments", Since: since, For: 6 * time.Second, Behind: true, Why: "its watch is reconnecting"},
			{Cache: store.CacheRecords, Title: "container records", Since: since, For: 100 * time.Second, Behind: true, Why: "its watch is connected but has sent nothing, not even a bookmark"}},
			"Deployments out of date since 2026-01-01T12:00:00Z (6s): its watch is reconnecting; " +
				"container records out of date since 2026-01-01T12:00:00Z (1m40s): its watch is connected but has sent nothing, not even a bookmark"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := behind(tc.lags)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("behind = %v, want ready", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("behind = %v, want %q", err, tc.want)
			}
		})
	}
}
