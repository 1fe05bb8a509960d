package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// event is one status CloudEvent as received.
type event struct {
	SpecVersion     string           `json:"specversion"`
	ID              string           `json:"id"`
	Source          string           `json:"source"`
	Type            string           `json:"type"`
	Subject         string           `json:"subject"`
	Time            string           `json:"time"`
	DataContentType string           `json:"datacontenttype"`
	Data            status.EventData `json:"data"`
}

// sink records every status event published on a NATS server, by container id.
type sink struct {
	t    *testing.T
	mu   sync.Mutex
	byID map[string][]event
	all  int
}

func newSink(t *testing.T, url string) *sink {
	t.Helper()
	s := &sink{t: t, byID: map[string][]event{}}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe(status.Subject, func(m *nats.Msg) { s.record(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// newStreamSink reads the events from a JetStream stream, as the registry does: unlike a
// plain subscription it misses nothing while NATS restarts.
func newStreamSink(t *testing.T, stream jetstream.Stream) *sink {
	t.Helper()
	s := &sink{t: t, byID: map[string][]event{}}
	cons, err := stream.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{status.Subject}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { s.record(m.Data()) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return s
}

// storedEvents reads, once, the status events of id that the stream holds now, oldest
// first: straight from the stream, so what the stream acknowledged is there, with no
// consumer's delivery to wait for.
func storedEvents(t *testing.T, stream jetstream.Stream, id string) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var ev event
		if m.Subject != status.Subject {
			continue
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, m.Data)
		}
		if ev.Data.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

func (s *sink) record(data []byte) {
	var ev event
	if err := json.Unmarshal(data, &ev); err != nil {
		s.t.Errorf("event is not JSON: %v: %s", err, data)
		return
	}
	s.mu.Lock()
	s.byID[ev.Data.ID] = append(s.byID[ev.Data.ID], ev)
	s.all++
	s.mu.Unlock()
}

func (s *sink) events(id string) []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.byID[id]...)
}

// last is the newest event of a container (zero if none).
func (s *sink) last(id string) event {
	evs := s.events(id)
	if len(evs) == 0 {
		return event{}
	}
	return evs[len(evs)-1]
}

// waitStatus waits until the newest event of id has this status and a message
// containing msg.
func (s *sink) waitStatus(id, status, msg string, timeout time.Duration) event {
	s.t.Helper()
	var got event
	testenv.Eventually(s.t, timeout, fmt.Sprintf("%s %s %q", id, status, msg), func() error {
		got = s.last(id)
		if got.Data.Status != status || !strings.Contains(got.Data.Message, msg) {
			return fmt.Errorf("last event %+v (of %d)", got.Data, len(s.events(id)))
		}
		return nil
	})
	return got
}

// noRepeats checks that no event of id repeats the one before it.
func (s *sink) noRepeats(id string) {
	s.t.Helper()
	evs := s.events(id)
	for i := 1; i < len(evs); i++ {
		if state(evs[i].Data) == state(evs[i-1].Data) {
			s.t.Errorf("event %d of %s repeats the previous one: %+v", i, id, evs[i].Data)
		}
	}
}

// state is what an event says of its container, without when it was observed: its id,
// status, message and outputs (the controller's status.Report.Same), as a comparable key.
func state(d status.EventData) string {
	b, err := json.Marshal(struct {
		ID, Status, Message string
		Outputs             any
	}{d.ID, d.Status, d.Message, d.OutputSpec})
	if err != nil {
		panic(err)
	}
	return string(b)
}
