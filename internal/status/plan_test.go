package status

import (
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

// recName is the name of every test record (the id does not matter to the plan).
const recName = "dcm-container-x"

type depOpt func(*appsv1.Deployment)

// dep is a Deployment as the caches show it: owned by record r1, as the store makes it
// (container.Objects.OwnedBy), unless an option says otherwise. The same for the pods
// and Services below.
func dep(name string, opts ...depOpt) *container.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}}}
	d = container.Objects{Deployment: d}.OwnedBy(recName, "r1").Deployment
	for _, o := range opts {
		o(d)
	}
	v := container.DeploymentOf(d)
	return &v
}

func deleting(d *appsv1.Deployment) { now := metav1.NewTime(t0); d.DeletionTimestamp = &now }

// ownedBy makes the Deployment the one of the record with UID uid.
func ownedBy(uid types.UID) depOpt {
	return func(d *appsv1.Deployment) {
		*d = *container.Objects{Deployment: d}.OwnedBy(recName, uid).Deployment
	}
}

// unowned: a Deployment with the id's labels that no record controls (someone else's).
func unowned(d *appsv1.Deployment) { d.OwnerReferences = nil }

func runningPod() *container.Pod { return runningPodOf("r1") }

// runningPodOf is a running, ready pod of incarnation inc.
func runningPodOf(inc string) *container.Pod {
	v := container.PodOf(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + inc, CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{container.LabelIncarnation: inc}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	})
	return &v
}

func svc(name string) *container.Service {
	objs := container.Objects{
		Deployment: &appsv1.Deployment{},
		Service:    &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}},
	}.OwnedBy(recName, "r1")
	v := container.ServiceOf(objs.Service)
	return &v
}

type recOpt func(*container.Record)

// record is container x's record as the caches show it: UID r1, made at t0 with its
// finalizer on (owed), not deleted.
func record(opts ...recOpt) *container.Record {
	r := &container.Record{Name: recName, UID: "r1", Owed: true, Created: t0}
	for _, o := range opts {
		o(r)
	}
	return r
}

// notOwed: the finalizer is off (taken off after the DELETED was delivered, or by hand).
func notOwed(r *container.Record)     { r.Owed = false }
func terminating(r *container.Record) { r.Terminating = true }
func created(ago time.Duration) recOpt {
	return func(r *container.Record) { r.Created = t0.Add(-ago) }
}

// uid makes the record another one (the id reserved again: another incarnation).
func uid(u types.UID) recOpt { return func(r *container.Record) { r.UID = u } }

// st is a report of status s with message msg and no outputs.
func st(s v1alpha1.ContainerStatus, msg string) *Report {
	return &Report{Status: container.Status{Status: s, Message: msg}}
}

// lastOf is what the controller keeps of report r, delivered (nil: nothing delivered).
func lastOf(r *Report) *delivered {
	if r == nil {
		return nil
	}
	d := deliveredOf(*r)
	return &d
}

var (
	running = st(v1alpha1.RUNNING, "Container is running.")
	waiting = st(v1alpha1.PENDING, "Waiting for the pod to be created.")
	deleted = st(v1alpha1.DELETED, "Container deleted.")
	live    = dep("web-1")
)

// deps and pods shorten the snapshots of the tables.
func deps(d ...*container.Deployment) []*container.Deployment { return d }
func pods(p ...*container.Pod) []*container.Pod               { return p }

// summary writes a plan in the order the controller carries it out.
func summary(p Plan) string {
	var out []string
	for _, d := range p.Orphans.Deployments {
		out = append(out, "delete Deployment "+d.Name)
	}
	for _, v := range p.Orphans.Services {
		out = append(out, "delete Service "+v.Name)
	}
	if p.DeleteRecord != nil {
		out = append(out, "delete record "+string(p.DeleteRecord.UID))
	}
	if p.Publish != nil {
		out = append(out, "publish "+string(p.Publish.Status.Status))
	}
	if p.Finalize != nil {
		out = append(out, "finalize "+string(p.Finalize.UID))
	}
	if p.RecheckAfter > 0 {
		out = append(out, "recheck in "+p.RecheckAfter.String())
	}
	return strings.Join(out, "; ")
}

// Every decision the controller takes for one container. (What status a snapshot maps to,
// row by row, is container.StatusOf's table; which Deployment is live is
// container.Snapshot.Live's; here they are inputs.)
func TestPlan(t *testing.T) {
	cases := []struct {
		name   string
		snap   container.Snapshot
		last   *Report
		forced bool
		want   string
	}{
		// A live container: a live record and the Deployment it controls.
		{"new container: its first status is sent",
			container.Snapshot{Record: record(), Deployments: deps(live)}, nil, false, "publish PENDING"},
		{"unchanged: nothing",
			container.Snapshot{Record: record(), Deployments: deps(live)}, waiting, false, ""},
		{"changed: the new status",
			container.Snapshot{Record: record(), Deployments: deps(live), Pods: pods(runningPod())}, waiting, false, "publish RUNNING"},
		{"unchanged but forced (republish): sent again",
			container.Snapshot{Record: record(), Deployments: deps(live)}, waiting, true, "publish PENDING"},
		{"its Service does not change the plan",
			container.Snapshot{Record: record(), Deployments: deps(live), Services: []*container.Service{svc("web-s")}}, waiting, false, ""},
		{"a live record stripped of its finalizer (by hand) still lives: its status, nothing written",
			container.Snapshot{Record: record(notOwed), Deployments: deps(live)}, nil, false, "publish PENDING"},
		{"a pod of an earlier incarnation never speaks for the live one",
			container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("web-2", ownedBy("r2"))), Pods: pods(runningPodOf("r1"))},
			nil, false, "publish PENDING"},
		{"the earlier incarnation's Deployment, still being collected, beside the live one: the live one's status",
			container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("web-1", deleting), dep("web-2", ownedBy("r2"))),
				Pods: pods(runningPodOf("r2"))}, nil, false, "publish RUNNING"},

		// A deleted container: its record is terminating.
		{"deleted through the API, reported live: DELETED, then the record finalized",
			container.Snapshot{Record: record(terminating)}, running, false, "publish DELETED; finalize r1"},
		{"deleted, its Deployment still there (a create that raced the DELETE): the Deployment deleted, no DELETED yet",
			container.Snapshot{Record: record(terminating), Deployments: deps(live), Pods: pods(runningPod())},
			running, false, "delete Deployment web-1"},
		{"same with its Service, nothing reported yet: both deleted",
			container.Snapshot{Record: record(terminating), Deployments: deps(live), Services: []*container.Service{svc("web-s")}},
			nil, false, "delete Deployment web-1; delete Service web-s"},
		{"deleted, only its Service left: the Service deleted, no DELETED yet",
			container.Snapshot{Record: record(terminating), Services: []*container.Service{svc("web-s")}},
			running, false, "delete Service web-s"},
		{"deleted, its Deployment being deleted: gone, DELETED",
			container.Snapshot{Record: record(terminating), Deployments: deps(dep("web-1", deleting)), Pods: pods(runningPod())},
			running, false, "publish DELETED; finalize r1"},
		{"deleted, nothing reported yet (a new leader, or created and deleted at once): DELETED",
			container.Snapshot{Record: record(terminating)}, nil, false, "publish DELETED; finalize r1"},
		{"DELETED delivered but the finalize failed: finalized again, no event",
			container.Snapshot{Record: record(terminating)}, deleted, false, "finalize r1"},
		{"same, republished: DELETED again, then finalized",
			container.Snapshot{Record: record(terminating)}, deleted, true, "publish DELETED; finalize r1"},
		{"deleted and finalized (the garbage collector still at work): nothing",
			container.Snapshot{Record: record(terminating, notOwed), Deployments: deps(dep("web-1", deleting))}, deleted, false, ""},
		{"deleted, not owed, reported live (its finalizer stripped by hand): nothing until the record is gone",
			container.Snapshot{Record: record(terminating, notOwed)}, running, false, ""},
		{"deleted, not owed, republished: nothing",
			container.Snapshot{Record: record(terminating, notOwed)}, deleted, true, ""},

		// No record: nothing of the id is ours any more.
		{"record and all gone, reported live before (the finalizer stripped by hand): DELETED",
			container.Snapshot{}, running, false, "publish DELETED"},
		{"no record, its Deployment being collected and its Service left, reported live: the Service deleted, no DELETED yet",
			container.Snapshot{Deployments: deps(dep("web-1", deleting)), Services: []*container.Service{svc("web-s")}}, running, false, "delete Service web-s"},
		{"no record, its Deployment being collected, reported live: DELETED",
			container.Snapshot{Deployments: deps(dep("web-1", deleting))}, running, false, "publish DELETED"},
		{"no record, a live Deployment of a gone record, nothing reported: deleted",
			container.Snapshot{Deployments: deps(live)}, nil, false, "delete Deployment web-1"},
		{"a live container beside a Service of an earlier incarnation: the Service deleted, the status sent",
			container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("web-2", ownedBy("r2"))), Services: []*container.Service{svc("web-s")}},
			nil, false, "delete Service web-s; publish PENDING"},
		{"nothing left, nothing reported: nothing", container.Snapshot{}, nil, false, ""},
		{"nothing left, nothing reported, republished: nothing", container.Snapshot{}, nil, true, ""},
		{"gone, DELETED delivered: nothing", container.Snapshot{}, deleted, false, ""},
		{"gone, DELETED delivered, republished: not sent again", container.Snapshot{}, deleted, true, ""},
		{"a Deployment with the id and no record (someone else's, or made before records): not a container",
			container.Snapshot{Deployments: deps(dep("ref-1", unowned))}, nil, false, ""},

		// A live record without a live Deployment: a create in progress, or a container gone.
		{"record just made, no Deployment yet: look again when no create can still be running",
			container.Snapshot{Record: record(created(10 * time.Second))}, nil, false, "recheck in 30s"},
		{"same after an earlier container with the id was deleted",
			container.Snapshot{Record: record(created(10 * time.Second))}, deleted, true, "recheck in 30s"},
		{"made just now: the whole settle",
			container.Snapshot{Record: record()}, nil, false, "recheck in 40s"},
		{"a young record beside a Deployment of another record (an earlier incarnation's): a create in progress, the other deleted",
			container.Snapshot{Record: record(uid("r2"), created(5*time.Second)), Deployments: deps(live)}, nil, false, "delete Deployment web-1; recheck in 35s"},
		{"abandoned (older than settle, never joined by a Deployment): the record deleted",
			container.Snapshot{Record: record(created(time.Hour))}, nil, false, "delete record r1"},
		{"exactly settle old: no create can still be running",
			container.Snapshot{Record: record(created(settle))}, nil, false, "delete record r1"},
		{"abandoned and stripped of its finalizer: deleted all the same",
			container.Snapshot{Record: record(notOwed, created(time.Hour))}, nil, false, "delete record r1"},
		{"an old record whose only Deployment is another record's: both deleted",
			container.Snapshot{Record: record(uid("r2"), created(time.Hour)), Deployments: deps(live)}, nil, false, "delete Deployment web-1; delete record r2"},
		{"an old record and a Deployment of the id no record controls: the record deleted",
			container.Snapshot{Record: record(created(time.Hour)), Deployments: deps(dep("ref-1", unowned))}, nil, false, "delete record r1"},
		{"reported live, its Deployment deleted by hand: the record deleted at once (the next plan sends DELETED)",
			container.Snapshot{Record: record(created(5 * time.Second))}, running, false, "delete record r1"},
		{"reported live, its Deployment being deleted by hand: the record deleted",
			container.Snapshot{Record: record(created(time.Hour)), Deployments: deps(dep("web-1", deleting)), Pods: pods(runningPod())},
			running, false, "delete record r1"},
		{"reported live, republished, no Deployment: the record deleted, no event yet",
			container.Snapshot{Record: record(created(time.Hour))}, running, true, "delete record r1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.snap, lastOf(tc.last), tc.forced, t0, settle)
			if got := summary(p); got != tc.want {
				t.Errorf("plan:\n got %s\nwant %s", got, tc.want)
			}
			if p.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v", p.Empty())
			}
			// A plan never deletes a record and publishes or finalizes: the deletion's
			// DELETED is the next plan's, made from the terminating record.
			if p.DeleteRecord != nil && (p.Publish != nil || p.Finalize != nil) {
				t.Errorf("a record deleted and more in one plan: %s", summary(p))
			}
			// A finalize follows only a DELETED: it is never with a live status.
			if p.Finalize != nil && p.Publish != nil && p.Publish.Status.Status != v1alpha1.DELETED {
				t.Errorf("finalized after a live status: %s", summary(p))
			}
		})
	}
}

// What a live container's report carries, and which changes of it are sent: its
// outputs go with RUNNING only, and a change of them while RUNNING is a change.
func TestPlanOutputs(t *testing.T) {
	podAt := func(ip string) *container.Pod { p := runningPod(); p.IP = ip; return p }
	pendingAt := func(ip string) *container.Pod {
		p := podAt(ip)
		p.Phase = corev1.PodPending
		return p
	}
	lb := func(externalIP string) *container.Service {
		s := svc("web-s")
		s.Type, s.ClusterIP, s.ExternalIP = corev1.ServiceTypeLoadBalancer, "10.96.0.12", externalIP
		s.Ports = []container.ServicePort{{Port: 8080, TargetPort: 8080, Protocol: corev1.ProtocolTCP}}
		return s
	}
	web := dep("web-1", func(d *appsv1.Deployment) {
		d.Namespace = "tenant-a"
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}
	})
	snap := func(svc *container.Service, p *container.Pod) container.Snapshot {
		s := container.Snapshot{Record: record(), Deployments: deps(web), Pods: pods(p)}
		if svc != nil {
			s.Services = []*container.Service{svc}
		}
		return s
	}
	sent := func(s container.Snapshot) *Report { r := reportOf(s); return &r }
	running := snap(lb(""), podAt("10.244.0.4"))
	cases := []struct {
		name   string
		snap   container.Snapshot
		last   *Report
		forced bool
		want   string // the endpoints' addresses sent ("-": nothing sent)
	}{
		{"RUNNING: sent with its outputs", running, nil, false, "10.96.0.12"},
		{"RUNNING, the same outputs: nothing", running, sent(running), false, "-"},
		{"RUNNING, republished: its outputs again", running, sent(running), true, "10.96.0.12"},
		{"RUNNING, the load balancer's address assigned since: sent",
			snap(lb("34.123.45.67"), podAt("10.244.0.4")), sent(running), false, "10.96.0.12 34.123.45.67"},
		{"RUNNING, a new pod IP (the pod replaced, RUNNING throughout): sent",
			snap(lb(""), podAt("10.244.0.7")), sent(running), false, "10.96.0.12"},
		{"RUNNING, a Service of another incarnation beside it: not its own, nothing",
			container.Snapshot{Record: record(), Deployments: deps(web), Pods: pods(podAt("10.244.0.4")),
				Services: []*container.Service{lb(""), func() *container.Service { s := lb("34.1.1.1"); s.Incarnation = "r0"; return s }()}},
			sent(running), false, "-"},
		{"PENDING: no outputs", snap(lb(""), pendingAt("10.244.0.4")), nil, false, ""},
		{"PENDING, a new pod IP: nothing (outputs go with RUNNING)",
			snap(lb(""), pendingAt("10.244.0.7")), sent(snap(lb(""), pendingAt("10.244.0.4"))), false, "-"},
		{"FAILED after RUNNING: the status, no outputs (DCM keeps the ones it stored)",
			container.Snapshot{Record: record(), Deployments: deps(web), Pods: pods(func() *container.Pod {
				p := podAt("10.244.0.4")
				p.Phase = corev1.PodFailed
				return p
			}())}, sent(running), false, ""},
		{"DELETED after RUNNING: no outputs", container.Snapshot{Record: record(terminating)}, sent(running), false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.snap, lastOf(tc.last), tc.forced, t0, settle)
			got := "-"
			if p.Publish != nil {
				var addrs []string
				for _, e := range p.Publish.Outputs.Endpoints {
					addrs = append(addrs, e.Address)
				}
				got = strings.Join(addrs, " ")
				running := p.Publish.Status.Status == v1alpha1.RUNNING
				if hasOutputs := p.Publish.Outputs.Endpoints != nil; hasOutputs != running {
					t.Errorf("%s with outputs %v", p.Publish.Status.Status, hasOutputs)
				}
				if running && p.Publish.Outputs.ProviderHints.PodIP == "" {
					t.Errorf("RUNNING without its pod IP: %+v", p.Publish.Outputs)
				}
				if !p.Publish.Observed.IsZero() {
					t.Error("the plan dated its report: the controller does, with its event id")
				}
			}
			if got != tc.want {
				t.Errorf("sent endpoints %q, want %q", got, tc.want)
			}
		})
	}
}

// Which plans the controller confirms with the apiserver before carrying them out: every
// one that deletes a record or publishes DELETED. A finalize after a DELETED delivered
// is guarded by its UID alone.
func TestNeedsConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Plan
		want bool
	}{
		{"nothing", Plan{}, false},
		{"a live status", Plan{Publish: running}, false},
		{"a look again later", Plan{RecheckAfter: time.Second}, false},
		{"DELETED published (no record)", Plan{Publish: deleted}, true},
		{"DELETED published, then finalized", Plan{Publish: deleted, Finalize: record(terminating)}, true},
		{"a finalize alone (its DELETED delivered before)", Plan{Finalize: record(terminating)}, false},
		{"a record deleted", Plan{DeleteRecord: record(created(time.Hour))}, true},
		{"an orphan deleted", Plan{Orphans: Orphans{Services: []*container.Service{svc("web-s")}}}, true},
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
// takes the same destructive steps. One row per race of a cache behind the apiserver.
func TestAgree(t *testing.T) {
	old := created(time.Hour)
	liveA := container.Snapshot{Record: record(), Deployments: deps(live)}
	reserved := container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("web-2", ownedBy("r2")))}
	cases := []struct {
		name             string
		cache, apiserver container.Snapshot
		last             *Report
		want             bool
	}{
		// A DELETED owed on a terminating record.
		{"DELETED owed and the apiserver agrees: sent, record finalized",
			container.Snapshot{Record: record(terminating)}, container.Snapshot{Record: record(terminating)}, running, true},
		{"the record is gone at the apiserver (its DELETED delivered and finalized by an earlier leader): not sent again",
			container.Snapshot{Record: record(terminating)}, container.Snapshot{}, nil, false},
		{"same, reported live by this controller: no finalize of a record that is gone",
			container.Snapshot{Record: record(terminating)}, container.Snapshot{}, running, false},
		{"finalized at the apiserver already (the GC still at work): not sent again",
			container.Snapshot{Record: record(terminating)}, container.Snapshot{Record: record(terminating, notOwed)}, nil, false},
		{"another record of the id at the apiserver (reserved again, live): no DELETED",
			container.Snapshot{Record: record(terminating)}, reserved, running, false},
		{"another record of the id at the apiserver, itself deleted: not this record's finalize",
			container.Snapshot{Record: record(terminating)}, container.Snapshot{Record: record(uid("r2"), terminating)}, running, false},

		// A record deleted.
		{"an abandoned record, at the apiserver too: deleted",
			container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old)}, nil, true},
		{"an abandoned record in the cache; its Deployment lives at the apiserver: not deleted",
			container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old), Deployments: deps(live)}, nil, false},
		{"a record reported live whose Deployment the cache lost; the apiserver has it: not deleted",
			container.Snapshot{Record: record()}, liveA, running, false},
		{"a record reported live, its Deployment gone at the apiserver too: deleted",
			container.Snapshot{Record: record()}, container.Snapshot{Record: record()}, running, true},
		{"a record reported live, its Deployment being deleted at the apiserver: deleted",
			container.Snapshot{Record: record()}, container.Snapshot{Record: record(), Deployments: deps(dep("web-1", deleting))}, running, true},
		{"an abandoned record in the cache, deleted at the apiserver already: not deleted again, no DELETED yet",
			container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(old, terminating)}, nil, false},
		{"an abandoned record in the cache, gone at the apiserver: nothing",
			container.Snapshot{Record: record(old)}, container.Snapshot{}, nil, false},
		{"an abandoned record in the cache; the id reserved again at the apiserver: not the new record",
			container.Snapshot{Record: record(old)}, container.Snapshot{Record: record(uid("r2"))}, nil, false},

		// A DELETED with no record.
		{"no record, reported live, none at the apiserver either: DELETED",
			container.Snapshot{}, container.Snapshot{}, running, true},
		{"no record in the cache, reported live; the apiserver has the live container: no DELETED",
			container.Snapshot{}, liveA, running, false},
		{"no record in the cache, reported live; the id reserved again at the apiserver: no DELETED",
			container.Snapshot{}, reserved, running, false},
		{"no record in the cache, reported live; the record is being deleted at the apiserver: its DELETED is the record's",
			container.Snapshot{}, container.Snapshot{Record: record(terminating)}, running, false},

		// Orphans.
		{"a deleted record's Deployment, the record deleted at the apiserver too: deleted",
			container.Snapshot{Record: record(terminating), Deployments: deps(live)}, container.Snapshot{Record: record(terminating)}, running, true},
		{"a Deployment with no record in the cache; its record lives at the apiserver (the cache is behind): not deleted",
			container.Snapshot{Deployments: deps(live)}, liveA, nil, false},
		{"a Deployment with no record in the cache, none at the apiserver either: deleted",
			container.Snapshot{Deployments: deps(live)}, container.Snapshot{}, nil, true},
		{"an earlier incarnation's Service beside the live container, at the apiserver too: deleted",
			container.Snapshot{Record: record(uid("r2")), Deployments: deps(dep("web-2", ownedBy("r2"))), Services: []*container.Service{svc("web-s")}},
			reserved, nil, true},
		{"a Deployment the cache shows under a record the apiserver has seen deleted, the apiserver's list without it: not deleted",
			container.Snapshot{Record: record(uid("r2")), Deployments: deps(live, dep("web-2", ownedBy("r2")))}, reserved, nil, false},

		// Nothing destructive on either side.
		{"a live container's status differs (pods from the cache in both): no destructive step differs",
			container.Snapshot{Record: record(), Deployments: deps(live), Pods: pods(runningPod())}, liveA, nil, true},
		{"a young record in the cache, live at the apiserver: neither destroys anything",
			container.Snapshot{Record: record()}, liveA, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cached := plan(tc.cache, lastOf(tc.last), false, t0, settle)
			confirmed := plan(confirmedView(tc.apiserver, tc.cache), lastOf(tc.last), false, t0, settle)
			if got := agree(cached, confirmed); got != tc.want {
				t.Errorf("agree(%q, %q) = %v, want %v", summary(cached), summary(confirmed), got, tc.want)
			}
			// The cache's plan and the apiserver's agree with themselves.
			if !agree(cached, cached) || !agree(confirmed, confirmed) {
				t.Errorf("a plan disagrees with itself: %q, %q", summary(cached), summary(confirmed))
			}
		})
	}
}

// The DELETED of a record this leadership reported live is not confirmed at the
// apiserver (a deletion timestamp never goes back, and only the leader finalizes);
// every other destructive step still is.
func TestNeedsConfirmationKnownLive(t *testing.T) {
	gone := record(terminating)
	deleted := &Report{Status: container.Status{Status: v1alpha1.DELETED}}
	for _, tc := range []struct {
		name      string
		p         Plan
		rec       *container.Record
		knownLive bool
		want      bool
	}{
		{"reported live in this leadership, now deleted", Plan{Publish: deleted, Finalize: gone}, gone, true, false},
		{"not reported live here (a restart, a new leadership)", Plan{Publish: deleted, Finalize: gone}, gone, false, true},
		{"a finalize of another record than the cache's", Plan{Publish: deleted, Finalize: record(terminating, uid("r2"))}, gone, true, true},
		{"a record to delete (no Deployment joined it)", Plan{DeleteRecord: record()}, record(), true, true},
		{"the DELETED of a container whose record went", Plan{Publish: deleted}, nil, true, true},
		{"orphans of the deleted record the cache shows", Plan{Orphans: Orphans{Deployments: deps(live)}}, gone, false, false},
		{"orphans of another incarnation", Plan{Orphans: Orphans{Deployments: deps(live)}}, record(terminating, uid("r2")), false, true},
		{"orphans beside a live record", Plan{Orphans: Orphans{Deployments: deps(live)}}, record(uid("r2")), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsConfirmation(tc.p, tc.rec, tc.knownLive); got != tc.want {
				t.Errorf("needsConfirmation = %v, want %v", got, tc.want)
			}
		})
	}
}

// A report's print changes with everything its event tells DCM, and only with that:
// the time it was observed is not part of it.
func TestReportPrint(t *testing.T) {
	ep := func(addr string) []v1alpha1.ContainerEndpoint {
		return []v1alpha1.ContainerEndpoint{{Address: addr, Port: 8080, Scope: v1alpha1.ContainerEndpointScopeInternal}}
	}
	base := Report{Status: container.Status{Status: v1alpha1.RUNNING, Message: "Container is running."},
		Outputs: container.Outputs{Namespace: "tenant-a", Endpoints: ep("10.96.0.12"),
			ProviderHints: container.OutputHints{PodIP: "10.244.0.4", ServiceName: "web-s"}}}
	with := func(f func(*Report)) Report {
		r := base
		f(&r)
		return r
	}
	if same := with(func(r *Report) { r.Observed = t0 }); same.print() != base.print() {
		t.Error("the observed time changed the print")
	}
	for name, r := range map[string]Report{
		"status":    with(func(r *Report) { r.Status.Status = v1alpha1.FAILED }),
		"message":   with(func(r *Report) { r.Status.Message = "Container is running again." }),
		"namespace": with(func(r *Report) { r.Outputs.Namespace = "tenant-b" }),
		"endpoint":  with(func(r *Report) { r.Outputs.Endpoints = ep("10.96.0.13") }),
		"pod IP":    with(func(r *Report) { r.Outputs.ProviderHints.PodIP = "10.244.0.5" }),
		"external":  with(func(r *Report) { r.Outputs.ProviderHints.ExternalIP = "34.1.1.1" }),
	} {
		if r.print() == base.print() {
			t.Errorf("a change of the %s left the print as it was", name)
		}
	}
}
