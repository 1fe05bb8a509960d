package store

import (
	"sync"

	"github.com/google/btree"
	"k8s.io/client-go/tools/cache"
)

// idSet keeps the ids of every cached Deployment in order, so a LIST page costs
// O(log n + page) whatever the number of containers, instead of sorting every id on
// every page. It follows the Deployment informer through an event handler.
type idSet struct {
	mu   sync.RWMutex
	tree *btree.BTreeG[string]
	// has reports whether the cache still holds a Deployment with the id (several
	// Deployments may share one id for a moment, e.g. a deleted one and a new one).
	has func(id string) bool
}

func newIDSet(has func(string) bool) *idSet {
	return &idSet{tree: btree.NewG(32, func(a, b string) bool { return a < b }), has: has}
}

func (s *idSet) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.add(obj) },
		UpdateFunc: func(_, obj any) { s.add(obj) },
		DeleteFunc: func(obj any) {
			id := instanceIDOf(obj)
			if id == "" || s.has(id) {
				return
			}
			s.mu.Lock()
			s.tree.Delete(id)
			s.mu.Unlock()
		},
	}
}

func (s *idSet) add(obj any) {
	if id := instanceIDOf(obj); id != "" {
		s.mu.Lock()
		s.tree.ReplaceOrInsert(id)
		s.mu.Unlock()
	}
}

func (s *idSet) contains(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tree.Has(id)
}

// after calls fn for each id greater than after, in order, until fn returns false.
func (s *idSet) after(after string, fn func(id string) bool) {
	s.mu.RLock()
	var ids []string
	// Copy a bounded run under the lock; fn reads the caches, which must not happen
	// while holding it.
	s.tree.AscendGreaterOrEqual(after, func(id string) bool {
		if id == after {
			return true
		}
		ids = append(ids, id)
		return len(ids) < 1024
	})
	s.mu.RUnlock()
	for _, id := range ids {
		if !fn(id) {
			return
		}
	}
	if len(ids) == 1024 {
		s.after(ids[len(ids)-1], fn)
	}
}
