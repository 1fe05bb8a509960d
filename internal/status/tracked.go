package status

import "crypto/sha256"

// tracked is what the controller remembers about one id between looks, guarded by Controller.mu.
// An entry exists only while a field holds something (see release), so the map stays bounded.
type tracked struct {
	// sent is what is kept of the last delivered report, sentFor its incarnation's print
	// (smaller than a UID string). A new container with the id has had nothing sent yet.
	sent    delivered
	sentFor incarnationPrint
	// sentTerm is the leadership (Controller.term) in which sent was delivered.
	sentTerm uint64
	// forced: publish the next status even if unchanged (a republish, a resend).
	forced bool
	// minted is the event being sent (nil: none), kept so a change's retries share one event id.
	minted *mintedEvent
	// waiting is why the plan is held back (notYet; "": not), so each episode is logged once.
	waiting string
	// resend is the one pending resend of a new container's status (nil: none; resend.go).
	resend *resend
}

// empty: the entry holds nothing, so it can go (sentFor means nothing without sent).
func (t *tracked) empty() bool {
	return t.sent.none() && !t.forced && t.minted == nil && t.waiting == "" && t.resend == nil
}

// entry is id's entry, made if missing. r.mu is held. The pointer is good until id's next
// release: take it again after a call that may clear a field (forgetResend).
func (r *Controller) entry(id string) *tracked {
	t := r.containers[id]
	if t == nil {
		t = &tracked{}
		r.containers[id] = t
	}
	return t
}

// release deletes id's entry once it holds nothing; call wherever a field is cleared. r.mu is held.
func (r *Controller) release(id string) {
	if t, ok := r.containers[id]; ok && t.empty() {
		delete(r.containers, id)
	}
}

// eachTracked calls f with every entry, then releases those f left empty. r.mu is held.
func (r *Controller) eachTracked(f func(id string, t *tracked)) {
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
