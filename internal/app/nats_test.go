package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Dialling NATS is the component's start: a server that does not answer is no error
// (the client keeps trying, events wait), a URL the client refuses is one, naming it.
func TestNATSLinkStart(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, url, err string
	}{
		{"nothing listens: connects later", "nats://127.0.0.1:1", ""},
		{"not a NATS URL", "nats://[bad", "connecting to nats://[bad: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNATSLink(tc.url, "test", "k8s-container-sp", quiet)
			if _, err := n.Publish(context.Background(), "e1", "a", container.Status{Status: v1alpha1.RUNNING}); !errors.Is(err, errNATSNotStarted) {
				t.Errorf("publish before start: %v", err)
			}
			err := n.start(context.Background())
			if (err == nil) != (tc.err == "") || err != nil && !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("start: %v, want %q", err, tc.err)
			}
			if err != nil {
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := n.run(ctx); err != nil || !n.conn.IsClosed() {
				t.Errorf("run: %v, closed %v", err, n.conn.IsClosed())
			}
		})
	}
}
