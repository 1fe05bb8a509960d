package status

import "crypto/sha256"

// tracked is what the reporter remembers about one container id between two looks at
// it. Every field is guarded by Reporter.mu, and the entry exists only while one of
// them holds something (see release): the map of entries is bounded by the containers
// the reporter still has business with, not by every id it ever saw.
type tracked struct {
	// sent is what is kept of the last report delivered (none: none), and sentFor the
	// incarnation it was about (its print: a UID string is a 48-byte allocation per
	// container). A new container with the id has had nothing sent yet, whatever the
	// last one's status was.
	sent    delivered
	sentFor incarnationPrint
	// sentTerm is the leadership (Reporter.term) in which sent was delivered.
	sentTerm uint64
	// forced: publish the next status even if unchanged (a republish, a resend).
	forced bool
	// minted is the event id of the status being sent (nil: none), kept until it is
	// delivered so that the retries of one change carry one event id (see eventID).
	minted *mintedEvent
	// waiting is why the plan is held back (notYet; "": it is not), so that each episode
	// is logged once, not once per retry.
	waiting string
	// resend is the one pending resend of a new container's status (nil: none; resend.go).
	resend *resend
}

// empty: the entry holds nothing, so it can go (sentFor means nothing without sent).
func (t *tracked) empty() bool {
	return t.sent.none() && !t.forced && t.minted == nil && t.waiting == "" && t.resend == nil
}

// entry is id's entry, made if there is none, to set a field of. r.mu is held. The
// pointer is good until the next release of id: take it again after a call that may
// clear a field (forgetResend).
func (r *Reporter) entry(id string) *tracked {
	t := r.containers[id]
	if t == nil {
		t = &tracked{}
		r.containers[id] = t
	}
	return t
}

// release deletes id's entry when it holds nothing any more; called wherever a field
// is cleared. r.mu is held.
func (r *Reporter) release(id string) {
	if t, ok := r.containers[id]; ok && t.empty() {
		delete(r.containers, id)
	}
}

// eachTracked calls f with every entry, then releases those f left empty. r.mu is held.
func (r *Reporter) eachTracked(f func(id string, t *tracked)) {
	for id, t := range r.containers {
		f(id, t)
		r.release(id) // deleting the current key while ranging is fine in Go
	}
}

// incarnationPrint is an incarnation (a record's UID) in 16 bytes: the first 16 of its
// SHA-256, so two incarnations of an id share a print but for a chance of 2^-128.
type incarnationPrint [16]byte

func printOf(inc string) incarnationPrint {
	h := sha256.Sum256([]byte(inc))
	return incarnationPrint(h[:16])
}
