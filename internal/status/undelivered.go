package status

import "sync"

// undelivered counts containers whose current status is not yet delivered. An id stays owed
// through failed attempts and their backoff, which the workqueue's length hides: during a
// NATS outage owed ids wait in the rate limiter and the queue looks empty.
//
// Each id carries a generation bumped by every change; a delivery clears it only if no
// change came since its worker took it, so a change during a delivery stays owed.
type undelivered struct {
	mu    sync.Mutex
	gen   map[string]uint64 // owed ids and their generation
	taken map[string]uint64 // ids being processed: the generation the worker took
}

// add marks id owed: it changed, or its status is to be sent again.
func (o *undelivered) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.gen[id]++
}

func (o *undelivered) init() {
	if o.gen == nil {
		o.gen, o.taken = map[string]uint64{}, map[string]uint64{}
	}
}

// take records that a worker starts on id, from the state it reads now.
func (o *undelivered) take(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if g, ok := o.gen[id]; ok {
		o.taken[id] = g
	}
}

// done records that the worker finished id without error: it is no longer owed,
// unless it changed meanwhile.
func (o *undelivered) done(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.taken[id]
	delete(o.taken, id)
	if ok && o.gen[id] == g {
		delete(o.gen, id)
	}
	if len(o.gen) == 0 && len(o.taken) == 0 {
		// A Go map keeps its room when emptied: drop it, so an idle controller holds nothing.
		o.gen, o.taken = nil, nil
	}
}

// failed records a failed attempt on id: owed until a retry succeeds, even for a recheck.
func (o *undelivered) failed(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	delete(o.taken, id)
	if _, ok := o.gen[id]; !ok {
		o.gen[id] = 1
	}
}

// count is how many containers are owed.
func (o *undelivered) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.gen)
}

// reset forgets everything: a replica that stops reporting owes nothing (the next
// leader republishes every status).
func (o *undelivered) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen, o.taken = nil, nil
}
