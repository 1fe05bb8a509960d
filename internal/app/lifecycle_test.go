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
		comps = append(comps, component{name: n, run: func(ctx context.Context) error {
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

// A start runs to its end before anything after it starts; a failed one stops what
// started before it, in reverse order, and nothing after it starts.
func TestRunInOrderStarts(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name     string
		startErr error
		want     []string
		err      string
	}{
		{"a start holds back what follows", nil,
			[]string{"run informers", "start nats", "started nats", "run nats", "run http", "stop http", "stop nats", "stop informers"}, ""},
		{"a failed start stops what started before it", errors.New("no such host"),
			[]string{"run informers", "start nats", "stop informers"}, "nats: no such host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []string
			note := func(s string) {
				mu.Lock()
				log = append(log, s)
				mu.Unlock()
			}
			running := map[string]chan struct{}{"informers": make(chan struct{}, 1), "nats": make(chan struct{}, 1), "http": make(chan struct{}, 1)}
			runner := func(n string) func(context.Context) error {
				return func(ctx context.Context) error {
					note("run " + n)
					running[n] <- struct{}{}
					<-ctx.Done()
					note("stop " + n)
					return nil
				}
			}
			comps := []component{
				{name: "informers", run: runner("informers")},
				{name: "nats", start: func(context.Context) error {
					<-running["informers"] // the note order is deterministic
					note("start nats")
					time.Sleep(20 * time.Millisecond) // http must not start meanwhile
					if tc.startErr != nil {
						return tc.startErr
					}
					note("started nats")
					return nil
				}, run: runner("nats")},
				{name: "pod-security", start: func(context.Context) error { return nil }},
				{name: "http", run: runner("http")},
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error)
			go func() { done <- runInOrder(ctx, quiet, comps) }()
			if tc.startErr == nil {
				<-running["nats"]
				<-running["http"]
				cancel()
			}
			err := <-done
			if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
				t.Errorf("err %v, want %q", err, tc.err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !sameSteps(log, tc.want) {
				t.Errorf("steps %v, want %v", log, tc.want)
			}
		})
	}
}

// sameSteps compares step logs, allowing the runs started side by side ("run nats",
// "run http") in either order.
func sameSteps(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	g, w := slices.Clone(got), slices.Clone(want)
	for _, l := range [][]string{g, w} {
		for i := 0; i+1 < len(l); i++ {
			if l[i] == "run http" && l[i+1] == "run nats" {
				l[i], l[i+1] = l[i+1], l[i]
			}
		}
	}
	return slices.Equal(g, w)
}

// A stop asked for during a start ends the start without an error.
func TestRunInOrderStopDuringAStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	comps := []component{
		{name: "informers", run: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		{name: "pod-security", start: func(ctx context.Context) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}},
		{name: "http", run: func(context.Context) error {
			t.Error("http started after a stop")
			return nil
		}},
	}
	if err := runInOrder(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), comps); err != nil {
		t.Errorf("err %v", err)
	}
}
