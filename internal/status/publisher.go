package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The event contract DCM consumes (dcm-contracts: "Status events").
const (
	Subject   = "dcm.container"
	EventType = "dcm.status.container"
)

// EventData is the data of every status event, as DCM's status consumer reads it
// (control-plane internal/sp/consumer: StatusEvent).
type EventData struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
	// Timestamp is when the controller planned the event (RFC 3339, UTC): never before the
	// change, and defined even for a DELETED or a change no object dates. It equals the
	// event's time through every retry.
	Timestamp time.Time `json:"timestamp"`
	// OutputSpec is the container's addresses and ports, on RUNNING only.
	OutputSpec container.Outputs `json:"output_spec,omitzero"`
}

// Publisher sends status events to DCM.
type Publisher interface {
	// Publish sends rep of container id as event eventID. Retries of one change reuse eventID
	// (and rep.Observed), so JetStream and consumers de-duplicate them. stored says a stream
	// acknowledged it: only then may a DELETED release its record, as a plain NATS publish
	// reaches only the subscribers connected then.
	Publish(ctx context.Context, eventID, id string, rep Report) (stored bool, err error)
}

// NATSPublisher publishes structured-mode CloudEvents 1.0 on dcm.container. If a JetStream
// stream captures it, an event is sent once acknowledged; else it is a flushed NATS publish.
type NATSPublisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	source string

	mu          sync.Mutex
	streamSeen  bool
	streamCheck time.Time
}

// streamRecheck is how long the answer to "does a stream capture dcm.container?" is kept.
const streamRecheck = 5 * time.Second

// NewNATSPublisher makes a publisher on nc with event source "dcm/providers/<providerName>".
func NewNATSPublisher(nc *nats.Conn, providerName string) (*NATSPublisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &NATSPublisher{nc: nc, js: js, source: "dcm/providers/" + providerName}, nil
}

// NewEventID is the id of a new event: one per status change, kept through its retries.
func NewEventID() string { return uuid.NewString() }

// NewEvent builds CloudEvent eventID for rep; its time and data timestamp are rep.Observed.
func NewEvent(source, eventID, id string, rep Report) (cloudevents.Event, error) {
	at := rep.Observed.UTC()
	ev := cloudevents.NewEvent(cloudevents.VersionV1)
	ev.SetID(eventID)
	ev.SetSource(source)
	ev.SetType(EventType)
	ev.SetSubject(Subject)
	ev.SetTime(at)
	data := EventData{ID: id, Status: string(rep.Status.Status), Message: rep.Status.Message, Timestamp: at, OutputSpec: rep.Outputs}
	if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return ev, err
	}
	return ev, ev.Validate()
}

// captured reports whether a JetStream stream captures Subject, asking at most every streamRecheck.
func (p *NATSPublisher) captured(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.streamCheck) < streamRecheck {
		return p.streamSeen
	}
	_, err := p.js.StreamNameBySubject(ctx, Subject)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return p.streamSeen // unknown: keep the last answer, check again next time
	}
	p.streamSeen, p.streamCheck = err == nil, time.Now()
	return p.streamSeen
}

// Publish sends one status event; nil means delivered: stored by the capturing stream
// (stored) or, with none, flushed to NATS. A report with zero Observed is dated now.
func (p *NATSPublisher) Publish(ctx context.Context, eventID, id string, rep Report) (stored bool, err error) {
	if rep.Observed.IsZero() {
		rep.Observed = time.Now()
	}
	ev, err := NewEvent(p.source, eventID, id, rep)
	if err != nil {
		return false, err
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	if !p.nc.IsConnected() {
		return false, fmt.Errorf("NATS is not connected (%s)", p.nc.Status())
	}
	if stored = p.captured(ctx); stored {
		msg := &nats.Msg{Subject: Subject, Data: body, Header: nats.Header{}}
		// The event id is also the Nats-Msg-Id, so a retry after a lost ack is stored once.
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		_, err = p.js.PublishMsg(ctx, msg)
	} else {
		// No stream captures the subject (yet): plain NATS, flushed; republishes cover absent consumers.
		if err = p.nc.Publish(Subject, body); err == nil {
			err = p.nc.FlushWithContext(ctx)
		}
	}
	if err != nil {
		return false, fmt.Errorf("publishing %s for %s: %w", rep.Status.Status, id, err)
	}
	return stored, nil
}
