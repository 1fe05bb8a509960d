package store

import (
	"slices"
	"sync"
	"time"

	"github.com/google/btree"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// informers are the store's caches: one client-go SharedIndexInformer per kind, each
// keeping objects as transform cuts them, indexed by container id; the writes this
// replica made that they do not show yet; and the ids in order, for LIST's pages.
type informers struct {
	of [kinds]cache.SharedIndexInformer

	mu sync.Mutex
	// written are this replica's writes, by id, until their informer has reached their
	// resourceVersion (see wrote).
	written map[string][]*object
	// seen is, per kind, the newest resourceVersion an event has brought.
	seen [kinds]uint64
	// watchers are told the ids whose written objects went (see Store.Watch).
	watchers map[*func(string)]struct{}
	// ids are the containers with a Deployment or a record, in order.
	ids *btree.BTreeG[string]
	// ended holds, per id, the incarnation whose Deployment an informer saw deleted,
	// while the id is known.
	ended map[string]string
}

// newInformers makes the informers (not started) over each kind's ListerWatcher.
func newInformers(lws [kinds]cache.ListerWatcher, resync time.Duration) *informers {
	c := &informers{written: map[string][]*object{}, watchers: map[*func(string)]struct{}{}, ids: btree.NewG(32, func(a, b string) bool { return a < b }), ended: map[string]string{}}
	examples := [kinds]runtime.Object{&appsv1.Deployment{}, &corev1.Pod{}, &corev1.Service{}, &corev1.ConfigMap{}}
	for k := range kinds {
		inf := cache.NewSharedIndexInformerWithOptions(lws[k], examples[k], cache.SharedIndexInformerOptions{
			ResyncPeriod: resync, Indexers: cache.Indexers{byID: indexByID}, ObjectDescription: Caches[k],
		})
		_ = inf.SetTransform(transform) // fails only once started
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.event(k, obj, false) },
			UpdateFunc: func(old, obj any) { c.event(k, old, false); c.event(k, obj, false) },
			DeleteFunc: func(obj any) { c.event(k, obj, true) },
		})
		c.of[k] = inf
	}
	return c
}

// event keeps the overlay, the ids and the ended incarnations in step with what an
// informer shows: it runs once the informer's indexer has the change.
func (c *informers) event(k kind, obj any, deleted bool) {
	o, ok := objectOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	c.seen[k] = max(c.seen[k], version(o.ResourceVersion))
	if deleted && k == deployments && o.dep.Incarnation != "" {
		c.ended[o.id] = o.dep.Incarnation
	}
	c.settle(o.id)
	gone := c.prune()
	c.mu.Unlock()
	c.tell(gone)
}

// reached is the newest resourceVersion kind k's informer has applied: its indexer's,
// which a relist and a bookmark move too, or its newest event's. c.mu is held.
func (c *informers) reached(k kind) uint64 {
	return max(c.seen[k], version(c.of[k].GetIndexer().LastStoreSyncResourceVersion()))
}

// prune drops the written objects whose informer has reached them and returns their
// ids. A relist can pass a write without an event of it (made and deleted while the
// watch was down), so this runs on a timer too (sweep). c.mu is held.
func (c *informers) prune() []string {
	if len(c.written) == 0 {
		return nil
	}
	var at [kinds]uint64
	for k := range kinds {
		at[k] = c.reached(k)
	}
	var gone []string
	for id, objs := range c.written {
		n := len(objs)
		objs = slices.DeleteFunc(objs, func(w *object) bool { return version(w.ResourceVersion) <= at[w.kind] })
		if len(objs) == n {
			continue
		}
		if len(objs) == 0 {
			delete(c.written, id)
		} else {
			c.written[id] = objs
		}
		gone = append(gone, id)
	}
	for _, id := range gone {
		c.settle(id)
	}
	return gone
}

// watch adds a watcher; the returned function removes it.
func (c *informers) watch(changed func(string)) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchers[&changed] = struct{}{}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers, &changed)
	}
}

// sweep prunes the written objects a relist or a bookmark has passed, which brings no
// event, and tells the watchers.
func (c *informers) sweep() {
	c.mu.Lock()
	gone := c.prune()
	c.mu.Unlock()
	c.tell(gone)
}

// tell calls every watcher with each id. c.mu is not held.
func (c *informers) tell(ids []string) {
	if len(ids) == 0 {
		return
	}
	c.mu.Lock()
	watchers := make([]func(string), 0, len(c.watchers))
	for w := range c.watchers {
		watchers = append(watchers, *w)
	}
	c.mu.Unlock()
	for _, changed := range watchers {
		for _, id := range ids {
			changed(id)
		}
	}
}

// wrote puts an object this replica wrote (the apiserver's answer) in front of what
// its informer shows until the informer has reached its resourceVersion. client-go's
// MutationCache would keep it for a fixed time, even once the watch showed it deleted.
func (c *informers) wrote(o *object) {
	if o.id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if version(o.ResourceVersion) <= c.reached(o.kind) {
		return // the informer is past it already
	}
	c.written[o.id] = append(slices.DeleteFunc(c.written[o.id], func(w *object) bool {
		return w.kind == o.kind && w.Name == o.Name && version(w.ResourceVersion) <= version(o.ResourceVersion)
	}), o)
	c.settle(o.id)
}

// settle puts id among the ids when it has a Deployment or a record, and takes it out
// (with its ended incarnation) when it has neither. c.mu is held.
func (c *informers) settle(id string) {
	if id == "" {
		return
	}
	if len(c.objects(deployments, id))+len(c.objects(records, id)) > 0 {
		c.ids.ReplaceOrInsert(id)
		return
	}
	c.ids.Delete(id)
	delete(c.ended, id)
}

// objects are the objects of kind k of container id: the informer's, overlaid with
// this replica's newer writes. c.mu is held.
func (c *informers) objects(k kind, id string) []*object {
	list, _ := c.of[k].GetIndexer().ByIndex(byID, bucket(id))
	var out []*object
	for _, x := range list {
		if o := x.(*object); o.id == id {
			out = append(out, o)
		}
	}
	reached := uint64(0)
	if len(c.written[id]) > 0 {
		reached = c.reached(k)
	}
	for _, w := range c.written[id] {
		if w.kind != k || version(w.ResourceVersion) <= reached {
			continue // the informer shows it or something newer; prune drops it
		}
		i := slices.IndexFunc(out, func(o *object) bool { return o.Name == w.Name })
		switch {
		case i < 0:
			out = append(out, w)
		case version(out[i].ResourceVersion) < version(w.ResourceVersion):
			out[i] = w
		}
	}
	return out
}

// snapshot is what the informers show of container id, its record included.
func (c *informers) snapshot(id string) container.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	var snap container.Snapshot
	for k := range kinds {
		for _, o := range c.objects(k, id) {
			switch {
			case o.dep != nil:
				snap.Deployments = append(snap.Deployments, o.dep)
			case o.pod != nil:
				snap.Pods = append(snap.Pods, o.pod)
			case o.svc != nil:
				snap.Services = append(snap.Services, o.svc)
			case o.rec != nil:
				snap.Record = o.rec
			}
		}
	}
	slices.SortFunc(snap.Deployments, func(a, b *container.Deployment) int { return a.Created.Compare(b.Created) })
	return snap
}

// count is how many containers have a Deployment or a record.
func (c *informers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids.Len()
}

// isEnded reports whether an informer saw the Deployment of incarnation inc of
// container id deleted.
func (c *informers) isEnded(id, inc string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return inc != "" && c.ended[id] == inc
}

// run: a page of the default size (50) and the one container that tells whether more
// follow fit in one run, most of the time.
const run = 64

// walk calls fn, in id order, with each id greater than after that has a Deployment or
// a record, until fn returns false. It takes runs of ids under the lock and calls fn
// without it, so fn may read the informers.
func (c *informers) walk(after string, fn func(id string) bool) {
	for {
		ids := make([]string, 0, run)
		c.mu.Lock()
		c.ids.AscendGreaterOrEqual(after, func(id string) bool {
			if id != after {
				ids = append(ids, id)
			}
			return len(ids) < run
		})
		c.mu.Unlock()
		for _, id := range ids {
			if !fn(id) {
				return
			}
		}
		if len(ids) < run {
			return
		}
		after = ids[len(ids)-1]
	}
}
