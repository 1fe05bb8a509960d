package store

import (
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// recent is one informer's cache with this replica's own writes on top: what a create or
// a DELETE got back from the apiserver is read at once, before the informer's watch
// brings it (read-your-writes without polling). A read returns the newer of the two by
// resourceVersion; an entry goes once the informer is as new (seen), when the
// informer deletes the object (gone), or after ttl, so an object deleted before its
// informer ever saw it is not read for longer.
//
// Not client-go's MutationCache: for an object its informer does not hold yet (every
// create's), MutationCache.GetByKey compares the written object with itself, takes it
// for the informer's and drops it, so only the first read after a create would see it
// (client-go v0.37.2, mutation_cache.go newerObject; TestWritesAreReadBackBeforeTheInformers
// reads three times).
type recent struct {
	informer cache.Store
	ttl      time.Duration
	max      int
	now      func() time.Time

	mu      sync.Mutex
	written map[string]recentWrite
}

type recentWrite struct {
	obj     any
	version uint64
	until   time.Time
}

func newRecent(informer cache.Store, ttl time.Duration, max int, now func() time.Time) *recent {
	return &recent{informer: informer, ttl: ttl, max: max, now: now, written: map[string]recentWrite{}}
}

// GetByKey is the informer's object, or this replica's write of it when that is newer.
func (r *recent) GetByKey(key string) (any, bool, error) {
	obj, ok, err := r.informer.GetByKey(key)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, has := r.written[key]
	switch {
	case !has:
		return obj, ok, nil
	case r.now().After(w.until) || ok && versionOfObject(obj) >= w.version:
		delete(r.written, key)
		return obj, ok, nil
	}
	return w.obj, true, nil
}

// wrote keeps obj (a cached object: Store.transform's) as this replica's write, unless
// a newer write of it is kept already.
func (r *recent) wrote(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	v := versionOfObject(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, has := r.written[key]; has && w.version > v {
		return
	}
	if _, has := r.written[key]; !has && len(r.written) >= r.max {
		r.evict()
	}
	r.written[key] = recentWrite{obj: obj, version: v, until: r.now().Add(r.ttl)}
}

// evict drops the expired writes, or else the oldest one. Called with mu held.
func (r *recent) evict() {
	now := r.now()
	oldest, first := "", true
	for k, w := range r.written {
		if now.After(w.until) {
			delete(r.written, k)
			continue
		}
		if first || w.until.Before(r.written[oldest].until) {
			oldest, first = k, false
		}
	}
	if len(r.written) >= r.max {
		delete(r.written, oldest)
	}
}

// seen: the informer added or updated obj; a write it is as new as is not needed.
func (r *recent) seen(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, has := r.written[key]; has && versionOfObject(obj) >= w.version {
		delete(r.written, key)
	}
}

// gone: the informer deleted obj; a write of it is not read over that.
func (r *recent) gone(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, key)
}

// versionOfObject is an object's resourceVersion as a number (0 when it has none).
func versionOfObject(obj any) uint64 {
	m, ok := obj.(metav1.Object)
	if !ok {
		return 0
	}
	v, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return v
}
