//go:build chaosbug

package status

import (
	"testing"
	"time"
)

// The planted bug does what sp-chaos -inject says it does: a DELETED whose publish fails
// is dropped and its record finalized, with no retry. (make lint runs this with -tags
// chaosbug, so the seam cannot rot unnoticed.) Its counterpart without the tag,
// TestReporterRetriesAFailedDeletedBeforeFinalizing, is the behaviour it breaks.
func TestPlantedBugDropsAnUnsentDeleted(t *testing.T) {
	r := startReporter(t, 0, 1)
	r.src.set("a", deletedSnap())
	want := []string{"publish failed a", "finalize r1"}
	r.out.waitFor(t, want...)
	r.settled(t, want...) // past any retry backoff: nothing more
}

// A failed live status is not the planted bug's: it has no record to finalize, and is
// retried as in every build.
func TestPlantedBugLeavesALiveStatusAlone(t *testing.T) {
	r := startReporter(t, 0, 1)
	r.src.set("a", liveSnap("a-1"))
	want := []string{"publish failed a", "publish a PENDING"}
	r.out.await(t, func() { r.clock.Step(10 * time.Millisecond) }, want)
	r.settled(t, want...)
}
