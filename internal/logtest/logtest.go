// Package logtest is for tests: a log destination that goroutines may write at once.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer collects what a logger writes; Write and String may run concurrently (the
// controller's workers, a NATS client's or an HTTP server's goroutines).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
