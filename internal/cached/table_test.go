package cached

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func deployment(id, name, rv string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv,
		UID: types.UID("uid-" + name), Labels: container.SystemLabels(id)}}
}

func pod(id, name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv, Labels: container.SystemLabels(id)}}
}

func names(snap container.Snapshot) []string {
	var out []string
	for _, d := range snap.Deployments {
		out = append(out, d.Name)
	}
	for _, p := range snap.Pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// The table walks ids in order, in pages, with the entries a selector keeps; an entry
// holds every object of its container, several of a kind included, and goes with its
// last object; Count is the ids with a Deployment or a record.
func TestTableWalk(t *testing.T) {
	tab := NewTable("ns", time.Now)
	deps, pods := tab.Source(Deployments), tab.Source(Pods)
	for i := 2999; i >= 0; i-- { // out of order, more than one run
		_ = deps.Add(deployment(fmt.Sprintf("c%04d", i), fmt.Sprintf("web-%04d", i), "1"))
	}
	_ = deps.Delete(deployment("c0005", "web-0005", "2"))
	_ = deps.Add(deployment("c0006", "web-0006b", "3")) // a second Deployment of the id
	_ = pods.Add(pod("c0007", "web-0007-abc", "4"))
	_ = pods.Add(pod("c0007", "web-0007-abc", "4")) // again: no duplicate
	_ = pods.Add(pod("c9001", "lone", "5"))         // a pod alone is not a live container
	var got []string
	tab.Walk("", Live, func(id string, _ container.Snapshot) bool { got = append(got, id); return true })
	if len(got) != 2999 || got[0] != "c0000" || got[5] != "c0006" || got[2998] != "c2999" {
		t.Fatalf("walk: %d ids, %v … %v", len(got), got[:7], got[len(got)-1])
	}
	if !slices.IsSorted(got) {
		t.Fatal("out of order")
	}
	var page []string
	tab.Walk("c0004", Live, func(id string, _ container.Snapshot) bool { page = append(page, id); return len(page) < 3 })
	if fmt.Sprint(page) != "[c0006 c0007 c0008]" {
		t.Errorf("page after c0004 = %v", page)
	}
	if n := names(tab.Snapshot("c0006")); fmt.Sprint(n) != "[web-0006 web-0006b]" {
		t.Errorf("c0006 holds %v", n)
	}
	if n := names(tab.Snapshot("c0007")); fmt.Sprint(n) != "[web-0007 web-0007-abc]" {
		t.Errorf("c0007 holds %v", n)
	}
	if !tab.Snapshot("c0005").Empty() {
		t.Error("a deleted container is still found")
	}
	if n := tab.Count(); n != 2999 {
		t.Errorf("Count = %d, want 2999", n)
	}
	var all []string
	tab.EachID(Any, func(id string) bool { all = append(all, id); return true })
	if len(all) != 3000 || all[2999] != "c9001" {
		t.Errorf("every id: %d, last %v", len(all), all[len(all)-1])
	}
	_ = pods.Delete(pod("c9001", "lone", "6"))
	if tab.tree.Len() != 2999 {
		t.Errorf("%d entries after the last object of an id went", tab.tree.Len())
	}
}

// An update that moves an object to another id, or to none (someone changed or took
// off its label), takes it from the id it had, and so does a delete without it; a relist does the same, and drops what it does not list unless
// the table holds a newer write of it.
func TestMovesAndRelists(t *testing.T) {
	tab := NewTable("ns", time.Now)
	deps := tab.Source(Deployments)
	_ = deps.Add(deployment("a", "web-1", "1"))
	_ = deps.Update(deployment("b", "web-1", "2"))
	if !tab.Snapshot("a").Empty() || len(tab.Snapshot("b").Deployments) != 1 {
		t.Fatalf("after the move: a %v, b %v", names(tab.Snapshot("a")), names(tab.Snapshot("b")))
	}
	_ = deps.Update(deployment("", "web-1", "3")) // its id label taken off: no container's
	if !tab.Snapshot("b").Empty() {
		t.Fatalf("after its id label went: b %v", names(tab.Snapshot("b")))
	}
	_ = deps.Update(deployment("b", "web-1", "4")) // and put back
	_ = deps.Add(deployment("f", "web-6", "4"))
	_ = deps.Delete(deployment("", "web-6", "5")) // deleted without its id label
	if !tab.Snapshot("f").Empty() {
		t.Fatalf("deleted without its id label: f %v", names(tab.Snapshot("f")))
	}
	_ = deps.Add(deployment("c", "web-3", "3"))
	tab.Wrote(deployment("d", "web-4", "20")) // this replica's write, after the list below
	tab.Wrote(deployment("e", "web-5", "5"))  // a write the list is newer than: deleted since
	if err := deps.Replace([]any{deployment("a", "web-1", "6")}, "10"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"a": 1, "b": 0, "c": 0, "d": 1, "e": 0} {
		if n := len(tab.Snapshot(id).Deployments); n != want {
			t.Errorf("after the relist %s has %d Deployments, want %d", id, n, want)
		}
	}
	if !deps.HasSynced() {
		t.Error("not synced after a list")
	}
	// An older state never replaces a newer one.
	tab.Wrote(deployment("a", "web-1", "4"))
	if snap := tab.Snapshot("a"); len(snap.Deployments) != 1 || snap.Deployments[0].UID != "uid-web-1" {
		t.Errorf("a: %+v", snap.Deployments)
	}
}

// client-go's own reflector fills the table: the first list, the watch's adds, updates
// and deletes, and a relist after the watch expires (410), which takes what it lists,
// drops what it does not, and tells every container it touches. A resync tells every
// container again.
func TestAReflectorFillsTheTable(t *testing.T) {
	tab := NewTable("ns", time.Now)
	var mu sync.Mutex
	told := map[string]int{}
	tab.OnChange(func(id string) { mu.Lock(); told[id]++; mu.Unlock() })
	toldOf := func(id string) int { mu.Lock(); defer mu.Unlock(); return told[id] }

	var lists int
	watches := make(chan *watch.FakeWatcher, 2)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			lists++
			if lists == 1 {
				return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Pod{*pod("a", "pa", "1"), *pod("b", "pb", "1")}}, nil
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []corev1.Pod{*pod("a", "pa", "8"), *pod("d", "pd", "9")}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			watches <- w
			return w, nil
		},
	}
	src := tab.Source(Pods)
	r := cache.NewReflectorWithOptions(listThenWatch{lw}, &corev1.Pod{}, src, cache.ReflectorOptions{Name: "pods", ResyncPeriod: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go r.RunWithContext(ctx)
	w := <-watches
	select {
	case <-src.Synced():
	default:
		t.Fatal("Synced is not closed after the first list")
	}
	if !src.HasSynced() || toldOf("a") != 1 || toldOf("b") != 1 {
		t.Fatalf("after the first list: synced %v, told %v", src.HasSynced(), told)
	}
	w.Add(pod("c", "pc", "2"))
	w.Modify(pod("a", "pa", "3"))
	w.Delete(pod("b", "pb", "4"))
	wait(t, func() bool { return toldOf("b") == 2 })
	if got := fmt.Sprint(names(tab.Snapshot("a")), names(tab.Snapshot("b")), names(tab.Snapshot("c"))); got != "[pa] [] [pc]" {
		t.Errorf("after the watch: %s", got)
	}
	w.Error(&apierrors.NewResourceExpired("too old").ErrStatus) // the reflector lists again
	<-watches
	if got := fmt.Sprint(names(tab.Snapshot("a")), names(tab.Snapshot("c")), names(tab.Snapshot("d"))); got != "[pa] [] [pd]" {
		t.Errorf("after the relist: %s", got)
	}
	if toldOf("c") != 2 || toldOf("d") != 1 || toldOf("a") != 3 {
		t.Errorf("told after the relist: %v", told)
	}
	_ = src.Resync()
	if toldOf("a") != 4 || toldOf("d") != 2 || toldOf("c") != 2 {
		t.Errorf("told after a resync: %v", told)
	}
}

func wait(t *testing.T, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// listThenWatch makes the reflector list, then watch (the scripted watch sends no
// watch-list bookmark).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
