package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorderComponents makes components that log their start and stop.
func recorderComponents(names []string, failing string) ([]component, func() []string) {
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	started := make(chan struct{}, len(names))
	var comps []component
	for _, n := range names {
		comps = append(comps, component{n, func(ctx context.Context) error {
			note("start " + n)
			started <- struct{}{}
			if n == failing {
				// Fail only once everything runs, so the stop order is deterministic.
				for range names {
					<-started
				}
				return errors.New("broken")
			}
			<-ctx.Done()
			note("stop " + n)
			return nil
		}})
	}
	return comps, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(log) }
}

func TestRunInOrderStopsInReverse(t *testing.T) {
	comps, log := recorderComponents([]string{"informers", "http", "status"}, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- runInOrder(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), comps) }()
	for len(log()) < 3 { // all three run (their start order is theirs; the stop order is ours)
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := log()[3:]; !slices.Equal(got, []string{"stop status", "stop http", "stop informers"}) {
		t.Errorf("stopped %v", got)
	}
}

func TestRunInOrderAFailureStopsTheRest(t *testing.T) {
	comps, log := recorderComponents([]string{"informers", "http", "status"}, "http")
	err := runInOrder(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), comps)
	if err == nil || err.Error() != "http: broken" {
		t.Fatalf("err %v", err)
	}
	if got := log()[3:]; !slices.Equal(got, []string{"stop status", "stop informers"}) {
		t.Errorf("stopped %v", got)
	}
}
