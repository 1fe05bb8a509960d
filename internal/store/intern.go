package store

import "unique"

// intern returns s as a copy shared with every other interned equal string (Go's unique
// package). The views the caches hold intern the strings thousands of objects share
// (see internal/container/observed.go); the store interns what it keeps beside them,
// the namespace of records.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
