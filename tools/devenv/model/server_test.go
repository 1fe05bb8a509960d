package model

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

const testNS = "dcm-containers"

func newTestServer(t *testing.T, n int) (*Server, kubernetes.Interface) {
	t.Helper()
	return newTestServerFor(t, n, rest.ContentConfig{})
}

// newTestServerFor is newTestServer with a client of content config cc.
func newTestServerFor(t *testing.T, n int, cc rest.ContentConfig) (*Server, kubernetes.Interface) {
	t.Helper()
	srv, err := NewServer(testNS, n, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var unknown bytes.Buffer
	srv.Log = &unknown
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		if unknown.Len() > 0 {
			t.Errorf("requests the model does not serve:\n%s", unknown.String())
		}
	})
	client, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, ContentConfig: cc})
	if err != nil {
		t.Fatal(err)
	}
	return srv, client
}

// The templates give every container's objects byte for byte as Build does, and the
// server's labels are the objects'.
func TestEncoderMatchesBuild(t *testing.T) {
	e, err := newEncoder(testNS, metav1.NewTime(time.Now().Truncate(time.Second)), firstResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{N: 200000, Namespace: testNS, enc: e}
	for _, i := range []int{0, 2, 26, 27, 255, 256, 4095, 65536, 77777, 123456, 123457, 149999, 199999} {
		if err := e.check(i); err != nil {
			t.Fatal(err)
		}
		c, _ := Build(testNS, i, e.created, firstResourceVersion)
		for _, k := range Kinds {
			if got, want := s.labels(i, k), c.Object(k).GetLabels(); !maps.Equal(got, want) {
				t.Errorf("container %d, %s: labels %v, want %v", i, k, got, want)
			}
			got, ok := indexOfName(k, c.Object(k).GetName())
			if !ok || got != i {
				t.Errorf("container %d, %s: name %q gives %d, %v", i, k, c.Object(k).GetName(), got, ok)
			}
		}
		if got, ok := IndexOf(ID(i)); !ok || got != i {
			t.Errorf("IndexOf(ID(%d)) = %d, %v", i, got, ok)
		}
	}
	for _, bad := range []string{"", "web", "not-an-id-at-all-but-36-characters!", ID(5)[:35] + "0"} {
		if _, ok := IndexOf(bad); ok {
			t.Errorf("IndexOf(%q) found a container", bad)
		}
	}
}

// The lists of 10 decode into typed objects through client-go, selected as the store
// selects them; one id's selector gives that container alone; gets by name work.
func TestServerList(t *testing.T) {
	_, client := newTestServer(t, 10)
	ctx := context.Background()
	all := metav1.ListOptions{LabelSelector: container.Selector}
	records := metav1.ListOptions{LabelSelector: container.RecordSelector}
	one := metav1.ListOptions{LabelSelector: container.InstanceSelector(ID(7))}
	ids := func(objs []metav1.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, container.InstanceID(o.GetLabels()))
		}
		return out
	}
	var want []string
	for i := range 10 {
		want = append(want, ID(i))
	}
	for _, tc := range []struct {
		name string
		list func() ([]metav1.Object, error)
		want []string
	}{
		{"deployments", func() ([]metav1.Object, error) {
			l, err := client.AppsV1().Deployments(testNS).List(ctx, all)
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, want},
		{"pods", func() ([]metav1.Object, error) {
			l, err := client.CoreV1().Pods(testNS).List(ctx, all)
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, want},
		{"services", func() ([]metav1.Object, error) {
			l, err := client.CoreV1().Services(testNS).List(ctx, all)
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, want},
		{"records", func() ([]metav1.Object, error) {
			l, err := client.CoreV1().ConfigMaps(testNS).List(ctx, records)
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, want},
		{"one id's deployments", func() ([]metav1.Object, error) {
			l, err := client.AppsV1().Deployments(testNS).List(ctx, one)
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, []string{ID(7)}},
		{"another provider's services", func() ([]metav1.Object, error) {
			l, err := client.CoreV1().Services(testNS).List(ctx, metav1.ListOptions{LabelSelector: "dcm.project/dcm-service-type=database"})
			return metaOf(l, err, func() []metav1.Object { return ptrs(l.Items) })
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := tc.list()
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(objs); !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
		})
	}
	pod, err := client.CoreV1().Pods(testNS).Get(ctx, PodName(3), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || container.InstanceID(pod.Labels) != ID(3) {
		t.Errorf("pod 3: phase %s, id %s", pod.Status.Phase, container.InstanceID(pod.Labels))
	}
	if _, err := client.CoreV1().Pods(testNS).Get(ctx, PodName(11), metav1.GetOptions{}); err == nil {
		t.Error("pod 11 of 10 found")
	}
}

func ptrs[T any](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = any(&items[i]).(metav1.Object)
	}
	return out
}

func metaOf(l any, err error, items func() []metav1.Object) ([]metav1.Object, error) {
	if err != nil {
		return nil, err
	}
	return items(), nil
}

// A watch-list gives every object and the bookmark that ends them; a change sent
// afterwards arrives as its event.
func TestServerWatch(t *testing.T) {
	// client-go's default (protobuf, as the service's informers) and JSON.
	for _, cc := range []rest.ContentConfig{{}, {ContentType: "application/json", AcceptContentTypes: "application/json"}} {
		t.Run("accept="+cc.AcceptContentTypes, func(t *testing.T) { testServerWatch(t, cc) })
	}
}

func testServerWatch(t *testing.T, cc rest.ContentConfig) {
	srv, client := newTestServerFor(t, 10, cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := client.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{LabelSelector: container.Selector,
		SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() watch.Event {
		select {
		case ev := <-w.ResultChan():
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return watch.Event{}
	}
	for i := range 10 {
		ev := next()
		pod, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Added || !ok || pod.Name != PodName(i) {
			t.Fatalf("initial event %d: %s %T", i, ev.Type, ev.Object)
		}
	}
	srv.mu.Lock()
	for wt := range srv.watchers {
		if wt.proto != (cc.ContentType == "") {
			t.Errorf("the watch is in protobuf: %v, want it for client-go's default only", wt.proto)
		}
	}
	srv.mu.Unlock()
	ev := next()
	if ev.Type != watch.Bookmark {
		t.Fatalf("after the initial events: %s, want BOOKMARK", ev.Type)
	}
	if m, _ := ev.Object.(*corev1.Pod); m == nil || m.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("the bookmark %#v does not end the initial events", ev.Object)
	}
	n, err := srv.Change(watch.Modified, 4, Pods, func(c Container) metav1.Object {
		c.Pod.Status.Phase, c.Pod.Status.Reason = corev1.PodFailed, "Evicted"
		return c.Pod
	})
	if err != nil || n != 1 {
		t.Fatalf("change sent to %d watches: %v", n, err)
	}
	ev = next()
	if pod, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Modified || !ok || pod.Name != PodName(4) || pod.Status.Reason != "Evicted" {
		t.Fatalf("the change came as %s %#v", ev.Type, ev.Object)
	}
}

// The service's store fills its caches from the server (by the watch-list) and reads
// every container as running.
func TestStoreSyncs(t *testing.T) {
	_, client := newTestServer(t, 10)
	st, err := store.New(client, testNS, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st.Start(ctx)
	defer func() {
		cancel() // the informers stop on their context; Shutdown waits for them
		st.Shutdown()
	}()
	if !st.WaitForSync(ctx) {
		t.Fatal("not synced")
	}
	page, more, err := st.List("", 50)
	if err != nil || more || len(page) != 10 {
		t.Fatalf("list: %d containers, more %v, %v", len(page), more, err)
	}
	o, err := st.Get(ctx, ID(5))
	if err != nil {
		t.Fatal(err)
	}
	if got := container.StatusOf(o.Deployment, o.Pods).Status; got != v1alpha1.RUNNING || o.Service == nil {
		raw, _ := json.Marshal(o)
		t.Errorf("container 5 is %s, want RUNNING with a Service: %s", got, raw)
	}
}

// The election's lock: created, read and updated through client-go (which writes
// protobuf), an update from a stale read refused with a conflict.
func TestServerLock(t *testing.T) {
	_, client := newTestServer(t, 1)
	ctx := context.Background()
	cms := client.CoreV1().ConfigMaps(testNS)
	lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k8s-container-sp-status", Annotations: map[string]string{"a": "1"}}}
	created, err := cms.Create(ctx, lock, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		from    *corev1.ConfigMap
		wantErr bool
	}{
		{"from the last read", created, false},
		{"from a stale read", created, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.from.DeepCopy()
			w.Annotations["a"] = "2"
			_, err := cms.Update(ctx, w, metav1.UpdateOptions{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("update: %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
	got, err := cms.Get(ctx, lock.Name, metav1.GetOptions{})
	if err != nil || got.Annotations["a"] != "2" {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := cms.Create(ctx, lock, metav1.CreateOptions{}); err == nil {
		t.Error("a second create succeeded")
	}
}
