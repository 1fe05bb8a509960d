package cached

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Source is the table as a client-go reflector's store for one kind: what the
// reflector lists and watches goes straight into the table (an informer would put a
// queue, an indexer of its own and a listener between them), and every change is told
// (Table.OnChange) once the table has it.
type Source struct {
	t      *Table
	kind   Kind
	once   sync.Once
	listed chan struct{} // closed once the first list is in the table
}

// Source is the store of kind k's reflector.
func (t *Table) Source(k Kind) *Source { return &Source{t: t, kind: k, listed: make(chan struct{})} }

// HasSynced: the reflector's first list is in the table.
func (s *Source) HasSynced() bool {
	select {
	case <-s.listed:
		return true
	default:
		return false
	}
}

// Synced is closed once the reflector's first list is in the table.
func (s *Source) Synced() <-chan struct{} { return s.listed }

// Transformer makes the reflector's watch-list hold what the table keeps of each
// object while it streams the initial list, not the objects as decoded.
func (s *Source) Transformer() cache.TransformFunc { return Transform }

var (
	_ cache.TransformingStore = (*Source)(nil)
	_ cache.ReflectorStore    = (*Source)(nil)
)

// Add and Update take an object the watch added or changed.
func (s *Source) Add(obj any) error    { return s.take(obj, false) }
func (s *Source) Update(obj any) error { return s.take(obj, true) }

func (s *Source) take(obj any, update bool) error {
	o, ok := Of(obj)
	if !ok || o.id == "" && !update {
		return nil
	}
	s.t.mu.Lock()
	from := s.t.update(o, update)
	s.t.mu.Unlock()
	s.t.tell(o.id)
	s.t.tell(from...)
	return nil
}

// Delete takes an object the watch deleted: its part goes unless the table holds a
// newer one (a new object of the same name this replica wrote), and it is remembered,
// so a write of it that comes later is not read back (Table.Wrote).
func (s *Source) Delete(obj any) error {
	o, ok := Of(obj)
	if !ok {
		return nil
	}
	v := o.version()
	s.t.mu.Lock()
	var from []string
	if o.id == "" { // someone took its id label off: it goes from where it was
		from = s.t.unlink(o)
	} else {
		s.t.drop(o.id, o.kind, o.GetName(), &v)
	}
	if o.kind != Pods { // the service writes no pods
		s.t.bury(o.kind, o.GetName(), v)
	}
	s.t.mu.Unlock()
	s.t.tell(o.id)
	s.t.tell(from...)
	return nil
}

// Replace takes a whole list (the first, or a relist after the watch failed): every
// listed object is taken, and a part of this kind the list does not have goes, unless
// it is newer than the list (a write of ours made after it). Every container touched is
// told, as an informer tells its handlers of every object of a relist.
func (s *Source) Replace(list []any, resourceVersion string) error {
	listed := make(map[string]string, len(list)) // name: id
	objs := make([]*Object, 0, len(list))
	for _, obj := range list {
		if o, ok := Of(obj); ok && o.id != "" {
			listed[o.GetName()] = o.id
			objs = append(objs, o)
		}
	}
	at := versionOf(resourceVersion)
	var touched []string
	s.t.mu.Lock()
	var gone []string
	s.t.tree.Ascend(func(e *entry) bool {
		if e.of(s.kind).anyOf(unlisted(e.id, listed, at)) {
			gone = append(gone, e.id)
		}
		return true
	})
	for _, id := range gone {
		s.t.mutate(id, func(e *entry) {
			if inc, ok := e.of(s.kind).dropOf(unlisted(id, listed, at)); ok {
				s.t.ended[id] = inc
			}
		})
	}
	for _, o := range objs {
		s.t.update(o, false) // an object listed under another id went above
		touched = append(touched, o.id)
	}
	s.t.mu.Unlock()
	s.once.Do(func() { close(s.listed) })
	s.t.tell(gone...)
	s.t.tell(touched...)
	return nil
}

// Resync tells every container with an object of this kind, as an informer's resync
// does (the status reporter looks at each again).
func (s *Source) Resync() error {
	var ids []string
	s.t.mu.RLock()
	s.t.tree.Ascend(func(e *entry) bool {
		if e.of(s.kind).len() > 0 {
			ids = append(ids, e.id)
		}
		return true
	})
	s.t.mu.RUnlock()
	s.t.tell(ids...)
	return nil
}

// tell tells of each of ids but "" (no container's).
func (t *Table) tell(ids ...string) {
	for _, id := range ids {
		if t.changed != nil && id != "" {
			t.changed(id)
		}
	}
}

// unlisted: a part of container id that a list at version at does not have (under this
// id), and is not newer than the list.
func unlisted(id string, listed map[string]string, at version) func(name string, v version) bool {
	return func(name string, v version) bool { return listed[name] != id && notNewer(v, at) }
}
