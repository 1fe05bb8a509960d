package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// quietFor is how long the stream must have been silent before the world counts as at
// rest: longer than the debounce's longest wait (SP_MONITOR_DEBOUNCE_MAX_WAIT, 5 s).
const quietFor = 8 * time.Second

// Quiesce heals whatever may still be broken and waits until the world is at rest:
// both replicas up with their caches synced and exactly one leader, every node Ready,
// every Deployment's pod where its image puts it, nothing terminating, no record owing
// a DELETED, the stream silent for quietFor and the leader holding nothing pending, and
// the last event of every container saying what its objects say. It gives up after
// limit and returns what was still unsettled (the checks then say what is wrong).
func (w *World) Quiesce(ctx context.Context, limit time.Duration) []string {
	for _, n := range nodeNames {
		_ = restoreNode(ctx, w.Env.Admin, n)
	}
	_ = w.Env.NATS.Start()
	_ = w.Registry.Start()
	_ = w.Env.Cluster.StartComponent(ctx, "kube-apiserver")
	for _, r := range w.Replicas {
		if !r.Up() {
			_ = r.Start(ctx)
		}
	}
	deadline := time.Now().Add(limit)
	stall, reg := controllerStall{}, registryStall{}
	for {
		unsettled, f := w.unsettled(ctx)
		if len(unsettled) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return unsettled
		}
		if f != nil {
			w.healControllerManager(ctx, &stall, *f)
			w.healRegistry(&reg, *f)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// controllerManagerStall is how long, at rest, a live Deployment may have no pod at all
// (or an object outlive its owner, ownerless) before the controller-manager counts as
// stalled. Kubernetes 1.37.2's can stop acting
// on pods after an apiserver restart: its ReplicaSet controller refuses every sync of a
// ReplicaSet whose pod it wrote ("read version: 522 is not as new as written version:
// 633 for group resource pods", KEP-5647's staleness check) while its pod informer
// stays at the version it had, and retries with a backoff that grows to minutes; a
// deleted pod is then never replaced (make chaos-ci, seed 1475124511: two containers
// PENDING for the whole 6-minute quiesce with no pod, the service right to say so).
// Only a pod the controller-manager should have made and has not counts: a pod in
// any state (a fate image's, a not-ready one) does not.
const controllerManagerStall = time.Minute

// controllerStall is how long Deployments have had no pod, and whether the
// controller-manager was restarted for it (at most once a run).
type controllerStall struct {
	since     time.Time
	restarted bool
}

// healControllerManager restarts the controller-manager, as an operator would, once
// live Deployments have had no pod for controllerManagerStall at rest (f: the cluster's
// objects as the rest check just read them), and says so in the history (a heal
// entry; the report lists it). The service is not involved: what it published for
// those containers (PENDING, no pod) was right.
func (w *World) healControllerManager(ctx context.Context, st *controllerStall, f Final) {
	if st.restarted {
		return
	}
	podless := append(podlessDeployments(f), ownerless(f)...)
	if len(podless) == 0 {
		st.since = time.Time{}
		return
	}
	now := time.Now()
	if st.since.IsZero() {
		st.since = now
		return
	}
	if now.Sub(st.since) < controllerManagerStall {
		return
	}
	st.restarted = true
	e := Entry{Type: "heal", Kind: "controller-manager-restart", Start: now, Target: strings.Join(podless, ", "),
		Note: fmt.Sprintf("%d live Deployment(s) without any pod, or object(s) whose record is gone, for %s at rest", len(podless), now.Sub(st.since).Round(time.Second))}
	err := w.Env.Cluster.StopComponent("kube-controller-manager")
	err = errors.Join(err, w.Env.Cluster.StartComponent(context.WithoutCancel(ctx), "kube-controller-manager"))
	if err != nil {
		e.Err = err.Error()
	}
	e.End = time.Now()
	_ = w.Hist.Add(e)
}

// registryConsumerStall is how long, at rest, the registry's consumer may stay behind
// the stream without acknowledging anything more before the registry counts as stuck.
// Its nats.go consumer resumes by itself after a NATS restart, within its missed
// heartbeats (seconds); one that does not has stopped, which is DCM's to fix, not the
// service's: the events are in the stream.
const registryConsumerStall = 45 * time.Second

// registryStall is since when the registry's consumer has been behind at one ack
// floor, and whether the registry was restarted for it (at most once a run).
type registryStall struct {
	since     time.Time
	floor     uint64
	restarted bool
}

// healRegistry restarts the registry, as an operator would, once its consumer has been
// behind the stream at one ack floor for registryConsumerStall at rest (f: the world as
// the rest check just read it, the consumer's state included); its durable consumer
// then resumes from that floor. A heal entry says so in the history.
func (w *World) healRegistry(st *registryStall, f Final) {
	if st.restarted {
		return
	}
	var c ConsumerState // unread: as if it were not behind
	if f.RegistryConsumer != nil {
		c = *f.RegistryConsumer
	}
	if !c.Behind() || c.AckFloor != st.floor || st.since.IsZero() {
		st.since, st.floor = time.Now(), c.AckFloor
		return
	}
	if time.Since(st.since) < registryConsumerStall {
		return
	}
	st.restarted = true
	e := Entry{Type: "heal", Kind: "registry-restart", Start: time.Now(), Target: registryConsumer,
		Note: fmt.Sprintf("the registry's consumer stayed behind the stream for %s at rest: %s", time.Since(st.since).Round(time.Second), c)}
	w.Registry.Stop()
	if err := w.Registry.Start(); err != nil {
		e.Err = err.Error()
	}
	e.End = time.Now()
	_ = w.Hist.Add(e)
}

// ownerless names the Deployments and Services whose record (owner) is gone, and the
// pods whose Deployment is gone: the garbage collector's to delete. Kubernetes
// 1.37.2's, like its ReplicaSet controller (controllerManagerStall), can stop acting
// after an apiserver restart: it left a Service for good whose record had gone (make
// chaos, seed 114630519, with records owning their containers).
func ownerless(f Final) []string {
	records := map[string]bool{}
	for _, r := range f.Records {
		records[r.ID+"/"+r.Incarnation] = true
	}
	var out []string
	for kind, objs := range map[string][]Object{"Deployment": f.Deployments, "Service": f.Services} {
		for _, o := range objs {
			if !records[o.ID+"/"+o.Incarnation] {
				out = append(out, kind+" "+o.Name+" ("+o.ID+", its record gone)")
			}
		}
	}
	// A pod whose Deployment is gone is the same collector's to delete (its ReplicaSet,
	// then it): it left two for good after apiserver restarts (make chaos-ci, seed
	// 350102).
	deps := map[string]bool{}
	for _, d := range f.Deployments {
		deps[d.ID+"/"+d.Incarnation] = true
	}
	for _, p := range f.Pods {
		if !deps[p.ID+"/"+p.Incarnation] {
			out = append(out, "pod "+p.Name+" ("+p.ID+", its Deployment gone)")
		}
	}
	sort.Strings(out)
	return out
}

// podlessDeployments names the live Deployments with no pod of their incarnation at all.
func podlessDeployments(f Final) []string {
	has := map[string]bool{}
	for _, p := range f.Pods {
		has[p.ID+"/"+p.Incarnation] = true
	}
	var out []string
	for _, d := range f.Deployments {
		if !d.Deleting && !has[d.ID+"/"+d.Incarnation] {
			out = append(out, d.Name+" ("+d.ID+")")
		}
	}
	sort.Strings(out)
	return out
}

// unsettled is what keeps the world from rest, and the cluster's objects it read for
// that (nil when they could not be read).
func (w *World) unsettled(ctx context.Context) ([]string, *Final) {
	var out []string
	for _, name := range []string{"a", "b"} {
		r := w.Replicas[name]
		if !r.Up() {
			out = append(out, "replica "+name+" is down")
			continue
		}
		if !r.Service().Ready() {
			out = append(out, "replica "+name+" is not ready")
		}
	}
	if n, l := w.Leaders(), w.Leader(); n != 1 || l == nil {
		out = append(out, fmt.Sprintf("%d leaders", n))
	} else if m, err := l.Service().Metrics(); err != nil || m["sp_status_events_pending"] != 0 {
		out = append(out, fmt.Sprintf("leader has %v statuses pending (%v)", m["sp_status_events_pending"], err))
	}
	for _, n := range nodeNames {
		if !nodeReady(ctx, w.Env.Admin, n) {
			out = append(out, "node "+n+" not Ready")
		}
	}
	f, err := w.objects(ctx)
	if err != nil {
		return append(out, "cluster: "+err.Error()), nil
	}
	out = append(out, settledObjects(f)...)
	last := w.Rec.Last()
	live := map[string]bool{}
	for _, d := range f.Deployments {
		live[d.ID] = true
		if e, ok := last[d.ID]; !ok || e.Status != expectedStatus(d) {
			out = append(out, fmt.Sprintf("%s: last event %q, its objects say %s", d.ID, e.Status, expectedStatus(d)))
		}
	}
	for id, e := range last {
		if !live[id] && e.Status != "DELETED" {
			out = append(out, fmt.Sprintf("%s: gone, last event %s", id, e.Status))
		}
	}
	if c, err := w.Rec.Consumer(ctx, registryConsumer); err != nil {
		out = append(out, "the registry's consumer: "+err.Error())
	} else {
		f.RegistryConsumer = &c
		if c.Behind() {
			out = append(out, "the registry's consumer: "+c.String())
		}
	}
	if q, _ := w.Rec.Quiet(); q < quietFor {
		out = append(out, fmt.Sprintf("stream not quiet (last event %s ago)", q.Round(time.Millisecond)))
	}
	sort.Strings(out)
	return out, &f
}

// settledObjects: what in the cluster is still moving.
func settledObjects(f Final) []string {
	var out []string
	deps := map[string]Object{}
	for _, d := range f.Deployments {
		deps[d.ID+"/"+d.Incarnation] = d
		if d.Deleting {
			out = append(out, "Deployment "+d.Name+" terminating")
		}
	}
	running := map[string]bool{}
	for _, p := range f.Pods {
		if p.Deleting {
			out = append(out, "pod "+p.Name+" terminating")
			continue
		}
		if _, ok := deps[p.ID+"/"+p.Incarnation]; ok && podWhereImagePutsIt(p) {
			running[p.ID+"/"+p.Incarnation] = true
		}
	}
	for k, d := range deps {
		if !running[k] {
			out = append(out, "Deployment "+d.Name+" ("+d.ID+") has no settled pod")
		}
	}
	out = append(out, ownerless(f)...)
	for _, r := range f.Records {
		if r.Deleting {
			out = append(out, "record "+r.Name+" owes a DELETED")
		} else if _, ok := deps[r.ID+"/"+r.Incarnation]; !ok {
			out = append(out, "record "+r.Name+" without its Deployment")
		}
	}
	return out
}

// podWhereImagePutsIt: a Ready pod for a normal image, a Running one for a crash or OOM
// loop, a Pending one for an image that cannot be pulled.
func podWhereImagePutsIt(p Object) bool {
	switch {
	case strings.HasPrefix(p.Image, harness.FateImagePullBackOff):
		return p.Phase == string(corev1.PodPending) && p.Waiting != ""
	case p.Image == normalImage:
		return p.Phase == string(corev1.PodRunning) && p.Ready
	}
	return p.Phase == string(corev1.PodRunning)
}

// objects reads the container objects of the namespace.
func (w *World) objects(ctx context.Context) (Final, error) {
	var f Final
	// The containers' objects only: other providers' (same managed-by, another service
	// type) are in Foreign.
	sel := metav1.ListOptions{LabelSelector: container.Selector}
	deps, err := w.Env.Admin.AppsV1().Deployments(w.NS).List(ctx, sel)
	if err != nil {
		return f, err
	}
	for _, d := range deps.Items {
		o := objectOf(&d.ObjectMeta)
		if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
			o.Image, o.Ports = cs[0].Image, len(cs[0].Ports)
		}
		o.Revision = d.Annotations["deployment.kubernetes.io/revision"]
		f.Deployments = append(f.Deployments, o)
	}
	svcs, err := w.Env.Admin.CoreV1().Services(w.NS).List(ctx, sel)
	if err != nil {
		return f, err
	}
	for _, s := range svcs.Items {
		f.Services = append(f.Services, objectOf(&s.ObjectMeta))
	}
	pods, err := w.Env.Admin.CoreV1().Pods(w.NS).List(ctx, sel)
	if err != nil {
		return f, err
	}
	for _, p := range pods.Items {
		o := objectOf(&p.ObjectMeta)
		o.Phase, o.Ready, o.Node = string(p.Status.Phase), podReady(&p), p.Spec.NodeName
		if cs := p.Spec.Containers; len(cs) > 0 {
			o.Image = cs[0].Image
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				o.Waiting = c.State.Waiting.Reason
			}
		}
		f.Pods = append(f.Pods, o)
	}
	// Every ConfigMap, not only labelled ones: a record that lost its labels is an orphan
	// too. (The election's lock has neither the records' name nor their label.)
	cms, err := w.Env.Admin.CoreV1().ConfigMaps(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, err
	}
	for _, l := range cms.Items {
		if !strings.HasPrefix(l.Name, container.RecordName("")) && l.Labels[container.LabelRecord] == "" {
			continue
		}
		o := objectOf(&l.ObjectMeta)
		o.Incarnation = string(l.UID) // a record's incarnation is its UID
		f.Records = append(f.Records, o)
	}
	f.Foreign, err = w.foreignObjects(ctx)
	return f, err
}

// foreignSelector selects other DCM providers' objects: DCM's, not containers.
const foreignSelector = container.LabelManagedBy + "=" + container.ManagedByValue + "," + container.LabelServiceType + "!=" + container.ServiceTypeValue

// foreignObjects lists other providers' Deployments and Services in the namespace.
func (w *World) foreignObjects(ctx context.Context) ([]Object, error) {
	sel := metav1.ListOptions{LabelSelector: foreignSelector}
	var out []Object
	deps, err := w.Env.Admin.AppsV1().Deployments(w.NS).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, d := range deps.Items {
		out = append(out, foreignOf("Deployment", &d.ObjectMeta))
	}
	svcs, err := w.Env.Admin.CoreV1().Services(w.NS).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, s := range svcs.Items {
		out = append(out, foreignOf("Service", &s.ObjectMeta))
	}
	return out, nil
}

func foreignOf(kind string, m *metav1.ObjectMeta) Object {
	o := objectOf(m)
	o.Kind, o.ServiceType, o.UID, o.Generation, o.Labels = kind, m.Labels[container.LabelServiceType], string(m.UID), m.Generation, m.Labels
	return o
}

func objectOf(m *metav1.ObjectMeta) Object {
	return Object{Name: m.Name, ID: container.InstanceID(m.Labels), Incarnation: container.IncarnationOf(m),
		Deleting: m.DeletionTimestamp != nil, Finalizers: m.Finalizers}
}
