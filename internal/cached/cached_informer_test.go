package cached

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// An informer takes an update whose resourceVersion equals the cached object's for a
// resync, and hands it only to handlers due a resync. Cached objects must keep the
// resourceVersion, or after the informer's first resync check (10 minutes in) no update
// would reach the status reporter. This runs the informer machinery itself on a
// scripted watch: resync checks every 20 ms, a handler never due one.
func TestCachedUpdatesReachHandlersAfterResyncChecks(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1",
		Labels: container.SystemLabels("abc")}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	w := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Pod{*pod.DeepCopy()}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}
	inf := cache.NewSharedIndexInformerWithOptions(listThenWatch{lw}, &corev1.Pod{}, cache.SharedIndexInformerOptions{ResyncPeriod: 20 * time.Millisecond})
	if err := inf.SetTransform(Of); err != nil {
		t.Fatal(err)
	}
	updates := make(chan string, 10)
	if _, err := inf.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { updates <- string(obj.(*cachedPod).view().Phase) },
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	runSynced(t, inf)
	time.Sleep(200 * time.Millisecond) // several resync checks: the handler is not due one

	pod.ResourceVersion, pod.Status.Phase = "2", corev1.PodFailed
	w.Modify(pod.DeepCopy())
	select {
	case phase := <-updates:
		if phase != string(corev1.PodFailed) {
			t.Errorf("update carried phase %q", phase)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the update never reached the handler")
	}
}

// runSynced runs inf until the test ends (30 s at most) and waits until it has synced;
// the context it returns ends with the run.
func runSynced(t *testing.T, inf cache.SharedIndexInformer) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	return ctx
}

// listThenWatch makes the reflector list, then watch (the scripted watch sends no
// watch-list bookmark).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// A cached object's key is its name when KeysByName holds, "namespace/name" when it
// does not; either way a relist of the same objects (the watch expired: 410) must not
// reach a handler as a delete, which the status reporter would take for a container
// gone. This runs client-go's informer with the store's choice and with the other
// FIFO forced, each through a list, an expired watch and a second list.
func TestRelistDeletesNothing(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(map[bool]string{true: "atomic FIFO", false: "delta FIFO"}[atomic], func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.AtomicFIFO, atomic)
			byName := KeysByName()
			if byName != atomic {
				t.Fatalf("KeysByName() = %v with AtomicFIFO %v", byName, atomic)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1",
				Labels: container.SystemLabels("abc")}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			lists, watches := make(chan struct{}, 10), make(chan *watch.FakeWatcher, 10)
			lw := &cache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					lists <- struct{}{}
					return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Pod{*pod.DeepCopy()}}, nil
				},
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
					w := watch.NewFake()
					watches <- w
					return w, nil
				},
			}
			inf := cache.NewSharedIndexInformerWithOptions(listThenWatch{lw}, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
			if err := inf.SetTransform(func(obj any) (any, error) {
				return OfSharing(obj, func(id string) string { return id }, byName)
			}); err != nil {
				t.Fatal(err)
			}
			deletes := make(chan any, 10)
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { deletes <- obj }}); err != nil {
				t.Fatal(err)
			}
			ctx := runSynced(t, inf)
			if _, ok, _ := inf.GetStore().GetByKey(Key("ns", "p", byName)); !ok {
				t.Fatalf("the cache has no key %q: %v", Key("ns", "p", byName), inf.GetStore().ListKeys())
			}
			<-lists
			(<-watches).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
			select {
			case <-lists:
			case <-ctx.Done():
				t.Fatal("the informer never listed again")
			}
			<-watches // watching again: the relist is in the cache
			select {
			case obj := <-deletes:
				t.Fatalf("the relist deleted %#v", obj)
			case <-time.After(200 * time.Millisecond):
			}
			if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != Key("ns", "p", byName) {
				t.Errorf("keys after the relist: %q", keys)
			}
		})
	}
}
