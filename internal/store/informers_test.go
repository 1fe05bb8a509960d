package store

// put puts an object into the store's table as kind k's reflector would (a watch's
// ADDED), transform and the watchers' news included.
func (s *Store) put(k kind, obj any) error { return s.sources[k].Add(obj) }
