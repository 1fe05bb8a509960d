package status

import "sync"

// undelivered counts the containers whose current status has not been delivered yet: changed
// (or asked to be republished) and not yet processed without error. A container stays
// owed through its failed attempts and the backoff between them, which is what the
// work queue's length does not show: during a NATS outage every owed id waits in the
// queue's rate limiter, and the queue looks empty.
//
// Each id carries a generation, bumped by every change; a delivery clears the id only
// if no change came in since its worker took it, so a change made during a delivery is
// still owed.
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
		// A Go map keeps its room when emptied: after a republish of every container
		// that is megabytes (4.6 MB at 100,000 in docs/model.md) held for nothing.
		o.gen, o.taken = nil, nil
	}
}

// failed records that the worker's attempt on id failed: owed until a retry succeeds
// (also when the attempt was a scheduled second look, not a change).
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
