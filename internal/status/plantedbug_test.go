//go:build !chaosbug

package status

import (
	"testing"
	"time"
)

// What the planted bug (plantedbug_chaos.go, -tags chaosbug) breaks: a DELETED whose
// publish fails is retried, and its record finalized only once one is delivered.
func TestReporterRetriesAFailedDeletedBeforeFinalizing(t *testing.T) {
	r := startReporter(t, 0, 3)
	r.src.set("a", deletedSnap())
	want := []string{"publish failed a", "publish failed a", "publish failed a", "publish a DELETED", "finalize r1"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
	if n := entries(r.rep); n != 1 {
		t.Errorf("%d entries, want 1 (the DELETED sent)", n)
	}
}

// plantedBug does nothing in a real build.
func TestPlantedBugIsOffWithoutTheTag(t *testing.T) {
	if plantedBug(t.Context(), nil, Plan{Publish: deleted, Finalize: record(terminating)}) {
		t.Error("plantedBug reports it acted in a build without -tags chaosbug")
	}
}
