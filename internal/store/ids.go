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
// It copies the ids in runs of idRun under the lock (fn reads the caches, which must not
// happen while holding it), so a page of 50 copies tens of ids, not thousands.
func (s *idSet) after(after string, fn func(id string) bool) {
	for {
		ids := s.run(after)
		for _, id := range ids {
			if !fn(id) {
				return
			}
		}
		if len(ids) < idRun {
			return
		}
		after = ids[len(ids)-1]
	}
}

// idRun: a page of the default size (50) and the one id that tells whether more follow
// fit in one run, most of the time.
const idRun = 64

// run copies up to idRun ids greater than after.
func (s *idSet) run(after string) []string {
	ids := make([]string, 0, idRun)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.tree.AscendGreaterOrEqual(after, func(id string) bool {
		if id != after {
			ids = append(ids, id)
		}
		return len(ids) < idRun
	})
	return ids
}
