package store

import (
	"slices"
	"sync"

	"github.com/google/btree"
	"k8s.io/client-go/tools/cache"
)

// containerIndex finds a container's cached objects by its id, and walks the ids in
// order (a LIST page). It is the store's own index rather than an informer index:
// client-go keeps a Go map per index value, about 230 bytes for each object of each
// kind when indexed by id; hashing ids into buckets made that tens of bytes but a
// lookup read its whole bucket, so a page cost more as containers grew (the 1.57 ratio
// of docs/benchmarks.md at 10,000 / 1,000). One entry per container in a B-tree costs
// about 130 bytes, finds a container's objects in O(log n) and a page in
// O(log n + page).
//
// The store's event handler of each informer keeps it (Store.changed), and only then
// tells the store's watchers (Watch): a watcher told of a change reads an index that
// has it. Like any handler it runs a moment after the informer's cache changed: it may
// still name an object the cache has just dropped (readers skip a name the cache does
// not hold), and it names a new object once the handler has run, or once this replica
// wrote it (Store.wrote: a create's objects are in it before its 201).
type containerIndex struct {
	mu   sync.RWMutex
	tree *btree.BTreeG[*indexEntry]
	// known counts the entries with a Deployment or a record (Count).
	known int
}

// kind is the kind of a cached object.
type kind uint8

const (
	deploymentKind kind = iota
	podKind
	serviceKind
	recordKind
	kinds // how many
)

// objRef names one cached object of a container (in the store's namespace).
type objRef struct {
	name string
	kind kind
}

type indexEntry struct {
	id   string
	refs []objRef
	// ended is the incarnation whose Deployment the informer last saw deleted (""
	// none): a GET miss need not wait for a Deployment the cache saw go (answerMiss).
	ended string
}

// known: the container has a Deployment (live or being deleted) or a record.
func (e *indexEntry) known() bool {
	return e.has(deploymentKind) || e.has(recordKind)
}

func (e *indexEntry) has(k kind) bool {
	return slices.ContainsFunc(e.refs, func(r objRef) bool { return r.kind == k })
}

func newContainerIndex() *containerIndex {
	return &containerIndex{tree: btree.NewG(32, func(a, b *indexEntry) bool { return a.id < b.id })}
}

// add records that the cache holds object r of container id.
func (x *containerIndex) add(id string, r objRef) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.tree.Get(&indexEntry{id: id})
	if !ok {
		e = &indexEntry{id: id}
		x.tree.ReplaceOrInsert(e)
	}
	if e.refs == nil {
		// Room for a container's usual objects: a record, a Deployment, a pod, a Service.
		e.refs = make([]objRef, 0, 4)
	}
	if slices.Contains(e.refs, r) {
		return
	}
	was := e.known()
	e.refs = append(e.refs, r)
	if !was && e.known() {
		x.known++
	}
}

// remove records that the cache no longer holds object r of container id.
func (x *containerIndex) remove(id string, r objRef) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.tree.Get(&indexEntry{id: id})
	if !ok {
		return
	}
	if i := slices.Index(e.refs, r); i >= 0 {
		was := e.known()
		e.refs = slices.Delete(e.refs, i, i+1)
		if was && !e.known() {
			x.known--
		}
	}
	if len(e.refs) == 0 { // also an entry only sharedID made
		x.tree.Delete(e)
	}
}

// endDeployment records that the informer deleted a Deployment of incarnation inc
// of container id (kept while the entry lives, its record's ref holding it).
func (x *containerIndex) endDeployment(id, inc string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tree.Get(&indexEntry{id: id}); ok {
		e.ended = inc
	}
}

// ended reports whether the informer saw the Deployment of incarnation inc of
// container id deleted.
func (x *containerIndex) ended(id, inc string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.tree.Get(&indexEntry{id: id})
	return ok && inc != "" && e.ended == inc
}

// sharedID is id as the index holds it, so that a container's cached objects hold one
// copy of it. The informers' transform calls it before their handlers have indexed
// anything (during an initial list, each informer transforms all its objects first), so
// an id the index does not have yet gets an entry with no refs: the objects of the other
// kinds then share its id (19 MB of label values at 100,000 containers in docs/model.md
// without it). The handler of the object adds its ref, or, for a deleted one, removes
// the entry again.
func (x *containerIndex) sharedID(id string) string {
	if id == "" {
		return id
	}
	x.mu.RLock()
	e, ok := x.tree.Get(&indexEntry{id: id})
	x.mu.RUnlock()
	if ok {
		return e.id
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tree.Get(&indexEntry{id: id}); ok {
		return e.id
	}
	x.tree.ReplaceOrInsert(&indexEntry{id: id})
	return id
}

// refs is a copy of what the cache holds of container id.
func (x *containerIndex) refs(id string) []objRef {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e, ok := x.tree.Get(&indexEntry{id: id}); ok {
		return slices.Clone(e.refs)
	}
	return nil
}

func (x *containerIndex) has(id string, r objRef) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.tree.Get(&indexEntry{id: id})
	return ok && slices.Contains(e.refs, r)
}

// count is how many containers have a Deployment or a record.
func (x *containerIndex) count() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.known
}

// after calls fn, in id order, for each container whose id is greater than after and
// that keep selects, with a copy of its refs, until fn returns false. It copies runs of
// idRun entries under the lock (fn reads the caches, which must not happen while
// holding it), so a page of 50 copies tens of entries, not thousands.
func (x *containerIndex) after(after string, keep func(*indexEntry) bool, fn func(id string, refs []objRef) bool) {
	for {
		run := x.run(after, keep)
		for _, e := range run {
			if !fn(e.id, e.refs) {
				return
			}
		}
		if len(run) < idRun {
			return
		}
		after = run[len(run)-1].id
	}
}

// idRun: a page of the default size (50) and the one container that tells whether more
// follow fit in one run, most of the time.
const idRun = 64

// run copies up to idRun entries with ids greater than after that keep selects.
func (x *containerIndex) run(after string, keep func(*indexEntry) bool) []indexEntry {
	out := make([]indexEntry, 0, idRun)
	x.mu.RLock()
	defer x.mu.RUnlock()
	x.tree.AscendGreaterOrEqual(&indexEntry{id: after}, func(e *indexEntry) bool {
		if e.id != after && keep(e) {
			out = append(out, indexEntry{id: e.id, refs: slices.Clone(e.refs)})
		}
		return len(out) < idRun
	})
	return out
}

// refOf is the container id and the ref of a cached object of kind k, or of a deleted
// one's last state ("" when it is not a container's).
func refOf(k kind, obj any) (string, objRef) {
	name := ""
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		_, name, _ = cache.SplitMetaNamespaceKey(d.Key)
		obj = d.Obj
	}
	if o, ok := obj.(interface{ GetName() string }); ok && o.GetName() != "" {
		name = o.GetName()
	}
	return instanceIDOf(obj), objRef{name: name, kind: k}
}
