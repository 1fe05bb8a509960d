package store

import (
	"maps"
	"slices"
	"sync"

	"github.com/google/btree"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// informers are the store's caches: one client-go SharedIndexInformer per kind, each
// keeping objects as transform cuts them; the keys of each container's objects; the
// writes this replica made that they do not show yet; and the ids in order, for LIST.
type informers struct {
	namespace string
	of        [kinds]cache.SharedIndexInformer
	// handled are the informers' handlers: synced once each has had its first list.
	handled [kinds]cache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// byID names each container's objects. client-go's own index keeps a set of keys per
	// value, about 240 bytes even for one key: more than the objects themselves.
	byID map[string][]ref
	// written are this replica's writes, by id, until their informer has reached their
	// resourceVersion and byID names them (see wrote).
	written map[string][]*object
	// seen is, per kind, the newest resourceVersion an event has brought.
	seen [kinds]uint64
	// watchers are told the id of every change, after byID, ids and ended have it.
	watchers map[*func(string)]struct{}
	// ids are the containers with a Deployment or a record, in order.
	ids *btree.BTreeG[string]
	// ended holds, per id, the incarnation whose Deployment an informer saw deleted,
	// while the id is known.
	ended map[string]string
}

// ref names one object of a container in its informer.
type ref struct {
	kind kind
	name string
}

// newInformers makes the informers (not started) over each kind's ListerWatcher. They never
// resync: the status controller's republish covers every id, and a resync's events would
// queue every id again, ahead of real changes.
func newInformers(namespace string, lws [kinds]cache.ListerWatcher) *informers {
	c := &informers{namespace: namespace, byID: map[string][]ref{}, written: map[string][]*object{},
		watchers: map[*func(string)]struct{}{}, ids: btree.NewG(32, func(a, b string) bool { return a < b }), ended: map[string]string{}}
	examples := [kinds]runtime.Object{&appsv1.Deployment{}, &corev1.Pod{}, &corev1.Service{}, &corev1.ConfigMap{}}
	for k := range kinds {
		inf := cache.NewSharedIndexInformerWithOptions(lws[k], examples[k], cache.SharedIndexInformerOptions{ObjectDescription: Caches[k]})
		_ = inf.SetTransform(transform) // fails only once started
		c.handled[k], _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.event(k, nil, obj) },
			UpdateFunc: func(old, obj any) { c.event(k, old, obj) },
			DeleteFunc: func(obj any) { c.event(k, obj, nil) },
		})
		c.of[k] = inf
	}
	return c
}

// synced reports whether kind k's informer has synced and its handler has had the
// whole first list: only then do byID and the ids show it.
func (c *informers) synced(k kind) bool { return c.handled[k].HasSynced() }

// event keeps byID, the overlay, the ids and the ended incarnations in step with what
// an informer shows, then tells the watchers: it runs once the informer's indexer has
// the change. old is nil for an add, obj nil for a delete.
func (c *informers) event(k kind, old, obj any) {
	was, _ := objectOf(old)
	is, _ := objectOf(obj)
	if was == nil && is == nil {
		return
	}
	var ids []string
	c.mu.Lock()
	if was != nil && (is == nil || was.id != is.id) {
		c.unref(was)
		if is == nil && k == deployments && was.dep.Incarnation != "" {
			c.ended[was.id] = was.dep.Incarnation
		}
		ids = append(ids, was.id)
	}
	if is != nil {
		c.seen[k] = max(c.seen[k], version(is.ResourceVersion))
		if is.id != "" && !slices.Contains(c.byID[is.id], ref{k, is.Name}) {
			c.byID[is.id] = append(c.byID[is.id], ref{k, is.Name})
		}
		ids = append(ids, is.id)
	}
	for _, id := range ids {
		c.settle(id)
	}
	c.prune(ids...)
	watchers := c.watching()
	c.mu.Unlock()
	tell(watchers, ids)
}

// unref takes o out of byID. c.mu is held.
func (c *informers) unref(o *object) {
	refs := slices.DeleteFunc(c.byID[o.id], func(r ref) bool { return r == ref{o.kind, o.Name} })
	if len(refs) == 0 {
		delete(c.byID, o.id)
	} else {
		c.byID[o.id] = refs
	}
}

// informed returns kind k's object named name from its informer, if byID names it.
// c.mu is held.
func (c *informers) informed(id string, k kind, name string) (*object, bool) {
	if !slices.Contains(c.byID[id], ref{k, name}) {
		return nil, false
	}
	x, ok, _ := c.of[k].GetIndexer().GetByKey(c.namespace + "/" + name)
	if !ok {
		return nil, false
	}
	o := x.(*object)
	return o, o.id == id
}

// shown reports whether the informers show a write w or something newer, or its
// deletion: its informer has reached its resourceVersion, and byID names the object
// when the indexer holds it (the handler runs just after the indexer). c.mu is held.
func (c *informers) shown(w *object, reached uint64) bool {
	if version(w.ResourceVersion) > reached {
		return false
	}
	if _, ok, _ := c.of[w.kind].GetIndexer().GetByKey(c.namespace + "/" + w.Name); !ok {
		return true
	}
	return slices.Contains(c.byID[w.id], ref{w.kind, w.Name})
}

// reached is the newest resourceVersion kind k's informer has applied: its indexer's,
// which a relist and a bookmark move too, or its newest event's. c.mu is held.
func (c *informers) reached(k kind) uint64 {
	return max(c.seen[k], version(c.of[k].GetIndexer().LastStoreSyncResourceVersion()))
}

// prune drops the written objects of ids (all, if none) that their informer shows, and
// returns the ids it dropped any of. An event prunes its own ids; a relist can pass a
// write with no event of it, so a timer prunes all (sweep). c.mu is held.
func (c *informers) prune(ids ...string) (gone []string) {
	if len(ids) == 0 {
		ids = slices.Collect(maps.Keys(c.written))
	}
	for _, id := range ids {
		objs := c.written[id]
		n := len(objs)
		if objs = slices.DeleteFunc(objs, func(w *object) bool { return c.shown(w, c.reached(w.kind)) }); len(objs) == n {
			continue
		}
		if len(objs) == 0 {
			delete(c.written, id)
		} else {
			c.written[id] = objs
		}
		gone = append(gone, id)
		c.settle(id)
	}
	return gone
}

// watch adds a watcher and, as an informer tells a late handler, tells it every id
// the informers hold; the returned function removes it.
func (c *informers) watch(changed func(string)) (stop func()) {
	c.mu.Lock()
	c.watchers[&changed] = struct{}{}
	ids := make([]string, 0, len(c.byID))
	for id := range c.byID {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	tell([]func(string){changed}, ids)
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
	watchers := c.watching()
	c.mu.Unlock()
	tell(watchers, gone)
}

// watching is the watchers now. c.mu is held.
func (c *informers) watching() []func(string) {
	watchers := make([]func(string), 0, len(c.watchers))
	for w := range c.watchers {
		watchers = append(watchers, *w)
	}
	return watchers
}

// tell calls each watcher with each id but "". c.mu is not held.
func tell(watchers []func(string), ids []string) {
	for _, changed := range watchers {
		for _, id := range ids {
			if id != "" {
				changed(id)
			}
		}
	}
}

// wrote puts an object this replica wrote (the apiserver's answer) in front of what
// its informer shows until the informers show it (shown). client-go's
// MutationCache would keep it for a fixed time, even once the watch showed it deleted.
func (c *informers) wrote(o *object) {
	if o.id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown(o, c.reached(o.kind)) {
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
	var out []*object
	for _, r := range c.byID[id] {
		if r.kind != k {
			continue
		}
		if o, ok := c.informed(id, k, r.name); ok {
			out = append(out, o)
		}
	}
	reached := uint64(0)
	if len(c.written[id]) > 0 {
		reached = c.reached(k)
	}
	for _, w := range c.written[id] {
		if w.kind != k || c.shown(w, reached) {
			continue // the informers show it, something newer or its deletion; prune drops it
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
