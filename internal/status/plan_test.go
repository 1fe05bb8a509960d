package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const settle = 40 * time.Second

type depOpt func(*appsv1.Deployment)

// dep is a Deployment as the caches show it (the same for pods and services below).
func dep(name string, opts ...depOpt) *container.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0),
		Labels: map[string]string{container.LabelIncarnation: "i1"}}}
	for _, o := range opts {
		o(d)
	}
	v := container.DeploymentOf(d)
	return &v
}

func deleting(d *appsv1.Deployment) { now := metav1.NewTime(t0); d.DeletionTimestamp = &now }

func incarnation(inc string) depOpt {
	return func(d *appsv1.Deployment) { d.Labels[container.LabelIncarnation] = inc }
}

func runningPod() *container.Pod {
	v := container.PodOf(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{container.LabelIncarnation: "i1"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	})
	return &v
}

func svc(name string) *container.Service {
	v := container.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{container.LabelIncarnation: "i1"}}})
	return &v
}

type recOpt func(*container.Record)

func record(opts ...recOpt) *container.Record {
	r := &container.Record{Name: "dcm-container-x", UID: "r1", Incarnation: "i1", Created: t0}
	for _, o := range opts {
		o(r)
	}
	return r
}

func owed(r *container.Record)        { r.Owed = true }
func terminating(r *container.Record) { r.Terminating = true }
func created(ago time.Duration) recOpt {
	return func(r *container.Record) { r.Created = t0.Add(-ago) }
}

func st(s v1alpha1.ContainerStatus, msg string) *container.Status {
	return &container.Status{Status: s, Message: msg}
}

var (
	running = st(v1alpha1.RUNNING, "Container is running.")
	waiting = st(v1alpha1.PENDING, "Waiting for the pod to be created.")
	deleted = st(v1alpha1.DELETED, "Container deleted.")
	live    = dep("web-1")
)

// summary writes a plan in the order the reporter carries it out.
func summary(p Plan) string {
	var out []string
	if w := p.Record; w != nil {
		out = append(out, fmt.Sprintf("record %q owed=%v", w.Incarnation, w.Owed))
	}
	for _, s := range p.DeleteServices {
		out = append(out, "delete service "+s.Name)
	}
	if p.Publish != nil {
		out = append(out, "publish "+string(p.Publish.Status))
	}
	if p.DeleteRecord != nil {
		out = append(out, "delete record "+string(p.DeleteRecord.UID))
	}
	if p.RecheckAfter > 0 {
		out = append(out, "recheck in "+p.RecheckAfter.String())
	}
	return strings.Join(out, "; ")
}

// Every decision the reporter takes for one container. (What status a snapshot maps to,
// row by row, is container.StatusOf's table; here the snapshot's status is one input.)
func TestPlan(t *testing.T) {
	cases := []struct {
		name   string
		snap   container.Snapshot
		last   *container.Status
		forced bool
		want   string
	}{
		// Live containers.
		{"new container: its first status is sent",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}}, nil, false, "publish PENDING"},
		{"unchanged: nothing",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}}, waiting, false, ""},
		{"changed: the new status",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}, Pods: []*container.Pod{runningPod()}}, waiting, false, "publish RUNNING"},
		{"unchanged but forced (republish): sent again",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}}, waiting, true, "publish PENDING"},
		{"record deleted by hand: restored from the Deployment",
			container.Snapshot{Deployments: []*container.Deployment{live}}, waiting, false, `record "i1" owed=false`},
		{"record being deleted by hand (foreground cascade): restored",
			container.Snapshot{Record: record(terminating), Deployments: []*container.Deployment{live}}, waiting, false, `record "i1" owed=false`},
		{"made by the reference provider (no record, no incarnation): record written, status sent",
			container.Snapshot{Deployments: []*container.Deployment{dep("ref-1", incarnation(""))}}, nil, false, `record "" owed=false; publish PENDING`},
		{"DELETE in progress (record owed, Deployment not yet gone): record left alone",
			container.Snapshot{Record: record(owed), Deployments: []*container.Deployment{live}}, waiting, false, ""},
		{"a pod of an earlier incarnation never speaks for the live one",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{dep("web-2", incarnation("i2"))}, Pods: []*container.Pod{runningPod()}},
			nil, false, `record "i2" owed=false; publish PENDING`},

		// Gone containers.
		{"deleted through the API: DELETED, then the record deleted",
			container.Snapshot{Record: record(owed)}, running, false, "publish DELETED; delete record r1"},
		{"deleted by hand: marked owed first, its Service removed, DELETED, record deleted",
			container.Snapshot{Record: record(), Services: []*container.Service{svc("web-s")}}, running, false,
			`record "i1" owed=true; delete service web-s; publish DELETED; delete record r1`},
		{"deleted while the reporter was away (old record, nothing sent yet): DELETED",
			container.Snapshot{Record: record(created(time.Hour))}, nil, false, `record "i1" owed=true; publish DELETED; delete record r1`},
		{"created and deleted by hand while the reporter was away: DELETED once no create can be running",
			container.Snapshot{Record: record(created(5 * time.Second))}, nil, false, "recheck in 35s"},
		{"owed across a restart: DELETED sent again, record deleted",
			container.Snapshot{Record: record(owed)}, nil, false, "publish DELETED; delete record r1"},
		{"DELETED delivered but deleting the record failed: delete it again, no event",
			container.Snapshot{Record: record(owed)}, deleted, false, "delete record r1"},
		{"Deployment still terminating (foreground): the container is gone already",
			container.Snapshot{Record: record(owed), Deployments: []*container.Deployment{dep("web-1", deleting)}, Pods: []*container.Pod{runningPod()}},
			running, false, "publish DELETED; delete record r1"},
		{"record deleted by hand while owed (finalizer holds it): DELETED, record deleted",
			container.Snapshot{Record: record(owed, terminating)}, running, false, "publish DELETED; delete record r1"},
		{"record and Deployment both deleted by hand, reported live before: DELETED",
			container.Snapshot{}, running, false, "publish DELETED"},
		{"nothing left, nothing reported: nothing", container.Snapshot{}, nil, false, ""},
		{"gone, DELETED delivered: nothing", container.Snapshot{}, deleted, false, ""},
		{"a Service nobody owns any more (failed rollback): removed",
			container.Snapshot{Services: []*container.Service{svc("web-s")}}, nil, false, "delete service web-s"},

		// A create in progress.
		{"record just written, no Deployment yet: look again when no create can still be running",
			container.Snapshot{Record: record(created(10 * time.Second))}, nil, false, "recheck in 30s"},
		{"same after an earlier container with the id was deleted",
			container.Snapshot{Record: record(created(10 * time.Second))}, deleted, true, "recheck in 30s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.snap, tc.last, tc.forced, t0, settle)
			if got := summary(p); got != tc.want {
				t.Errorf("plan:\n got %s\nwant %s", got, tc.want)
			}
			if p.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v", p.Empty())
			}
		})
	}
}

// Which plans the reporter confirms with the apiserver before carrying them out: every
// one that writes or deletes a record, deletes a Service, or publishes DELETED.
func TestNeedsConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Plan
		want bool
	}{
		{"nothing", Plan{}, false},
		{"a live status", Plan{Publish: running}, false},
		{"a look again later", Plan{RecheckAfter: time.Second}, false},
		{"a record restored", Plan{Record: &RecordWrite{Incarnation: "i1"}, Publish: running}, true},
		{"a record marked owed", Plan{Record: &RecordWrite{Incarnation: "i1", Owed: true}}, true},
		{"a Service deleted", Plan{DeleteServices: []*container.Service{svc("s")}}, true},
		{"DELETED published", Plan{Publish: deleted}, true},
		{"a record deleted", Plan{DeleteRecord: record(owed)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.NeedsConfirmation(); got != tc.want {
				t.Errorf("NeedsConfirmation() = %v, want %v", got, tc.want)
			}
		})
	}
}

// Whether the plan made from the cache may be carried out: the plan made from the
// apiserver's objects (with the same last status, force, time, and the cache's pods)
// takes the same destructive steps. One row per race of issue 23 item 1, and the
// cases the DELETED's confirmation (Store.Gone) covered before.
func TestAgree(t *testing.T) {
	withUID := func(name string, uid types.UID) *container.Service {
		s := svc(name)
		s.UID = uid
		return s
	}
	svcA := withUID("web-s", "s1")
	liveA := container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}, Services: []*container.Service{svcA}}
	other := func(rec *container.Record) { rec.UID, rec.Incarnation = "r2", "i2" }
	old := created(time.Hour)
	cases := []struct {
		name             string
		cache, apiserver container.Snapshot
		last             *container.Status
		want             bool
	}{
		{"(a) the cache shows a Service but no record and no Deployment; the apiserver has them: no Service deleted",
			container.Snapshot{Services: []*container.Service{svcA}}, liveA, nil, false},
		{"(a) same, RUNNING sent before: no DELETED either",
			container.Snapshot{Services: []*container.Service{svcA}}, liveA, running, false},
		{"a Service nobody owns, at the apiserver too: removed",
			container.Snapshot{Services: []*container.Service{svcA}}, container.Snapshot{Services: []*container.Service{svcA}}, nil, true},
		{"a Service nobody owns, but the apiserver's has another UID (made again since): not removed",
			container.Snapshot{Services: []*container.Service{svcA}}, container.Snapshot{Services: []*container.Service{withUID("web-s", "s2")}}, nil, false},
		{"(b) a new leader's cache shows a Deployment deleted at the apiserver, no record: not re-created",
			container.Snapshot{Deployments: []*container.Deployment{live}}, container.Snapshot{}, nil, false},
		{"(b) same, the Deployment being deleted at the apiserver: not re-created",
			container.Snapshot{Deployments: []*container.Deployment{live}}, container.Snapshot{Deployments: []*container.Deployment{dep("web-1", deleting)}}, nil, false},
		{"a record deleted by hand, the container live at the apiserver too: restored",
			container.Snapshot{Deployments: []*container.Deployment{live}}, container.Snapshot{Deployments: []*container.Deployment{live}}, waiting, true},
		{"a record deleted by hand, but the apiserver has a record again (restored already): the cache is behind",
			container.Snapshot{Deployments: []*container.Deployment{live}}, container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}}, waiting, false},
		{"(c) DELETED owed and the apiserver agrees: sent, record deleted",
			container.Snapshot{Record: record(owed)}, container.Snapshot{Record: record(owed)}, running, true},
		{"(c) the record is gone at the apiserver (its DELETED was delivered): not sent again",
			container.Snapshot{Record: record(owed)}, container.Snapshot{}, running, false},
		{"(c) another record of the id (reserved again): no DELETED",
			container.Snapshot{Record: record(owed)}, container.Snapshot{Record: record(owed, other)}, running, false},
		{"(c) the id reserved again and its Deployment made: no DELETED",
			container.Snapshot{Record: record(owed)},
			container.Snapshot{Record: record(other), Deployments: []*container.Deployment{dep("web-2", incarnation("i2"))}}, running, false},
		{"(c) the cache shows an old record without Deployment; one lives at the apiserver: not marked owed",
			container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old), Deployments: []*container.Deployment{live}}, nil, false},
		{"(c) deleted by hand, and at the apiserver too: marked owed, Service removed, DELETED",
			container.Snapshot{Record: record(), Services: []*container.Service{svcA}}, container.Snapshot{Record: record(), Services: []*container.Service{svcA}}, running, true},
		{"a live container's status differs (pods from the cache in both): no destructive step differs",
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}, Pods: []*container.Pod{runningPod()}},
			container.Snapshot{Record: record(), Deployments: []*container.Deployment{live}}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cached := plan(tc.cache, tc.last, false, t0, settle)
			api := tc.apiserver
			api.Pods = tc.cache.Pods
			confirmed := plan(api, tc.last, false, t0, settle)
			if got := agree(cached, confirmed); got != tc.want {
				t.Errorf("agree(%q, %q) = %v, want %v", summary(cached), summary(confirmed), got, tc.want)
			}
		})
	}
}
