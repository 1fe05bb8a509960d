package status

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// Options tune the reporter.
type Options struct {
	Debounce, MaxWait time.Duration
	// Resync republishes every container's current status this often (0: never), for
	// consumers that missed events (the registry's stream may not have existed).
	Resync time.Duration
	// DrainTimeout bounds the flush of pending events on Stop.
	DrainTimeout time.Duration
	Workers      int
	// Published and Failed are told about every delivery attempt (metrics); optional.
	Published func(container.Status)
	Failed    func()
}

// Reporter turns informer events into status events. Only one replica's reporter runs
// at a time (see leader.go); every replica's informers serve the API.
type Reporter struct {
	store  *store.Store
	client kubernetes.Interface
	pub    Publisher
	opts   Options
	log    *slog.Logger

	mu       sync.Mutex
	sent     map[string]container.Status // last status delivered, per id
	forced   map[string]bool             // ids to publish even if unchanged
	queue    workqueue.TypedRateLimitingInterface[string]
	deb      *debouncer
	stopping chan struct{}
	stopOnce sync.Once
	active   atomic.Bool
}

// NewReporter builds a reporter over the store's informers.
func NewReporter(st *store.Store, client kubernetes.Interface, pub Publisher, opts Options, log *slog.Logger) *Reporter {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	return &Reporter{
		store: st, client: client, pub: pub, opts: opts, log: log,
		sent: map[string]container.Status{}, forced: map[string]bool{},
		stopping: make(chan struct{}),
	}
}

// Run reports until ctx ends (leadership lost: stop at once) or Stop is called (flush
// what is pending first). It can run again after ctx ended, on a new leadership.
func (r *Reporter) Run(ctx context.Context) {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "status"})
	deb := newDebouncer(r.opts.Debounce, r.opts.MaxWait, queue.Add)
	r.mu.Lock()
	r.queue, r.deb = queue, deb
	r.mu.Unlock()

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.touch(obj) },
		UpdateFunc: func(_, obj any) { r.touch(obj) },
		DeleteFunc: func(obj any) { r.touch(obj) },
	}
	var regs []func()
	for _, inf := range []cache.SharedIndexInformer{r.store.Deployments(), r.store.Pods()} {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			r.log.Error("status: cannot watch", "err", err)
			continue
		}
		regs = append(regs, func() { _ = inf.RemoveEventHandler(reg) })
	}
	defer func() {
		for _, unregister := range regs {
			unregister()
		}
	}()

	workCtx, cancelWork := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.processNext(workCtx, queue) {
			}
		}()
	}
	if r.store.WaitForSync(ctx) {
		r.log.Info("status: reporting; publishing every container's current status")
		r.RepublishAll()
		r.active.Store(true)
	}
	defer r.active.Store(false)

	var tick <-chan time.Time
	if r.opts.Resync > 0 {
		t := time.NewTicker(r.opts.Resync)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			r.prune()
			r.RepublishAll()
			continue
		case <-ctx.Done():
			r.log.Info("status: no longer the leader; stopping")
			queue.ShutDown()
			cancelWork()
		case <-r.stopping:
			r.drain(queue, deb, cancelWork)
		}
		break
	}
	wg.Wait()
	cancelWork()
}

// drain fires every debounced change now and waits (bounded) until the queue is empty.
func (r *Reporter) drain(queue workqueue.TypedRateLimitingInterface[string], deb *debouncer, cancelWork func()) {
	deb.flush()
	deadline := time.Now().Add(r.opts.DrainTimeout)
	for queue.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := queue.Len(); n > 0 {
		r.log.Warn("status: stopping with events not delivered (the next leader republishes them)", "pending", n)
	}
	queue.ShutDownWithDrain()
	cancelWork()
}

// Active reports whether the reporter runs and has queued its start-up republish.
func (r *Reporter) Active() bool { return r.active.Load() }

// Stop flushes pending events (bounded by DrainTimeout) and ends Run.
func (r *Reporter) Stop() { r.stopOnce.Do(func() { close(r.stopping) }) }

// RepublishAll queues every known container's current status, sent even if unchanged.
func (r *Reporter) RepublishAll() {
	r.mu.Lock()
	queue := r.queue
	ids := r.store.IDs()
	for _, id := range ids {
		r.forced[id] = true
	}
	r.mu.Unlock()
	if queue == nil {
		return
	}
	for _, id := range ids {
		queue.Add(id)
	}
}

// Pending is how many containers have a change not yet delivered.
func (r *Reporter) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queue == nil {
		return 0
	}
	return r.queue.Len() + r.deb.pending()
}

func (r *Reporter) touch(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if id := container.InstanceID(m.GetLabels()); id != "" {
		r.mu.Lock()
		deb := r.deb
		r.mu.Unlock()
		deb.touch(id)
	}
}

func (r *Reporter) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	id, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(id)
	if err := r.process(ctx, id); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("status: will retry", "id", id, "err", err, "attempt", queue.NumRequeues(id)+1)
			queue.AddRateLimited(id)
		}
		return true
	}
	queue.Forget(id)
	return true
}

// process computes the container's status now, from the caches, and delivers it unless
// it is what was last delivered. Computing at send time (not at event time) is what
// makes an older state impossible to send after a newer one.
func (r *Reporter) process(ctx context.Context, id string) error {
	snap := r.store.Snapshot(id)
	dep := snap.Live
	if dep == nil && len(snap.Deleting) > 0 {
		dep = snap.Deleting[0]
	}
	st := container.Reconcile(dep, snap.Pods)

	r.mu.Lock()
	last, known := r.sent[id]
	force := r.forced[id]
	r.mu.Unlock()
	if force || !known || last != st {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.pub.Publish(pctx, id, st)
		cancel()
		if err != nil {
			if r.opts.Failed != nil {
				r.opts.Failed()
			}
			return err
		}
		if r.opts.Published != nil {
			r.opts.Published(st)
		}
		r.log.Debug("status: published", "id", id, "status", st.Status, "message", st.Message)
		r.mu.Lock()
		r.sent[id] = st
		delete(r.forced, id)
		r.mu.Unlock()
	}
	if snap.Live != nil && !slices.Contains(snap.Live.Finalizers, container.Finalizer) {
		// A container made before this provider (or whose finalizer was removed by
		// hand): adopt it, so its deletion will be reported too.
		return r.setFinalizer(ctx, snap.Live, true)
	}
	if st.Status == v1alpha1.DELETED {
		for _, d := range snap.Deleting {
			if err := r.setFinalizer(ctx, d, false); err != nil {
				return err
			}
			// A Deployment deleted by hand leaves its reservation (and the Service it
			// owns): the container is gone, so release them.
			if err := r.store.ReleaseReservation(ctx, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// setFinalizer adds or removes the status finalizer on a Deployment.
func (r *Reporter) setFinalizer(ctx context.Context, d *appsv1.Deployment, present bool) error {
	if slices.Contains(d.Finalizers, container.Finalizer) == present {
		return nil
	}
	deps := r.client.AppsV1().Deployments(d.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != d.UID || slices.Contains(cur.Finalizers, container.Finalizer) == present {
			return nil
		}
		if present {
			if cur.DeletionTimestamp != nil {
				return nil // too late to adopt
			}
			cur.Finalizers = append(cur.Finalizers, container.Finalizer)
		} else {
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == container.Finalizer })
		}
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// prune forgets ids that are gone from the cluster and whose DELETED was delivered.
// Until then their DELETED is remembered, so the deletion of their last pods does not
// send DELETED again.
func (r *Reporter) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, st := range r.sent {
		if st.Status != v1alpha1.DELETED {
			continue
		}
		if snap := r.store.Snapshot(id); snap.Live == nil && len(snap.Deleting) == 0 && len(snap.Pods) == 0 {
			delete(r.sent, id)
		}
	}
}
