package store

// Count is how many containers this replica's caches know: every id with a Deployment
// (live or being deleted) or a record (a create in progress, or a DELETED still owed).
// It is what SP_MAX_CONTAINERS bounds. Another replica's create shows here once the
// watches deliver its record, so replicas creating at the same moment can together
// overshoot a limit checked against it by the creates in flight.
func (s *Store) Count() int {
	return s.informers.count()
}
