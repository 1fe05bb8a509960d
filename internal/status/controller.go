package status

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/freshness"
)

// Source is the controller's view of containers (internal/store implements it with informers).
type Source interface {
	// Watch calls changed with the id of every container whose objects change.
	Watch(changed func(id string)) (stop func(), err error)
	// WaitForSync blocks until the caches are complete, or ctx ends (false).
	WaitForSync(ctx context.Context) bool
	// Snapshot is one container's objects as the caches hold them now.
	Snapshot(id string) container.Snapshot
	// IDs lists every container id known: live, being deleted, or with a record.
	IDs() []string
	// Behind lists the caches whose watch has been down past the staleness bound.
	Behind() []freshness.Lag
}

// Options tune the controller.
type Options struct {
	Debounce, MaxWait time.Duration
	// Resync republishes every status this often (0: never), for consumers that missed events.
	Resync time.Duration
	// Settle is the age at which a record without a Deployment counts as gone, not being created.
	Settle time.Duration
	// ResendAfter resends a new container's status once this long after its first delivery
	// (0: never), since DCM drops events for instances it has not stored yet (resend.go).
	ResendAfter time.Duration
	// DrainTimeout bounds the flush of pending events on a graceful stop.
	DrainTimeout time.Duration
	// Workers send at once (default DefaultWorkers); a container is never sent by two at a time.
	Workers int
	// Republish asks for every status to be republished (NATS (re)connected); optional.
	Republish <-chan struct{}
	// Clock drives the debounce, retry backoff, resync and drain; default the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Published and Failed are told about every delivery attempt (metrics); optional.
	Published func(container.Status)
	Failed    func()
	// Images resolves the images a create could not (nil: none are held).
	Images Images
}

// Controller turns informer events into status events via debounce, workqueue and workers;
// plan and Reconcile decide per container. Only the leader runs it (internal/election).
type Controller struct {
	src  Source
	pub  Publisher
	cl   Cluster
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// term counts this controller's leaderships (Run): what it delivered in the current
	// one, no other replica has changed since (see needsConfirmation).
	term uint64
	// containers is what is remembered per id; an entry goes once it holds nothing (tracked.go).
	containers map[string]*tracked
	// waitBackoff spaces the looks at the containers held back (see notYet).
	waitBackoff workqueue.TypedRateLimiter[string]
	// imageBackoff spaces the looks at an image that did not resolve, and resolving runs
	// the resolutions (image.go; nil without Options.Images).
	imageBackoff workqueue.TypedRateLimiter[string]
	resolving    *resolutions
	queue        workqueue.TypedRateLimitingInterface[string]
	deb          *debouncer
	// backlog holds republished ids not yet queued; feed queues them a few at a time.
	backlog []string
	active  atomic.Bool
	outage  outage

	undelivered undelivered // what Pending counts
}

// DefaultWorkers is how many containers are sent at once. Each send waits for a NATS
// round trip (a stream ack or a flush), so the workers bound the event rate.
const DefaultWorkers = 16

// NewController builds a controller.
func NewController(src Source, pub Publisher, cl Cluster, opts Options, log *slog.Logger) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r := &Controller{
		src: src, pub: pub, cl: cl, opts: opts, log: log,
		containers: map[string]*tracked{},
	}
	if opts.Images != nil {
		r.resolving = newResolutions(opts.Images)
	}
	return r
}

// Run reports until ctx ends (leadership lost: stop at once) or drain closes (deliver
// what is pending first, within DrainTimeout). It may run again on a new leadership.
func (r *Controller) Run(ctx context.Context, drain <-chan struct{}) {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "status", Clock: r.opts.Clock})
	deb := newDebouncer(r.opts.Clock, r.opts.Debounce, r.opts.MaxWait, queue.Add)
	r.mu.Lock()
	r.term++
	r.queue, r.deb, r.backlog = queue, deb, nil
	// Fresh per leadership, so held-back ids are looked at anew; set before workers read it.
	r.waitBackoff = workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute)
	r.imageBackoff = workqueue.NewTypedItemExponentialFailureRateLimiter[string](imageRetryMin, imageRetryMax)
	r.eachTracked(func(_ string, t *tracked) { t.waiting = "" })
	r.mu.Unlock()

	defer r.undelivered.reset() // last: once the workers and the watch are done
	defer r.stopResends()
	stopWatch, err := r.src.Watch(r.touch)
	if err != nil {
		r.log.Error("status: cannot watch", "err", err)
		return
	}
	defer stopWatch()

	// Workers wait for the caches to sync: until then objects arrive one informer at a time,
	// and a record seen without its Deployment looks like a deletion needing confirmation.
	// The watch's touches wait in the queue; the republish below covers every container.
	if !r.src.WaitForSync(ctx) {
		queue.ShutDown()
		return
	}
	// Workers run on their own context: a graceful stop lets them finish the drain.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Go(func() {
			for r.processNext(workCtx, queue) {
			}
		})
	}
	defer wg.Wait()

	r.log.Info("status: reporting; publishing every container's current status")
	r.RepublishAll()
	r.active.Store(true)
	defer r.active.Store(false)

	var tick <-chan time.Time
	if r.opts.Resync > 0 {
		t := r.opts.Clock.NewTicker(r.opts.Resync)
		defer t.Stop()
		tick = t.C()
	}
	for {
		select {
		case <-tick:
			r.prune()
			r.RepublishAll()
		case <-r.opts.Republish:
			r.log.Info("status: republishing every status (NATS connected)")
			r.RepublishAll()
		case <-ctx.Done():
			r.log.Info("status: no longer the leader; stopping")
			queue.ShutDown()
			cancelWork()
			return
		case <-drain:
			r.drain(queue, deb)
			queue.ShutDownWithDrain()
			cancelWork()
			return
		}
	}
}

// drain fires every debounced change now and waits (bounded) until the queue is empty. The
// backlog's republishes are left to the next leader's.
func (r *Controller) drain(queue workqueue.TypedRateLimitingInterface[string], deb *debouncer) {
	deb.flush()
	deadline := r.opts.Clock.Now().Add(r.opts.DrainTimeout)
	for queue.Len() > 0 && r.opts.Clock.Now().Before(deadline) {
		<-r.opts.Clock.After(10 * time.Millisecond)
	}
	if n := queue.Len(); n > 0 {
		r.log.Warn("status: stopping with events not delivered (the next leader republishes them)", "pending", n)
	}
}

// Active reports whether the controller runs and has queued its start-up republish.
func (r *Controller) Active() bool { return r.active.Load() }

// RepublishAll queues every known container's current status, sent even if unchanged.
// The ids wait in the backlog, so a change is not queued behind all of them.
func (r *Controller) RepublishAll() {
	r.mu.Lock()
	ids := r.src.IDs()
	for _, id := range ids {
		r.entry(id).forced = true
	}
	// A republish is a new event, even for a status being retried: see eventID.
	r.eachTracked(func(_ string, t *tracked) { t.minted = nil })
	queue := r.queue
	if queue != nil {
		r.backlog = ids // a newer republish covers an older one's ids
		for _, id := range ids {
			r.undelivered.add(id)
		}
	}
	r.mu.Unlock()
	r.feed(queue)
}

// feed moves backlog ids into this leadership's queue while it holds fewer than Workers;
// each worker feeds as it takes an id. So a change waits behind at most Workers
// republishes: client-go's workqueue has no priorities.
func (r *Controller) feed(queue workqueue.TypedRateLimitingInterface[string]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for queue != nil && r.queue == queue && len(r.backlog) > 0 && queue.Len() < r.opts.Workers {
		queue.Add(r.backlog[0])
		r.backlog = r.backlog[1:]
	}
}

// Pending counts containers whose status is not yet delivered (debounced, queued, sending
// or retrying); 0 on a replica that is not reporting.
func (r *Controller) Pending() int { return r.undelivered.count() }

func (r *Controller) touch(id string) {
	r.mu.Lock()
	deb := r.deb
	r.mu.Unlock()
	r.undelivered.add(id)
	deb.touch(id)
}

func (r *Controller) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	id, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(id)
	r.feed(queue)
	r.undelivered.take(id)
	recheck, err := r.Reconcile(ctx, id)
	var wait notYet
	switch {
	case errors.As(err, &wait):
		// Held back, not failed: still owed, retried with backoff, and no part of an outage.
		r.undelivered.failed(id)
		if r.startWaiting(id, wait.why) {
			r.log.Info("status: "+wait.why+"; looking again with backoff", "id", id)
		}
		if ctx.Err() == nil {
			queue.AddAfter(id, r.waitBackoff.When(id))
		}
		return true
	case err != nil:
		r.undelivered.failed(id)
		if ctx.Err() == nil {
			if r.outage.failed(r.opts.Clock.Now(), id) {
				r.log.Warn("status: cannot deliver; every container retries with backoff (logged again when delivery resumes)",
					"id", id, "err", err)
			} else {
				r.log.Debug("status: will retry", "id", id, "err", err, "attempt", queue.NumRequeues(id)+1)
			}
			queue.AddRateLimited(id)
		}
		return true
	}
	if ended, lasted, failures, containers := r.outage.recovered(r.opts.Clock.Now()); ended {
		r.log.Info("status: delivering again", "outage", lasted.Round(time.Millisecond).String(), "failed_attempts", failures, "containers", containers)
	}
	r.stopWaiting(id)
	r.undelivered.done(id)
	queue.Forget(id)
	r.waitBackoff.Forget(id)
	if recheck > 0 {
		queue.AddAfter(id, recheck)
	}
	return true
}

// notYet is a plan held back until the world settles: the cache and the apiserver disagree
// on a destructive step, or a DELETED reached no stream. It is no delivery failure, so it
// stays out of the outage log. Its backoff grows longer than a delivery retry's: each look
// costs apiserver requests, and a cache catching up requeues the container with an event.
type notYet struct{ why string }

func (n notYet) Error() string { return n.why }

const (
	whyCacheBehind = "this replica's cache does not match the apiserver (it is behind); nothing done until they agree"
	whyCacheStale  = "a cache of this replica has lost its watch past the staleness bound; nothing planned from it until it catches up"
	whyNotStored   = "DELETED sent on plain NATS, stored by no stream (none captures " + Subject + "); the record is kept until a stream stores it"
)

// startWaiting records that id is held back for why; true if that is new, worth a log line.
func (r *Controller) startWaiting(id, why string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.entry(id)
	defer r.release(id)
	if t.waiting == why {
		return false
	}
	t.waiting = why
	return true
}

func (r *Controller) stopWaiting(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.containers[id]; t != nil {
		t.waiting = ""
		r.release(id)
	}
}
