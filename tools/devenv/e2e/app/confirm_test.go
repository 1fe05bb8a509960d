package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Issue 23 item 1 against the real control plane: a status controller whose caches are
// behind takes no destructive step the apiserver does not confirm. The lag is made
// deterministic: the controller reads frozen snapshots (what a replica whose watches
// broke would still hold) and confirms with the real Store against the real
// apiserver. (a) The cache still shows stale-a's first record terminating, its DELETED
// delivered long ago and a new container of the id created since: no DELETED may be
// sent again (DCM would delete the new one) and the new record must not be finalized.
// (b) The cache shows stale-b's record, old, without its Deployment (the Deployment
// informer behind): the record must not be deleted (that would delete the container).
func TestStaleCacheTakesNoDestructiveStep(t *testing.T) {
	ns, _, events, p := withStream(t)
	ctx := context.Background()
	cs := testenv.Cluster(t).Client
	create(t, p, "stale-a", spec("stale-a", "nginx"))
	create(t, p, "stale-b", spec("stale-b", "nginx"))
	events.waitStatus("stale-a", "RUNNING", "", 30*time.Second)
	events.waitStatus("stale-b", "RUNNING", "", 30*time.Second)
	p.waitIdle(t)
	first := p.App.Store().Snapshot("stale-a").Record
	if r := do(t, http.MethodDelete, p.URL+containers+"/stale-a", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	events.waitStatus("stale-a", "DELETED", "", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "stale-a's first record gone", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, container.RecordName("stale-a"), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	create(t, p, "stale-a", spec("stale-a", "nginx"))
	events.waitStatus("stale-a", "RUNNING", "", 30*time.Second)
	p.waitIdle(t)
	b := p.App.Store().Snapshot("stale-b")
	if first == nil || b.Record == nil || b.Live() == nil {
		t.Fatalf("snapshots: %+v %+v", first, b)
	}
	p.Stop() // its controller is up to date; only the stale one runs from here

	st, err := store.New(cs, ns, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	gone, old := *first, *b.Record
	gone.Terminating = true
	old.Created = old.Created.Add(-time.Hour)
	stale := &frozenSource{snaps: map[string]container.Snapshot{
		"stale-a": {Record: &gone},
		"stale-b": {Record: &old},
	}}
	cl := &watchedCluster{Store: st, confirmed: map[string]int{}}
	pub := &watchedPublisher{}
	rep := status.NewController(stale, pub, cl, status.Options{Workers: 1, Settle: 40 * time.Second, DrainTimeout: time.Second},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rep.Run(runCtx, nil) }()
	t.Cleanup(func() { cancel(); <-done })

	// Each looked at three times (the first, and two retries with backoff), unless it
	// acted already (the bug: shown below).
	testenv.Eventually(t, 30*time.Second, "both confirmed three times", func() error {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if len(cl.steps) == 0 && len(pub.sent()) == 0 && (cl.confirmed["stale-a"] < 3 || cl.confirmed["stale-b"] < 3) {
			return fmt.Errorf("confirmations %v", cl.confirmed)
		}
		return nil
	})
	cl.mu.Lock()
	steps := cl.steps
	cl.mu.Unlock()
	if len(steps) > 0 {
		t.Errorf("the stale controller changed the cluster: %q", steps)
	}
	if sent := pub.sent(); len(sent) > 0 {
		t.Errorf("the stale controller published %q", sent)
	}
	if n := rep.Pending(); n != 2 {
		t.Errorf("pending %d, want both held back", n)
	}
	for _, id := range []string{"stale-a", "stale-b"} {
		c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, container.RecordName(id), metav1.GetOptions{})
		if r, _ := container.RecordOf(c, id); err != nil || r.Terminating || !r.Owed {
			t.Errorf("%s's live record was deleted or finalized: %+v %v", id, r, err)
		}
	}
}

// frozenSource is a cache that stopped following the cluster.
type frozenSource struct{ snaps map[string]container.Snapshot }

func (f *frozenSource) Watch(func(string)) (func(), error)    { return func() {}, nil }
func (f *frozenSource) WaitForSync(context.Context) bool      { return true }
func (f *frozenSource) Snapshot(id string) container.Snapshot { return f.snaps[id] }

// Behind is none: its staleness has not been noticed yet (within the bound).
func (f *frozenSource) Behind() []freshness.Lag { return nil }
func (f *frozenSource) IDs() []string {
	var ids []string
	for id := range f.snaps {
		ids = append(ids, id)
	}
	return ids
}

// watchedCluster is the real Store, counting confirmations and noting every change
// it is asked to make (then made, as the controller asked).
type watchedCluster struct {
	*store.Store
	mu        sync.Mutex
	confirmed map[string]int
	steps     []string
}

func (w *watchedCluster) note(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.steps = append(w.steps, s)
}

func (w *watchedCluster) Confirmed(ctx context.Context, id string) (container.Snapshot, error) {
	snap, err := w.Store.Confirmed(ctx, id)
	w.mu.Lock()
	w.confirmed[id]++
	w.mu.Unlock()
	return snap, err
}

func (w *watchedCluster) Finalize(ctx context.Context, r container.Record) error {
	w.note("finalize " + r.Name)
	return w.Store.Finalize(ctx, r)
}

func (w *watchedCluster) DeleteRecord(ctx context.Context, r container.Record, svcs []*container.Service) error {
	w.note("delete record " + r.Name)
	return w.Store.DeleteRecord(ctx, r, svcs)
}

// watchedPublisher notes what it is asked to publish (acknowledged as stored).
type watchedPublisher struct {
	mu   sync.Mutex
	seen []string
}

func (w *watchedPublisher) Publish(_ context.Context, _, id string, rep status.Report) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, id+" "+string(rep.Status.Status))
	return true, nil
}

func (w *watchedPublisher) sent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
