package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/config"
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

// The stop is bounded whatever hangs (issue 23: drain, workers, the leader lock and HTTP could
// together exceed the pod's 30 s grace period): a component past its own stopWithin is
// left behind and the next one stopped; once the whole budget is spent the rest are
// cancelled and not waited for.
func TestRunInOrderStopIsBounded(t *testing.T) {
	const budget = 300 * time.Millisecond
	hang := make(chan struct{}) // never closed until the test ends
	defer close(hang)
	cases := []struct {
		name    string
		comps   func(note func(string)) []component
		stopped []string // the components seen to stop, in order
		within  time.Duration
		logged  []string // in the JSON log: durations as Go writes them (50ms), not nanoseconds
	}{
		{"one hangs past its own bound: the others still stop", func(note func(string)) []component {
			return []component{
				{name: "informers", run: func(ctx context.Context) error { <-ctx.Done(); note("informers"); return nil }},
				{name: "http", run: func(ctx context.Context) error { <-ctx.Done(); note("http"); return nil }},
				{name: "status", run: func(ctx context.Context) error { <-ctx.Done(); <-hang; return nil }, stopWithin: 50 * time.Millisecond},
			}
		}, []string{"http", "informers"}, 50*time.Millisecond + 100*time.Millisecond,
			[]string{`"component":"status","within":"50ms"`}},
		{"one hangs without a bound of its own: the budget ends the stop", func(note func(string)) []component {
			return []component{
				// Stopped after http, so never reached within the budget: whether it would
				// note its stop after the budget ended is a race, so it does not stop at all.
				{name: "informers", run: func(ctx context.Context) error { <-ctx.Done(); <-hang; note("informers"); return nil }},
				{name: "http", run: func(ctx context.Context) error { <-ctx.Done(); <-hang; return nil }},
				{name: "status", run: func(ctx context.Context) error { <-ctx.Done(); note("status"); return nil }},
			}
		}, []string{"status"}, budget + 100*time.Millisecond, []string{`"budget":"300ms"`}},
		{"each slow but within its time: all waited for", func(note func(string)) []component {
			slow := func(n string) func(context.Context) error {
				return func(ctx context.Context) error {
					<-ctx.Done()
					time.Sleep(20 * time.Millisecond)
					note(n)
					return nil
				}
			}
			return []component{{name: "a", run: slow("a")}, {name: "b", run: slow("b"), stopWithin: time.Second}}
		}, []string{"b", "a"}, budget, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var stopped []string
			note := func(s string) { mu.Lock(); stopped = append(stopped, s); mu.Unlock() }
			ctx, cancel := context.WithCancel(context.Background())
			comps := tc.comps(note)
			running := make(chan struct{}, len(comps))
			for i := range comps {
				run := comps[i].run
				comps[i].run = func(ctx context.Context) error { running <- struct{}{}; return run(ctx) }
			}
			done := make(chan error, 1)
			var logs syncBuffer
			go func() { done <- runInOrderWithin(ctx, slog.New(slog.NewJSONHandler(&logs, nil)), comps, budget) }()
			for range comps {
				<-running
			}
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the stop did not end")
			}
			if d := time.Since(start); d > tc.within {
				t.Errorf("the stop took %s, want at most %s", d, tc.within)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(stopped, tc.stopped) {
				t.Errorf("stopped %v, want %v", stopped, tc.stopped)
			}
			for _, w := range tc.logged {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("the log lacks %s:\n%s", w, logs.String())
				}
			}
		})
	}
}

// syncBuffer is a log the components' goroutines may write while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The defaults' stop fits the pod's grace period (deploy/base/deployment.yaml), and a
// create in flight when the stop begins can finish: the HTTP server waits until
// SP_SERVER_SHUTDOWN_TIMEOUT after the stop began, and the status controller's part ends
// SP_K8S_CREATE_TIMEOUT before that.
func TestStopBudgetFitsTheGracePeriod(t *testing.T) {
	cfg, err := config.Load([]string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080",
		"DCM_REGISTRATION_URL=http://r:8080/api/v1alpha1", "SP_NATS_URL=nats://nats:4222"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../deploy/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`terminationGracePeriodSeconds: (\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("deploy/base/deployment.yaml sets no terminationGracePeriodSeconds")
	}
	grace, _ := strconv.Atoi(string(m[1]))
	total := cfg.Server.ShutdownTimeout + stopTail
	if total >= time.Duration(grace)*time.Second {
		t.Errorf("the stop may take %s, the pod's grace period is %ds", total, grace)
	}
	if s, c := cfg.Server.ShutdownTimeout, cfg.Kubernetes.CreateTimeout; s < c || statusStopBudget(cfg) > s-c {
		t.Errorf("shutdown %s, create %s, status stop %s: a create accepted during the status stop cannot finish", s, c, statusStopBudget(cfg))
	}
}
