package status

import (
	"sync"
	"time"
)

// outage turns failed deliveries into one log line when they start and one when they end,
// not one per container per retry during a NATS outage.
type outage struct {
	mu       sync.Mutex
	since    time.Time
	failures int
	ids      map[string]struct{}
}

// failed records a failed delivery; true for the first one of an outage.
func (o *outage) failed(now time.Time, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	first := o.failures == 0
	if first {
		o.since, o.ids = now, map[string]struct{}{}
	}
	o.failures++
	o.ids[id] = struct{}{}
	return first
}

// recovered records a successful delivery; when it ends an outage it says how long the
// outage lasted, how many deliveries failed and for how many containers.
func (o *outage) recovered(now time.Time) (ended bool, lasted time.Duration, failures, containers int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failures == 0 {
		return false, 0, 0, 0
	}
	ended, lasted, failures, containers = true, now.Sub(o.since), o.failures, len(o.ids)
	o.failures, o.ids = 0, nil
	return
}
