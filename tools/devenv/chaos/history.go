package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Entry is one line of the history: an operation or fault and its answer, or something
// the run observed (a process start, a metrics sample, a recovery). The checker reads
// nothing else of what happened, so everything an invariant needs is here.
type Entry struct {
	Seq  int    `json:"seq"`
	Type string `json:"type"` // op, fault, proc, metrics, recovery, observe, note, heal
	// Kind is the operation (create, delete, hand-delete, get, list), the fault
	// (pod-delete, fate, node-loss, nats-restart, leader-kill, replica-stop,
	// registry-restart, apiserver-restart, watch-block, watch-break, api-delay, api-drop),
	// foreign (another provider's objects made, as an op; seen, as an observe entry), or
	// for proc entries the event (started,
	// ready, stopped, killed, exited).
	Kind string `json:"kind"`
	// Step is the schedule step this belongs to; steps that race share it.
	Step int `json:"step,omitempty"`
	// Via is who was asked: replica "a" or "b", "registry", "kubectl" (the admin client).
	Via string `json:"via,omitempty"`
	// Proc is the service process that answered or was acted on (a-1, b-2, …).
	Proc  string `json:"proc,omitempty"`
	ID    string `json:"id,omitempty"`
	Image string `json:"image,omitempty"`
	// Target names what a fault hit (node, pod, replica process, fate image).
	Target string    `json:"target,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Code is the HTTP status; 0 when there was no answer (Err says why).
	Code int `json:"code,omitempty"`
	// Problem is the problem+json type code (already-exists, unavailable, …).
	Problem string `json:"problem,omitempty"`
	Err     string `json:"err,omitempty"`
	// Refused: the connection was refused, so the request certainly had no effect.
	Refused bool `json:"refused,omitempty"`
	// Status of the container in a 2xx answer (create, get).
	Status string `json:"status,omitempty"`
	// Count: objects deleted by hand, pending ids of a recovery, …
	Count int `json:"count,omitempty"`
	// Metrics samples.
	Goroutines float64 `json:"goroutines,omitempty"`
	RSS        float64 `json:"rss,omitempty"`
	Leader     float64 `json:"leader,omitempty"`
	Pending    float64 `json:"pending,omitempty"`
	Note       string  `json:"note,omitempty"`
	// Detail: what a proxy fault did (watches held or cut, answers delayed or lost).
	Detail string `json:"detail,omitempty"`
	// Foreign: another provider's objects, as made (op foreign) or as seen (observe).
	Foreign []Object `json:"foreign,omitempty"`
}

// History collects entries and appends each, as it is recorded, to a JSONL file, so a
// run that dies still leaves what it did.
type History struct {
	mu      sync.Mutex
	entries []Entry
	f       *os.File
	w       *bufio.Writer
}

// NewHistory writes to path (truncated).
func NewHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &History{f: f, w: bufio.NewWriter(f)}, nil
}

// Add records e (Seq is set) and returns it.
func (h *History) Add(e Entry) Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = len(h.entries) + 1
	if e.End.IsZero() {
		e.End = e.Start
	}
	h.entries = append(h.entries, e)
	if h.w != nil {
		b, _ := json.Marshal(e)
		h.w.Write(append(b, '\n'))
		h.w.Flush()
	}
	return e
}

// Entries is a copy of everything recorded so far.
func (h *History) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// Close flushes and closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	h.w.Flush()
	err := h.f.Close()
	h.f, h.w = nil, nil
	return err
}

// ReadJSONL reads a file of one JSON value per line into a slice (history, events).
func ReadJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// WriteJSONL writes values one per line.
func WriteJSONL[T any](path string, vs []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			f.Close()
			return err
		}
		w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
