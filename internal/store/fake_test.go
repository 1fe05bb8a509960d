package store

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The store's client calls around its decisions, against client-go's fake clientset:
// each test scripts the interleaving a race needs (an answer lost, a record deleted
// between two reads) with reactors, so it runs the same way every time.

const ns = "ns"

// fakeStore is a Store on fake clients (main and Confirm), its clock at t0, its caches
// not started unless the test starts them.
func fakeStore(t *testing.T, objs ...runtime.Object) (*Store, *fake.Clientset, *fake.Clientset) {
	t.Helper()
	main, confirm := fake.NewClientset(objs...), fake.NewClientset(objs...)
	s, err := New(main, ns, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Confirm = confirm
	s.Clock = clocktesting.NewFakePassiveClock(t0)
	s.CreateTimeout = createTimeout
	return s, main, confirm
}

// startCaches starts the store's informers and waits for them to sync.
func startCaches(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); s.Shutdown() })
	s.Start(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !s.WaitForSync(wctx) {
		t.Fatal("caches did not sync")
	}
}

// recordLease is container x's record, incarnation i1, made ago before t0.
func recordLease(ago time.Duration, owed bool) *coordinationv1.Lease {
	l := container.NewRecord("x", "i1", owed)
	l.Namespace, l.UID, l.CreationTimestamp = ns, "r1", metav1.NewTime(t0.Add(-ago))
	return l
}

// deployment is a Deployment of container x, incarnation inc.
func deployment(name, inc string) *appsv1.Deployment {
	l := labels("x", inc)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: l},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
	}
}

// service is a Service of container x, incarnation inc.
func service(name, inc string) *corev1.Service {
	l := labels("x", inc)
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: l},
		Spec: corev1.ServiceSpec{Selector: l, Ports: []corev1.ServicePort{{Port: 80}}}}
}

// requestsFor lists the requests a fake client got about container x (not the
// informers' lists and watches of everything), as "verb resource".
func requestsFor(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		switch a := a.(type) {
		case k8stesting.ListAction:
			if !strings.Contains(a.GetListRestrictions().Labels.String(), "=x") {
				continue
			}
		case k8stesting.WatchAction:
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")
