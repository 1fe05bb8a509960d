package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// CreateAsService makes container id in ns with client-go exactly as the service's create
// does (internal/store/create.go): the record (the id's ConfigMap) for a new incarnation, then
// the Deployment and the Service stamped with it, at once. The service sees it as one of
// its own. It is how the large populations are made when the API is not what is measured.
//
// One difference, with ipIndex ≥ 0: the Service asks for a cluster IP (fillIP) instead of
// letting the apiserver choose one. The apiserver allocates a chosen IP one Service at a
// time, under a lock, counting every allocated address each time (Kubernetes 1.37's
// IPAddress allocator); at thousands of Services that alone made filling 10,000
// containers take most of the run. A requested IP is allocated without that lock. The
// Service object is the same either way.
func (e *Env) CreateAsService(ctx context.Context, ns, id string, ipIndex int) error {
	return e.createAs(ctx, ns, id, ipIndex, rawObjects, nil)
}

// createAs is CreateAsService for the objects build makes (the service's mapping of
// some spec); with sh, the Deployment comes with its ReplicaSet and pod, written
// directly (createDirect).
func (e *Env) createAs(ctx context.Context, ns, id string, ipIndex int, build func(ns, id string) (container.Objects, error), sh *shape) error {
	objs, err := build(ns, id)
	if err != nil {
		return err
	}
	rec, err := e.Fill.CoreV1().ConfigMaps(ns).Create(ctx, container.NewRecord(id, container.Request{}), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("record of %s: %w", id, err)
	}
	objs = objs.OwnedBy(rec.Name, rec.UID)
	objs.Deployment.Namespace = ns
	deploy := func() error {
		if sh != nil {
			return e.createDirect(ctx, ns, ipIndex, objs, sh)
		}
		_, err := e.Fill.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
		return err
	}
	if objs.Service == nil {
		return deploy()
	}
	objs.Service.Namespace = ns
	if ipIndex < 0 {
		return e.createBoth(ctx, ns, objs)
	}
	var wg sync.WaitGroup
	var svcErr error
	wg.Go(func() {
		for try := 0; ; try++ {
			svc := objs.Service.DeepCopy()
			svc.Spec.ClusterIP = fillIP(ipIndex, try)
			_, svcErr = e.Fill.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			// Invalid: the address was taken by a Service whose IP the apiserver chose.
			if !apierrors.IsInvalid(svcErr) || try == 8 {
				return
			}
		}
	})
	depErr := deploy()
	wg.Wait()
	if depErr != nil {
		return depErr
	}
	return svcErr
}

// fillIP is the cluster IP asked for the Service of fill container i (try-th attempt):
// distinct for every i below 64,000, in the harness's 10.96.0.0/16 above the first 1024.
func fillIP(i, try int) string {
	n := 1024 + (i*7+try*7919)%64000
	return fmt.Sprintf("10.96.%d.%d", n/256, n%256)
}

// FillResult is one Populate: how fast the control plane made the containers, and who
// used the CPUs meanwhile.
type FillResult struct {
	From      int     `json:"from"`
	To        int     `json:"to"`
	Total     int     `json:"containers_after"` // in the namespace, afterwards
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"containers_per_s"`
	// Direct: written as the controllers would have left them (direct.go), with the
	// controller-manager stopped, not made by the controllers.
	Direct bool `json:"direct,omitempty"`
	// CPU: percent of one CPU, by process; "machine" is every process on it, "other
	// processes" what is not this run's.
	CPU map[string]float64 `json:"cpu_percent"`
}

// filler is what a Populate makes: ids prefix%05d, their objects built by objects (by
// portless instead for all but one in serviceEvery, when set), and the Services' cluster
// IPs from fillIP(ipBase+i) (populations of one run keep apart).
type filler struct {
	prefix       string
	objects      func(ns, id string) (container.Objects, error)
	portless     func(ns, id string) (container.Objects, error)
	serviceEvery int
	ipBase       int
	direct       *shape // set: written directly (createDirect), not through the controllers
}

// objectsFor is the builder of container i's objects.
func (f filler) objectsFor(i int) func(ns, id string) (container.Objects, error) {
	if f.serviceEvery > 1 && i%f.serviceEvery != 0 {
		return f.portless
	}
	return f.objects
}

// FillServiceEvery: in the bench's usual population one container in this many has a
// port that asks for a Service (specJSON's); the others have none (a worker, a batch
// process). Every Service costs the apiserver two more writes (the Service and its
// IPAddress) and, in Kubernetes 1.37, a count of every allocated address at each
// allocation: with a Service for every one of 10,000 containers that count alone was a
// quarter of the apiserver's CPU at 4,500, and filling took 915 s; with none, filling
// 4,000 ran at 18.0/s against 14.6/s (docs/reports/benchmarks-analysis.md).
const FillServiceEvery = 4

// typicalFill is the bench's usual population, fill-00000 on: specJSON's container, one
// in FillServiceEvery with its port and Service, the others without a port.
var typicalFill = filler{prefix: "fill-", objects: rawObjects, portless: portlessObjects, serviceEvery: FillServiceEvery}

// fillAhead bounds how far Populate's creates run ahead of the RUNNING events.
var fillAhead = 400

// fillClients are Populate's concurrent clients (Options.FillClients).
var fillClients = 16

// Populate makes the containers fill-<from>..fill-<to-1> in the service's namespace
// with client-go, as the service would (CreateAsService), fillClients clients, and waits until the
// service has published RUNNING for every one: its caches hold them all, pods included.
func (e *Env) Populate(ctx context.Context, s *Service, ns string, from, to int) (FillResult, error) {
	return e.populate(ctx, s, ns, from, to, typicalFill)
}

// PopulateDirect is Populate with the objects written as the controllers would have
// left them, copied from container like's, with the controller-manager stopped
// meanwhile (see direct.go).
func (e *Env) PopulateDirect(ctx context.Context, s *Service, ns, like string, from, to int) (FillResult, error) {
	sh, err := e.shapeOf(ctx, ns, like)
	if err != nil {
		return FillResult{}, err
	}
	if err := e.Cluster.StopComponent("kube-controller-manager"); err != nil {
		return FillResult{}, err
	}
	f := typicalFill
	f.direct = sh
	res, err := e.populate(ctx, s, ns, from, to, f)
	if startErr := e.startControllerManager(ctx); err == nil {
		err = startErr
	}
	res.Direct = true
	return res, err
}

// populate is Populate for any filler.
func (e *Env) populate(ctx context.Context, s *Service, ns string, from, to int, f filler) (FillResult, error) {
	res := FillResult{From: from, To: to}
	want := map[string]bool{}
	for i := from; i < to; i++ {
		want[fmt.Sprintf("%s%05d", f.prefix, i)] = true
	}
	events, err := e.watchRunningOf(func(id string) bool { return want[id] })
	if err != nil {
		return res, err
	}
	defer func() { _ = events.sub.Unsubscribe() }()
	c0 := e.sampleCPU(map[string]*Service{"service": s})
	// A line a minute shows where a long fill stands: made, and RUNNING.
	var made atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Minute):
				fmt.Fprintf(e.Log, "bench: fill: %d of %d made, %d RUNNING\n", made.Load(), to-from, events.count())
			}
		}
	}()
	if err := parallel(fillClients, from, to, func(i int) error {
		// Stay at most fillAhead containers ahead of the RUNNING events: creates far
		// ahead of the controllers only make them retry syncs (each one a scan of every
		// ReplicaSet of the namespace) and slow the whole fill down.
		for fillAhead > 0 && made.Load()-int64(events.count()) > int64(fillAhead) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		defer made.Add(1)
		return e.createAs(ctx, ns, fmt.Sprintf("%s%05d", f.prefix, i), f.ipBase+i, f.objectsFor(i), f.direct)
	}); err != nil {
		return res, err
	}
	if err := waitUntil(ctx, 15*time.Minute, func() bool { return events.count() >= to-from }); err != nil {
		return res, fmt.Errorf("%d of %d RUNNING events: %w", events.count(), to-from, err)
	}
	c1 := e.sampleCPU(map[string]*Service{"service": s})
	res.Seconds = c1.at.Sub(c0.at).Seconds()
	res.PerSecond = float64(to-from) / res.Seconds
	res.CPU = cpuUse(c0, c1)
	return res, nil
}
