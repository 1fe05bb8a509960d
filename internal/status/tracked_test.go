package status

import (
	"log/slog"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// entries is how many containers rep has an entry for.
func entries(rep *Controller) int {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return len(rep.containers)
}

// A container gone from the cluster, its DELETED delivered, leaves nothing behind once
// pruned: the controller's memory does not grow with the ids it ever saw.
func TestControllerForgetsAPrunedContainer(t *testing.T) {
	r := startControllerWith(t, 0, 0, func(o *Options) { o.ResendAfter = resendAfter })
	r.src.set("a", liveSnap("a-1"))
	r.out.waitFor(t, "publish a PENDING")
	waitPending(t, r, 0)
	if n := pendingResends(r.rep); n != 1 {
		t.Fatalf("%d resends pending, want 1", n)
	}
	r.src.set("a", deletedSnap())
	want := []string{"publish a PENDING", "publish a DELETED", "finalize r1"}
	r.out.waitFor(t, want...)
	waitPending(t, r, 0)
	r.src.set("a", container.Snapshot{}) // the finalized record's deletion reaches the cache
	waitPending(t, r, 0)
	r.out.waitFor(t, want...)
	// Until pruned, the DELETED is remembered (so that nothing sends it again).
	if n := entries(r.rep); n != 1 {
		t.Fatalf("%d entries before the prune, want 1 (the DELETED sent)", n)
	}
	r.rep.prune()
	if n := entries(r.rep); n != 0 {
		r.rep.mu.Lock()
		defer r.rep.mu.Unlock()
		t.Errorf("%d entries after the prune, want none: %+v", n, r.rep.containers["a"])
	}
}

// An entry goes as soon as its last field is cleared, whichever field that is, and
// not before.
func TestControllerReleasesAnEntryThatHoldsNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	src := &fakeSource{snaps: map[string]container.Snapshot{}}
	rep := NewController(src, nil, nil, Options{Clock: clk, ResendAfter: resendAfter}, slog.New(slog.DiscardHandler))
	check := func(step string, want int) {
		t.Helper()
		if n := entries(rep); n != want {
			t.Fatalf("%s: %d entries, want %d", step, n, want)
		}
	}

	// Through the controller's own methods, each field set then cleared.
	check("new", 0)
	rep.startWaiting("a", whyCacheBehind)
	check("held back", 1)
	rep.stopWaiting("a")
	check("no longer held back", 0)
	rep.eventID("a", "r1", *st(v1alpha1.PENDING, ""), t0)
	check("event id minted", 1)
	rep.RepublishAll() // no container known: clears the minted ids and forces none
	check("republished", 0)
	rep.mu.Lock()
	rep.scheduleResend("a", "r1", printOf("r1"), liveSnap("a-1"), container.Status{Status: v1alpha1.PENDING}, t0)
	rep.mu.Unlock()
	check("resend scheduled", 1)
	rep.stopResends()
	check("resends stopped", 0)
	if clk.HasWaiters() {
		t.Error("the stopped resend's timer is still armed")
	}

	// Each field, with another one set: clearing it keeps the entry, clearing the
	// other one too removes it.
	fields := []struct {
		name       string
		set, clear func(*tracked)
	}{
		{"sent", func(e *tracked) { e.sent, e.sentFor = deliveredOf(*st(v1alpha1.RUNNING, "")), printOf("r1") },
			func(e *tracked) { e.sent, e.sentFor = delivered{}, incarnationPrint{} }},
		{"forced", func(e *tracked) { e.forced = true }, func(e *tracked) { e.forced = false }},
		{"minted", func(e *tracked) { e.minted = &mintedEvent{inc: "r1", eventID: "e1"} }, func(e *tracked) { e.minted = nil }},
		{"waiting", func(e *tracked) { e.waiting = whyNotStored }, func(e *tracked) { e.waiting = "" }},
		{"resend", func(e *tracked) { e.resend = &resend{} }, func(e *tracked) { e.resend = nil }},
	}
	for i, f := range fields {
		other := fields[(i+1)%len(fields)]
		t.Run(f.name, func(t *testing.T) {
			rep.mu.Lock()
			defer rep.mu.Unlock()
			f.set(rep.entry("a"))
			other.set(rep.entry("a"))
			f.clear(rep.containers["a"])
			rep.release("a")
			if len(rep.containers) != 1 {
				t.Fatalf("cleared %s: the entry went, but it still holds %s", f.name, other.name)
			}
			other.clear(rep.containers["a"])
			rep.release("a")
			if len(rep.containers) != 0 {
				t.Errorf("cleared %s and %s: the entry is still there: %+v", f.name, other.name, rep.containers["a"])
			}
		})
	}
}

// An id the controller was never told about costs nothing to look up or clear.
func TestControllerKeepsNoEntryForAnUnknownID(t *testing.T) {
	rep := NewController(&fakeSource{snaps: map[string]container.Snapshot{}}, nil, nil,
		Options{Clock: clocktesting.NewFakeClock(t0)}, slog.New(slog.DiscardHandler))
	rep.stopWaiting("x")
	rep.mu.Lock()
	rep.forgetResend("x")
	rep.release("x")
	rep.mu.Unlock()
	rep.prune()
	if n := entries(rep); n != 0 {
		t.Errorf("%d entries, want none", n)
	}
}
