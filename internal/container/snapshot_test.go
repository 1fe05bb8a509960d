package container

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

func TestSnapshotObservesTheLiveIncarnation(t *testing.T) {
	meta := func(inc string) Meta { return Meta{Name: "x-" + inc, Incarnation: inc} }
	old := &Deployment{Meta: meta("old")}
	old.Deleting = true
	live := &Deployment{Meta: meta("new")}
	pods := []*Pod{{Meta: meta("old"), Phase: corev1.PodRunning}, {Meta: meta("new"), Phase: corev1.PodPending}}
	svcs := []*Service{{Meta: meta("old")}, {Meta: meta("new")}}
	rec := &Record{UID: "new"}
	earlier := &Deployment{Meta: meta("old")} // an earlier record's, not deleted yet: the garbage collector's
	terminating := &Record{UID: "new", Terminating: true}
	cases := []struct {
		name     string
		snap     Snapshot
		live     *Deployment
		pods     []string
		service  string
		status   v1alpha1.ContainerStatus
		observed bool
	}{
		{"an earlier container's leftovers are not the live one's",
			Snapshot{Record: rec, Deployments: []*Deployment{old, live}, Pods: pods, Services: svcs}, live, []string{"x-new"}, "x-new", v1alpha1.PENDING, true},
		{"a Deployment the record does not control is not the container",
			Snapshot{Record: rec, Deployments: []*Deployment{earlier}, Pods: pods, Services: svcs}, nil, nil, "", v1alpha1.DELETED, false},
		{"no record: no container, whatever Deployment carries the id",
			Snapshot{Deployments: []*Deployment{live}, Pods: pods, Services: svcs}, nil, nil, "", v1alpha1.DELETED, false},
		{"a terminating record: deleted, its Deployment still there",
			Snapshot{Record: terminating, Deployments: []*Deployment{live}, Pods: pods, Services: svcs}, nil, nil, "", v1alpha1.DELETED, false},
		{"only a Deployment being deleted: gone",
			Snapshot{Record: rec, Deployments: []*Deployment{old}, Pods: pods}, nil, nil, "", v1alpha1.DELETED, false},
		{"nothing", Snapshot{}, nil, nil, "", v1alpha1.DELETED, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.snap.Live(); got != tc.live {
				t.Errorf("live %v, want %v", got, tc.live)
			}
			o, ok := tc.snap.Observed()
			var pods []string
			for _, p := range o.Pods {
				pods = append(pods, p.Name)
			}
			service := ""
			if o.Service != nil {
				service = o.Service.Name
			}
			if ok != tc.observed || o.Deployment != tc.live || !slices.Equal(pods, tc.pods) || service != tc.service {
				t.Errorf("observed %v %v pods %v service %q, want %v pods %v service %q", ok, o.Deployment, pods, service, tc.observed, tc.pods, tc.service)
			}
			if st := tc.snap.Status(); st.Status != tc.status {
				t.Errorf("status %v, want %v", st, tc.status)
			}
		})
	}
}
