package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Options of a run.
type Options struct {
	Seed     uint64
	Duration time.Duration
	// Dir is the run folder: history, events, final state, every log. Emptied first.
	Dir string
	// Out is where reliability.md and reliability.json go (docs for the committed ones).
	Out string
	Log io.Writer
	// MaxStaleness is given to the replicas (SP_K8S_MAX_STALENESS) and is the bound of
	// the check "no 200 for a container deleted long ago"; 0 means 5 s (the default).
	MaxStaleness time.Duration
	// Inject names a bug to build into the service (inject.go), to show the checker
	// catches it; empty for a real run.
	Inject string
}

// DefaultMaxStaleness is the service's default SP_K8S_MAX_STALENESS.
const DefaultMaxStaleness = 5 * time.Second

// quiesceLimit bounds the wait for rest: long enough for an abandoned reservation
// (twice SP_K8S_CREATE_TIMEOUT, 40 s) to be reported and a crashed leader's hold on the
// lock (15 s) to expire, and for Kubernetes' own slowest recovery here: a ReplicaSet
// controller whose pod informer was stale across an apiserver restart never sees the
// creation of a pod it made, and replaces that pod (deleted by a fault) only when its
// expectations expire, 5 minutes after the create (controller.ExpectationsTimeout; seen
// with seed 114630519: "read version: 988 is not as new as written version: 1233"). A
// run that comes to rest sooner does not wait.
const quiesceLimit = 6 * time.Minute

// Run does a whole run and writes the report. An error means the run itself failed
// (set-up, interruption); violations are in the report (Report.OK).
func Run(ctx context.Context, o Options) (*Report, error) {
	dir, err := filepath.Abs(o.Dir) // the registry runs in its own folder: paths must be absolute
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if o.MaxStaleness <= 0 {
		o.MaxStaleness = DefaultMaxStaleness
	}
	// Only a previous run's folder (or an empty one) is emptied: a mistyped -dir must
	// not delete anything else.
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(o.Dir, "plan.json")); err != nil {
			return nil, fmt.Errorf("%s is not a chaos run folder (no plan.json): refusing to empty it", o.Dir)
		}
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	hist, err := NewHistory(filepath.Join(o.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer hist.Close()
	steps := Plan(o.Seed, o.Duration)
	if err := writeJSON(filepath.Join(o.Dir, "plan.json"), steps); err != nil {
		return nil, err
	}
	phases := map[string]time.Duration{}
	t0 := time.Now()
	fmt.Fprintf(o.Log, "chaos: setting up (run folder %s)\n", o.Dir)
	w, err := Setup(ctx, o.Dir, o.Inject, o.MaxStaleness, hist, o.Log)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer w.Close()
	phases["setup"] = time.Since(t0)

	run := RunInfo{Seed: o.Seed, Duration: o.Duration, Started: time.Now(), Dir: o.Dir, Phases: phases, Steps: len(steps), Inject: o.Inject, MaxStaleness: o.MaxStaleness}
	fmt.Fprintf(o.Log, "chaos: world ready in %s; playing %d steps over %s\n", phases["setup"].Round(time.Second), len(steps), o.Duration)
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { w.SampleMetrics(sampling, 10*time.Second); close(sampled) }()
	w.Execute(ctx, steps)
	phases["schedule"] = time.Since(run.Started)
	if err := ctx.Err(); err != nil {
		stopSampling()
		return nil, fmt.Errorf("interrupted: %w", err)
	}

	t1 := time.Now()
	fmt.Fprintln(o.Log, "chaos: schedule done; waiting for the world to come to rest")
	unsettled := w.Quiesce(ctx, quiesceLimit)
	w.WaitRecoveries() // at rest every status agrees, so they end at once
	stopSampling()
	<-sampled
	w.http.CloseIdleConnections()
	w.sample("end")
	final := w.Snapshot(ctx)
	final.Quiesced = len(unsettled) == 0
	final.Unsettled = append(unsettled, final.Unsettled...)
	events, err := w.Rec.ReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the stream back: %w", err)
	}
	phases["quiesce"] = time.Since(t1)
	w.Close()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}

	t2 := time.Now()
	if err := WriteJSONL(filepath.Join(o.Dir, "events.jsonl"), events); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(o.Dir, "final.json"), final); err != nil {
		return nil, err
	}
	in := Input{Run: run, History: hist.Entries(), Events: events, Final: final}
	results := Check(in)
	phases["check"] = time.Since(t2)
	in.Run.Ended = time.Now()
	if err := writeJSON(filepath.Join(o.Dir, "run.json"), in.Run); err != nil {
		return nil, err
	}
	rep := NewReport(in, results)
	return rep, write(rep, o.Out)
}

// Recheck runs the checks again on a finished run's folder and rewrites the report.
func Recheck(dir, out string) (*Report, error) {
	var in Input
	if err := readJSON(filepath.Join(dir, "run.json"), &in.Run); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, "final.json"), &in.Final); err != nil {
		return nil, err
	}
	var err error
	if in.History, err = ReadJSONL[Entry](filepath.Join(dir, "history.jsonl")); err != nil {
		return nil, err
	}
	if in.Events, err = ReadJSONL[Event](filepath.Join(dir, "events.jsonl")); err != nil {
		return nil, err
	}
	rep := NewReport(in, Check(in))
	return rep, write(rep, out)
}

func write(rep *Report, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return rep.Write(filepath.Join(out, "reliability.md"), filepath.Join(out, "reliability.json"))
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
