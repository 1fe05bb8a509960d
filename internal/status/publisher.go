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
// (control-plane, internal/sp/consumer: StatusEvent, whose id, status and message are
// these, timestamp a time.Time, output_spec a map stored with the instance).
type EventData struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
	// Timestamp is when the reporter observed the status (RFC 3339, UTC): when it
	// planned the event from the caches, so never before the change it reports,
	// defined for a DELETED (whose objects are gone) and for a change no Kubernetes
	// object dates (a load balancer's address, a pull's back-off). The same instant
	// as the event's time, through every retry of the event.
	Timestamp time.Time `json:"timestamp"`
	// OutputSpec is the container's addresses and ports (container.Outputs), on
	// RUNNING only; absent otherwise.
	OutputSpec container.Outputs `json:"output_spec,omitzero"`
}

// Publisher sends status events to DCM.
type Publisher interface {
	// Publish sends rep of container id as the event eventID. The reporter passes the
	// same eventID (and rep.Observed) to every retry of one status change, so a retry
	// after a lost acknowledgement is stored once (JetStream de-duplicates on it) and a
	// consumer that de-duplicates on the CloudEvent id sees it once, the same content
	// each time. stored says a stream stored the
	// event (acknowledged it): only then may a DELETED release its record, since a
	// plain NATS publish reaches only the subscribers connected at that moment, maybe
	// none.
	Publish(ctx context.Context, eventID, id string, rep Report) (stored bool, err error)
}

// NATSPublisher publishes CloudEvents 1.0 in structured JSON mode on subject
// dcm.container. When a JetStream stream captures the subject (the registry creates
// one), an event counts as sent only once the stream acknowledged it; with no stream,
// it is a plain NATS publish, flushed to the server.
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

// NewNATSPublisher makes a publisher on nc whose event source is
// "dcm/providers/<providerName>".
func NewNATSPublisher(nc *nats.Conn, providerName string) (*NATSPublisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &NATSPublisher{nc: nc, js: js, source: "dcm/providers/" + providerName}, nil
}

// NewEventID is the id of a new event: one per status change, kept through its retries.
func NewEventID() string { return uuid.NewString() }

// NewEvent builds the CloudEvent eventID for one report; its time and its data's
// timestamp are rep.Observed.
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

// captured reports whether a JetStream stream captures the subject, asking the server at
// most every streamRecheck.
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

// Publish sends one status event and returns nil only when it was delivered: stored by
// the stream that captures the subject (stored true), or, with no such stream, flushed
// to the NATS server (stored false). A report not yet dated (rep.Observed zero) is
// dated now.
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
		// The event id doubles as JetStream's de-duplication id (Nats-Msg-Id): a retry
		// after a lost ack carries the same id and is stored once, within the stream's
		// duplicate window.
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		_, err = p.js.PublishMsg(ctx, msg)
	} else {
		// No stream captures the subject (yet): core NATS, flushed to the server. The
		// republish after sync, reconnect and every resync covers consumers that were
		// not there.
		if err = p.nc.Publish(Subject, body); err == nil {
			err = p.nc.FlushWithContext(ctx)
		}
	}
	if err != nil {
		return false, fmt.Errorf("publishing %s for %s: %w", rep.Status.Status, id, err)
	}
	return stored, nil
}
