//go:build chaosbug

package status

import (
	"slices"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The planted bug does what sp-chaos -inject says it does: a DELETED whose publish fails
// is dropped and its record deleted, with no retry. (make lint runs this with -tags
// chaosbug, so the seam cannot rot unnoticed.)
func TestPlantedBugDropsAnUnsentDeleted(t *testing.T) {
	r := startReporter(t, 0, 1)
	r.src.set("a", container.Snapshot{Record: record(owed)})
	want := []string{"publish failed a", "delete record r1"}
	r.out.waitFor(t, want...)
	r.clock.Step(time.Minute) // past any retry backoff
	time.Sleep(50 * time.Millisecond)
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	if !slices.Equal(r.out.entries, want) {
		t.Errorf("journal %q, want %q and nothing more", r.out.entries, want)
	}
}
