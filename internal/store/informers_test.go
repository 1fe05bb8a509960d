package store

// put puts an object into kind k's informer as its watch would (ADDED), its event
// handler's work included.
func (s *Store) put(k kind, obj any) error { return s.watched(k, obj, false) }

// remove deletes an object from kind k's informer as its watch would (DELETED).
func (s *Store) remove(k kind, obj any) error { return s.watched(k, obj, true) }

func (s *Store) watched(k kind, obj any, deleted bool) error {
	o, _ := objectOf(obj)
	change := s.informers.of[k].GetIndexer().Add
	if deleted {
		change = s.informers.of[k].GetIndexer().Delete
	}
	if err := change(o); err != nil {
		return err
	}
	if deleted {
		s.informers.event(k, o, nil)
	} else {
		s.informers.event(k, nil, o)
	}
	return nil
}
