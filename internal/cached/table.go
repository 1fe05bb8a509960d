package cached

import (
	"slices"
	"sync"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Table is the cache of every container's objects: one entry per container id, in a
// B-tree ordered by id, holding the compact parts of its record, Deployment, pods and
// Service by value. client-go's reflectors write into it directly (source.go), one per
// kind, so there is no informer in between: no indexer map of every object of a kind,
// no listener ring buffer, no separate index from id to objects, and a container's id
// and namespace are held once (at 100,000 containers client-go's stores, rings and the
// index took 48 MB of a 161 MB live heap, docs/model.md). A read finds a container in
// O(log n) and a LIST page in O(log n + page).
//
// Writes of this replica (Wrote) go into the same entries, so a read right after a
// create or a DELETE sees what the apiserver answered without waiting for the watch.
// Two rules keep the watch and the writes in order: a part is replaced only by one at
// least as new (resourceVersions are compared as numbers, as client-go's mutation cache
// does), and a write of an object the watch has already seen deleted is dropped (the
// table remembers recent deletes: tombstones).
type Table struct {
	namespace string
	now       func() time.Time

	mu   sync.RWMutex
	tree *btree.BTreeG[*entry]
	// known counts the entries with a Deployment or a record (Count).
	known int
	// ended is, for a container whose entry holds something still, the incarnation
	// whose Deployment the watch last saw deleted: a GET miss need not wait for a
	// Deployment the cache saw go. Few containers have one at a time, so it is kept
	// here rather than in every entry.
	ended map[string]uuidOr
	tombs map[tombKey]tomb
	// changed is told the id of every container whose objects the watches changed,
	// once the table has the change (OnChange).
	changed func(id string)
}

// NewTable is an empty table of the containers in namespace; now tells the tombstones'
// age.
func NewTable(namespace string, now func() time.Time) *Table {
	return &Table{namespace: namespace, now: now, tombs: map[tombKey]tomb{}, ended: map[string]uuidOr{},
		tree: btree.NewG(32, func(a, b *entry) bool { return a.id < b.id })}
}

// OnChange sets what is told of each change the watches bring (set it before the
// sources run): it is called with the table unlocked, from the goroutine of the kind's
// reflector, so it must not block.
func (t *Table) OnChange(changed func(id string)) { t.changed = changed }

// entry is one container's cached objects.
type entry struct {
	id          string
	deployments parts[cachedDeployment]
	pods        parts[cachedPod]
	services    parts[cachedService]
	records     parts[cachedRecord]
}

func (e *entry) empty() bool {
	return e.deployments.len()+e.pods.len()+e.services.len()+e.records.len() == 0
}

// known: the container has a Deployment (live or being deleted) or a record.
func (e *entry) known() bool { return e.deployments.len() > 0 || e.records.len() > 0 }

// Live selects the containers with a Deployment; Known those with a Deployment or a
// record; Any every container the table holds anything of.
var (
	Live  = func(e *entry) bool { return e.deployments.len() > 0 }
	Known = (*entry).known
	Any   = func(*entry) bool { return true }
)

// Selector chooses entries for Walk and EachID.
type Selector = func(*entry) bool

// part is what the table needs of a compact part.
type part interface {
	partName() string
	partVersion() version
}

// parts are a container's objects of one kind: almost always one (first), more while
// an old one is deleted beside a new one (more: nil when none, so one costs 8 bytes).
type parts[T part] struct {
	first T
	more  *[]T
}

func (p *parts[T]) len() int {
	n := 0
	if p.first.partName() != "" {
		n = 1
	}
	if p.more != nil {
		n += len(*p.more)
	}
	return n
}

func (p *parts[T]) each(fn func(*T)) {
	if p.first.partName() != "" {
		fn(&p.first)
	}
	if p.more != nil {
		for i := range *p.more {
			fn(&(*p.more)[i])
		}
	}
}

func (p *parts[T]) find(name string) *T {
	var found *T
	p.each(func(v *T) {
		if (*v).partName() == name {
			found = v
		}
	})
	return found
}

// put sets v in place of the part with its name, or beside the others.
func (p *parts[T]) put(v T) {
	switch old := p.find(v.partName()); {
	case old != nil:
		*old = v
	case p.first.partName() == "":
		p.first = v
	case p.more == nil:
		p.more = &[]T{v}
	default:
		*p.more = append(*p.more, v)
	}
}

// drop removes the part named name and gives it back.
func (p *parts[T]) drop(name string) (T, bool) {
	var zero T
	if p.first.partName() == name {
		old := p.first
		p.first = zero
		if p.more != nil {
			p.first = (*p.more)[len(*p.more)-1]
			p.dropMore(len(*p.more) - 1)
		}
		return old, true
	}
	if p.more != nil {
		for i, v := range *p.more {
			if v.partName() == name {
				p.dropMore(i)
				return v, true
			}
		}
	}
	return zero, false
}

func (p *parts[T]) dropMore(i int) {
	if *p.more = slices.Delete(*p.more, i, i+1); len(*p.more) == 0 {
		p.more = nil
	}
}

// slot is one kind's parts of an entry, whatever the kind (entry.of): what the table
// does with them without knowing their type.
type slot interface {
	len() int
	has(name string) bool
	// anyOf reports whether match accepts one of the parts, by name and version.
	anyOf(match func(name string, v version) bool) bool
	// dropOf drops the parts gone accepts; of a Deployment among them it gives back
	// the incarnation (ended: one was dropped), which the table keeps (Ended).
	dropOf(gone func(name string, v version) bool) (inc uuidOr, ended bool)
}

// of is the entry's parts of kind k.
func (e *entry) of(k Kind) slot {
	switch k {
	case Deployments:
		return &e.deployments
	case Pods:
		return &e.pods
	case Services:
		return &e.services
	}
	return &e.records
}

func (p *parts[T]) has(name string) bool { return p.find(name) != nil }

func (p *parts[T]) anyOf(match func(name string, v version) bool) bool {
	found := false
	p.each(func(v *T) { found = found || match((*v).partName(), (*v).partVersion()) })
	return found
}

func (p *parts[T]) dropOf(gone func(name string, v version) bool) (inc uuidOr, ended bool) {
	p.keep(func(v *T) bool {
		if !gone((*v).partName(), (*v).partVersion()) {
			return true
		}
		if d, ok := any(v).(*cachedDeployment); ok {
			inc, ended = d.incarnation, true
		}
		return false
	})
	return inc, ended
}

// keep drops the parts keep refuses; it reports whether it dropped any.
func (p *parts[T]) keep(keep func(*T) bool) bool {
	var drop []string
	p.each(func(v *T) {
		if !keep(v) {
			drop = append(drop, (*v).partName())
		}
	})
	for _, name := range drop {
		p.drop(name)
	}
	return len(drop) > 0
}

// notNewer: a is not newer than b. resourceVersions are opaque to clients, but the
// apiserver's are etcd revisions, numbers that grow; where one is not a number, the
// later event wins (a is taken as older).
func notNewer(a, b version) bool {
	an, aok := a.number()
	bn, bok := b.number()
	return !aok || !bok || an <= bn
}

// tombstones: the objects the watch saw deleted a moment ago, by kind and name, so a
// write of this replica that the apiserver answered before the delete (its
// resourceVersion is older) is not read back after it. A write is put in the table
// microseconds after its answer, so a minute and a thousand deletes are ample.
type tombKey struct {
	kind Kind
	name string
}

type tomb struct {
	version version
	until   time.Time
}

const (
	tombTTL  = time.Minute
	tombsMax = 1024
)

func (t *Table) bury(k Kind, name string, v version) {
	now := t.now()
	if _, has := t.tombs[tombKey{k, name}]; !has && len(t.tombs) >= tombsMax {
		oldest, first := tombKey{}, true
		for key, tb := range t.tombs {
			if now.After(tb.until) {
				delete(t.tombs, key)
			} else if first || tb.until.Before(t.tombs[oldest].until) {
				oldest, first = key, false
			}
		}
		if len(t.tombs) >= tombsMax {
			delete(t.tombs, oldest)
		}
	}
	t.tombs[tombKey{k, name}] = tomb{version: v, until: now.Add(tombTTL)}
}

// buried: the watch saw the object deleted at v or later.
func (t *Table) buried(o *Object) bool {
	tb, ok := t.tombs[tombKey{o.kind, o.GetName()}]
	if !ok {
		return false
	}
	if t.now().After(tb.until) {
		delete(t.tombs, tombKey{o.kind, o.GetName()})
		return false
	}
	return notNewer(o.version(), tb.version)
}

// Wrote puts an object this replica wrote (the apiserver's answer) into the table, as
// the watch will: read-your-writes without waiting for it. Nobody is told: the watch
// brings the change as it brings any other.
func (t *Table) Wrote(obj runtime.Object) {
	o, ok := Of(obj)
	if !ok || o.id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buried(o) {
		return
	}
	t.update(o, false)
}

// mutate runs fn on the entry of id, made if there is none, and keeps the count and the
// tree: an entry left empty goes.
func (t *Table) mutate(id string, fn func(e *entry)) {
	e, ok := t.tree.Get(&entry{id: id})
	if !ok {
		e = &entry{id: id}
	}
	was := ok && e.known()
	fn(e)
	switch now := e.known(); {
	case was && !now:
		t.known--
	case !was && now:
		t.known++
	}
	switch {
	case e.empty() && ok:
		t.tree.Delete(e)
		delete(t.ended, id)
	case !e.empty() && !ok:
		t.tree.ReplaceOrInsert(e)
	}
}

// update sets o's part in its container's entry unless the entry holds a newer state
// of it (a write of ours the watch has not brought yet). moved: the object may have
// belonged to another container before (a watch update; see unlink), whose id it gives
// back. An object of no container (its id label taken off) only leaves the one it was in.
func (t *Table) update(o *Object, moved bool) (from []string) {
	if moved {
		from = t.unlink(o)
	}
	if o.id == "" {
		return from
	}
	t.mutate(o.id, func(e *entry) {
		switch o.kind {
		case Deployments:
			putNewer(&e.deployments, *o.dep)
		case Pods:
			putNewer(&e.pods, *o.pod)
		case Services:
			putNewer(&e.services, *o.svc)
		case Records:
			putNewer(&e.records, *o.rec)
		}
	})
	return from
}

func putNewer[T part](p *parts[T], v T) {
	if old := p.find(v.partName()); old != nil && !notNewer((*old).partVersion(), v.partVersion()) {
		return
	}
	p.put(v)
}

// unlink removes an updated object from the container it no longer belongs to, when
// its own entry does not hold it yet: someone changed its id label. That is rare and
// the table keeps no map from names to ids (it would cost more than the rest of an
// entry), so the entries are searched.
func (t *Table) unlink(o *Object) []string {
	if e, ok := t.tree.Get(&entry{id: o.id}); ok && e.of(o.kind).has(o.GetName()) {
		return nil
	}
	var from []string
	t.tree.Ascend(func(e *entry) bool {
		if e.id != o.id && e.of(o.kind).has(o.GetName()) {
			from = append(from, e.id)
		}
		return true
	})
	for _, id := range from {
		t.drop(id, o.kind, o.GetName(), nil)
	}
	return from
}

// drop removes the part of kind k named name from container id's entry, if it is
// there, unless it is newer than v (nil: whatever its version); a Deployment that goes
// is the container's ended one.
func (t *Table) drop(id string, k Kind, name string, v *version) {
	t.mutate(id, func(e *entry) {
		older := func(n string, at version) bool { return n == name && (v == nil || notNewer(at, *v)) }
		if inc, ok := e.of(k).dropOf(older); ok {
			t.ended[id] = inc
		}
	})
}

// Snapshot is what the table holds of container id, its record included.
func (t *Table) Snapshot(id string) container.Snapshot {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.tree.Get(&entry{id: id})
	if !ok {
		return container.Snapshot{}
	}
	return t.snapshot(e)
}

func (t *Table) snapshot(e *entry) container.Snapshot {
	var snap container.Snapshot
	ns, id := t.namespace, e.id
	e.deployments.each(func(d *cachedDeployment) {
		v := d.view(ns, id)
		snap.Deployments = append(snap.Deployments, &v)
	})
	e.pods.each(func(p *cachedPod) {
		v := p.view(ns, id)
		snap.Pods = append(snap.Pods, &v)
	})
	e.services.each(func(s *cachedService) {
		v := s.view(ns, id)
		snap.Services = append(snap.Services, &v)
	})
	e.records.each(func(r *cachedRecord) {
		if r.isRecord {
			rec := r.record()
			snap.Record = &rec
		}
	})
	slices.SortFunc(snap.Deployments, func(a, b *container.Deployment) int {
		return a.Created.Compare(b.Created)
	})
	return snap
}

// Count is how many containers have a Deployment or a record.
func (t *Table) Count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.known
}

// Ended reports whether the watch saw the Deployment of incarnation inc of container
// id deleted.
func (t *Table) Ended(id, inc string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ended, ok := t.ended[id]
	return ok && inc != "" && ended.String() == inc
}

// run: a page of the default size (50) and the one container that tells whether more
// follow fit in one run, most of the time.
const run = 64

// Walk calls fn, in id order, with the snapshot of each container whose id is greater
// than after and that sel selects, until fn returns false. It takes runs of entries
// under the lock and calls fn without it, so a page of 50 reads tens of entries, not
// thousands, and fn may read the table.
func (t *Table) Walk(after string, sel Selector, fn func(id string, snap container.Snapshot) bool) {
	walk(t, after, sel, t.snapshot, fn)
}

// EachID is Walk without the snapshots.
func (t *Table) EachID(sel Selector, fn func(id string) bool) {
	walk(t, "", sel, func(*entry) struct{} { return struct{}{} }, func(id string, _ struct{}) bool { return fn(id) })
}

// walk is Walk with what take reads of each entry.
func walk[T any](t *Table, after string, sel Selector, take func(*entry) T, fn func(id string, v T) bool) {
	type item struct {
		id string
		v  T
	}
	for {
		items := make([]item, 0, run)
		t.mu.RLock()
		t.tree.AscendGreaterOrEqual(&entry{id: after}, func(e *entry) bool {
			if e.id != after && sel(e) {
				items = append(items, item{e.id, take(e)})
			}
			return len(items) < run
		})
		t.mu.RUnlock()
		for _, it := range items {
			if !fn(it.id, it.v) {
				return
			}
		}
		if len(items) < run {
			return
		}
		after = items[len(items)-1].id
	}
}
