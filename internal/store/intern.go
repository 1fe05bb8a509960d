package store

import "unique"

// Every cached object is decoded on its own, so each carries its own copy of strings
// that are the same in thousands of objects: the namespace, label keys and most label
// values, condition types, reasons and messages, images. Interning them (Go's unique
// package: one copy per distinct value, dropped when no object uses it any more) keeps
// one copy. Values unique to one object (names, UIDs, resource versions) are left as
// they are.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
