package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The publisher says whether a stream stored an event (issue 23 item 6): with no stream
// capturing dcm.container an event goes out on plain NATS, delivered to whoever is
// subscribed at that moment, and only a stored DELETED may release its record. Needs
// NATS only, no cluster.
func TestPublisherSaysWhetherAStreamStoredTheEvent(t *testing.T) {
	deleted := status.Report{Status: container.Status{Status: v1alpha1.DELETED, Message: "Container deleted."}}
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"no stream: plain NATS, not stored", false},
		{"the registry's stream: stored", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var url string
			if tc.stream {
				srv, _ := natsWithStream(t)
				url = srv.URL
			} else {
				url = testenv.NATS(t).URL
			}
			sub := newSink(t, url) // a plain subscriber gets it either way
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			pub, err := status.NewNATSPublisher(nc, "k8s-container-sp")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stored, err := pub.Publish(ctx, status.NewEventID(), "gone-1", deleted)
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			if stored != tc.stream {
				t.Errorf("stored = %v, want %v", stored, tc.stream)
			}
			sub.waitStatus("gone-1", "DELETED", "", 10*time.Second)
		})
	}
}
