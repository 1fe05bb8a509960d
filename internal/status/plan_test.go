package status

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type depOpt func(*appsv1.Deployment)

func dep(name string, opts ...depOpt) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}}
	for _, o := range opts {
		o(d)
	}
	return d
}

func held(d *appsv1.Deployment) { d.Finalizers = append(d.Finalizers, container.Finalizer) }

func reserved(d *appsv1.Deployment) {
	d.OwnerReferences = append(d.OwnerReferences, metav1.OwnerReference{
		APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "dcm-container-x", UID: "u1"})
}

func deleting(d *appsv1.Deployment) { now := metav1.NewTime(t0); d.DeletionTimestamp = &now }

func otherFinalizer(d *appsv1.Deployment) { d.Finalizers = append(d.Finalizers, "foregroundDeletion") }

func runningPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func st(s v1alpha1.ContainerStatus, msg string) *container.Status {
	return &container.Status{Status: s, Message: msg}
}

var (
	running  = st(v1alpha1.RUNNING, "Container is running.")
	waiting  = st(v1alpha1.PENDING, "Waiting for the pod to be created.")
	deleted  = st(v1alpha1.DELETED, "Container deleted.")
	liveDep  = dep("web-1", held, reserved)
	bareDep  = dep("web-1", reserved)
	goneHeld = dep("web-1", held, reserved, deleting)
)

// Every decision the reporter takes for one container. (What status a snapshot maps to,
// row by row, is container.StatusOf's table; here the snapshot's status is one input.)
func TestPlan(t *testing.T) {
	cases := []struct {
		name   string
		snap   container.Snapshot
		last   *container.Status
		forced bool

		publish         *container.Status
		adopt           bool
		unhold, release []string
	}{
		{"new container: its first status is sent", container.Snapshot{Live: liveDep}, nil, false, waiting, false, nil, nil},
		{"unchanged: nothing", container.Snapshot{Live: liveDep}, waiting, false, nil, false, nil, nil},
		{"changed: the new status", container.Snapshot{Live: liveDep, Pods: []*corev1.Pod{runningPod()}}, waiting, false, running, false, nil, nil},
		{"unchanged but forced (republish): sent again", container.Snapshot{Live: liveDep}, waiting, true, waiting, false, nil, nil},
		{"live without the finalizer: adopted", container.Snapshot{Live: bareDep}, waiting, false, nil, true, nil, nil},
		{"adopted and sent together", container.Snapshot{Live: bareDep}, nil, false, waiting, true, nil, nil},
		{"deleted, held, reserved: DELETED, unhold, release", container.Snapshot{Deleting: []*appsv1.Deployment{goneHeld}},
			running, false, deleted, false, []string{"web-1"}, []string{"web-1"}},
		{"DELETED already sent but still held (a step failed): steps again, no event",
			container.Snapshot{Deleting: []*appsv1.Deployment{goneHeld}}, deleted, false, nil, false, []string{"web-1"}, []string{"web-1"}},
		{"deleted without our finalizer (removed by hand, or another finalizer holds it): release only",
			container.Snapshot{Deleting: []*appsv1.Deployment{dep("web-1", reserved, otherFinalizer, deleting)}}, running, false, deleted, false, nil, []string{"web-1"}},
		{"deleted, made by the reference provider (no reservation): unhold only",
			container.Snapshot{Deleting: []*appsv1.Deployment{dep("web-1", held, deleting)}}, running, false, deleted, false, []string{"web-1"}, nil},
		{"pods outlive their deleted Deployment: DELETED, nothing held",
			container.Snapshot{Pods: []*corev1.Pod{runningPod()}}, running, false, deleted, false, nil, nil},
		{"gone while the reporter was away: DELETED once", container.Snapshot{}, nil, false, deleted, false, nil, nil},
		{"gone, DELETED delivered: nothing", container.Snapshot{}, deleted, false, nil, false, nil, nil},
		{"re-created id while the old one terminates: the new one speaks, the old one stays held",
			container.Snapshot{Live: liveDep, Deleting: []*appsv1.Deployment{dep("web-0", held, reserved, deleting)}},
			deleted, false, waiting, false, nil, nil},
		{"several being deleted: all unheld and released", container.Snapshot{Deleting: []*appsv1.Deployment{
			dep("web-0", held, reserved, deleting), dep("web-1", held, reserved, deleting)}},
			running, false, deleted, false, []string{"web-0", "web-1"}, []string{"web-0", "web-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.snap, tc.last, tc.forced)
			switch {
			case (p.Publish == nil) != (tc.publish == nil):
				t.Errorf("publish %v, want %v", p.Publish, tc.publish)
			case p.Publish != nil && *p.Publish != *tc.publish:
				t.Errorf("publish %+v, want %+v", *p.Publish, *tc.publish)
			}
			if (p.Adopt != nil) != tc.adopt {
				t.Errorf("adopt %v, want %v", p.Adopt != nil, tc.adopt)
			}
			if got := names(p.Unhold); !slices.Equal(got, tc.unhold) {
				t.Errorf("unhold %v, want %v", got, tc.unhold)
			}
			if got := names(p.Release); !slices.Equal(got, tc.release) {
				t.Errorf("release %v, want %v", got, tc.release)
			}
			if p.Empty() != (tc.publish == nil && !tc.adopt && len(tc.unhold) == 0 && len(tc.release) == 0) {
				t.Errorf("Empty() = %v", p.Empty())
			}
		})
	}
}

func names(ds []*appsv1.Deployment) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}
