package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Recorder is the checker's own JetStream consumer of the status stream. While the run
// goes on it keeps each container's last event (what recovery times are measured
// against); at the end the whole stream is read back by sequence, which is what the
// invariants judge (the stream, not what this consumer happened to see).
type Recorder struct {
	nc     *nats.Conn
	stream jetstream.Stream
	cc     jetstream.ConsumeContext

	mu      sync.Mutex
	last    map[string]Event
	arrived time.Time
	count   int
}

// StartRecorder creates the stream DCM's registry would (dcm-status on dcm.*) and a
// durable consumer of its own that survives NATS restarts.
func StartRecorder(ctx context.Context, url string) (*Recorder, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	r := &Recorder{nc: nc, last: map[string]Event{}}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if r.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects}}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("stream %s: %w", streamName, err)
	}
	cons, err := r.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "sp-chaos", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		nc.Close()
		return nil, err
	}
	if r.cc, err = cons.Consume(r.handle); err != nil {
		nc.Close()
		return nil, err
	}
	return r, nil
}

func (r *Recorder) handle(msg jetstream.Msg) {
	defer func() { _ = msg.Ack() }()
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	ev, ok := parseEvent(md.Sequence.Stream, msg.Subject(), md.Timestamp, msg.Data())
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	r.arrived = time.Now()
	if prev, ok := r.last[ev.ID]; !ok || prev.Seq < ev.Seq {
		r.last[ev.ID] = ev
	}
}

// parseEvent reads a structured-mode CloudEvent; ok is false for anything else.
func parseEvent(seq uint64, subject string, stored time.Time, data []byte) (Event, bool) {
	var ce struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			ID      string `json:"id"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &ce) != nil {
		return Event{Seq: seq, Subject: subject, Time: stored, Message: "unparsable: " + string(data)}, true
	}
	return Event{Seq: seq, Subject: subject, Time: stored, CEID: ce.ID, CEType: ce.Type,
		ID: ce.Data.ID, Status: ce.Data.Status, Message: ce.Data.Message}, true
}

// Last is each container's last event seen so far.
func (r *Recorder) Last() map[string]Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.last)
}

// Quiet is how long ago the last event arrived, and how many arrived in all.
func (r *Recorder) Quiet() (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.arrived.IsZero() {
		return time.Duration(1 << 62), r.count
	}
	return time.Since(r.arrived), r.count
}

// ReadAll reads the whole stream back, by sequence.
func (r *Recorder) ReadAll(ctx context.Context) ([]Event, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []Event
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := r.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("stream message %d: %w", seq, err)
		}
		if ev, ok := parseEvent(m.Sequence, m.Subject, m.Time, m.Data); ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// ConsumerState is how far a durable consumer of the stream has come.
type ConsumerState struct {
	// Pending: stored and not yet delivered to it; AckPending: delivered and not
	// acknowledged; Redelivered: delivered more than once and not acknowledged yet.
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	// AckFloor: the stream sequence up to which it has acknowledged everything.
	AckFloor uint64 `json:"ack_floor"`
}

// Behind: something stored has not been handled by the consumer yet.
func (c ConsumerState) Behind() bool { return c.Pending > 0 || c.AckPending > 0 }

func (c ConsumerState) String() string {
	return fmt.Sprintf("%d not delivered, %d not acknowledged (%d of them redelivered), all acknowledged up to #%d",
		c.Pending, c.AckPending, c.Redelivered, c.AckFloor)
}

// Consumer is the state of the stream's durable consumer name.
func (r *Recorder) Consumer(ctx context.Context, name string) (ConsumerState, error) {
	c, err := r.stream.Consumer(ctx, name)
	if err != nil {
		return ConsumerState{}, fmt.Errorf("consumer %s: %w", name, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ConsumerState{}, fmt.Errorf("consumer %s: %w", name, err)
	}
	return ConsumerState{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered,
		AckFloor: info.AckFloor.Stream}, nil
}

// Close stops consuming.
func (r *Recorder) Close() {
	if r.cc != nil {
		r.cc.Stop()
	}
	r.nc.Close()
}
