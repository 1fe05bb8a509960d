package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// Report is what a run found, as docs/reports/reliability.json holds it.
type Report struct {
	Run        RunInfo    `json:"run"`
	Reproduce  string     `json:"reproduce"`
	OK         bool       `json:"ok"`
	Operations []Count    `json:"operations"`
	Faults     []Count    `json:"faults"`
	Events     int        `json:"events"`
	IDs        int        `json:"ids"`
	LiveAtRest int        `json:"live_at_rest"`
	Results    []Result   `json:"invariants"`
	Recovery   []Recovery `json:"recovery"`
	Growth     []Growth   `json:"growth"`
	// Heals: what the run had to repair in the control plane itself at rest (heal
	// entries, e.g. a stalled controller-manager restarted; see Quiesce).
	Heals []Entry `json:"heals,omitempty"`
}

// Count is how many actions of one kind ran and what they got.
type Count struct {
	Kind    string         `json:"kind"`
	Via     string         `json:"via,omitempty"`
	N       int            `json:"n"`
	Answers map[string]int `json:"answers,omitempty"`
	// Window: total time faults of this kind kept something away.
	Window time.Duration `json:"window,omitempty"`
}

// NewReport sums up a checked run.
func NewReport(in Input, results []Result) *Report {
	rep := &Report{Run: in.Run, Results: results, Recovery: Recoveries(in.History), Growth: Growths(in.History),
		Events: len(in.Events), LiveAtRest: len(in.Final.Deployments), OK: true,
		Reproduce: fmt.Sprintf("make chaos SEED=%d CHAOS_FLAGS=-duration=%s", in.Run.Seed, in.Run.Duration)}
	if in.Run.Inject != "" {
		rep.Reproduce = fmt.Sprintf("make chaos SEED=%d CHAOS_FLAGS='-duration=%s -inject=%s'", in.Run.Seed, in.Run.Duration, in.Run.Inject)
	}
	rep.Run.Dir = relDir(rep.Run.Dir) // the report is committed: no machine's paths
	for _, r := range results {
		rep.OK = rep.OK && r.OK
	}
	rep.IDs = len(index(in).ids)
	ops, faults := map[string]*Count{}, map[string]*Count{}
	for _, e := range in.History {
		switch e.Type {
		case "heal":
			rep.Heals = append(rep.Heals, e)
		case "op":
			k := e.Kind + "/" + e.Via
			c := ops[k]
			if c == nil {
				c = &Count{Kind: e.Kind, Via: e.Via, Answers: map[string]int{}}
				ops[k] = c
			}
			c.N++
			c.Answers[shortAnswer(e)]++
		case "fault":
			c := faults[e.Kind]
			if c == nil {
				c = &Count{Kind: e.Kind, Answers: map[string]int{}}
				faults[e.Kind] = c
			}
			c.N++
			c.Window += e.End.Sub(e.Start)
			switch {
			case e.Err != "":
				c.Answers["error"]++
			case e.Note != "":
				c.Answers["nothing to hit"]++
			default:
				c.Answers["done"]++
			}
		}
	}
	for _, k := range sortedKeys(ops) {
		rep.Operations = append(rep.Operations, *ops[k])
	}
	for _, k := range sortedKeys(faults) {
		rep.Faults = append(rep.Faults, *faults[k])
	}
	return rep
}

func shortAnswer(e Entry) string {
	switch {
	case e.Kind == OpForeign && e.Err == "":
		return "made"
	case e.Kind == OpHandDelete && e.Err == "":
		return fmt.Sprintf("%d deleted", e.Count)
	case e.Refused:
		return "refused"
	case e.Code == 0:
		return "no answer"
	}
	return fmt.Sprint(e.Code)
}

// Write writes the report as Markdown and JSON.
func (rep *Report) Write(mdPath, jsonPath string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(mdPath, []byte(rep.Markdown()), 0o644)
}

// Markdown is docs/reports/reliability.md.
func (rep *Report) Markdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	r := rep.Run
	p("# Reliability: seeded fault injection\n\n")
	p("Written by `make chaos` (`tools/devenv/cmd/sp-chaos`, `tools/devenv/chaos`; issue 16): the harness control plane with two kwok nodes, NATS with JetStream and the `dcm-status` stream, the real DCM registry, and two replicas of the real service binary; a seeded random schedule of operations and faults; then, once the world is at rest, invariant checks over the history, the stream and the cluster.\n\n")
	verdict := "**PASS**: no invariant was violated."
	if !rep.OK {
		n := 0
		for _, res := range rep.Results {
			if !res.OK {
				n++
			}
		}
		verdict = fmt.Sprintf("**FAIL**: %d invariant(s) violated (details below).", n)
	}
	p("%s\n\n", verdict)
	if r.Inject != "" {
		p("> This run's service had a bug injected on purpose (`-inject %s`: %s), to show that the checker catches it. It is not a result of the service as it is.\n\n", r.Inject, bugs[r.Inject].what)
	}
	p("| | |\n| --- | --- |\n")
	p("| seed | %d |\n| duration of the schedule | %s |\n| reproduce | `%s` |\n", r.Seed, r.Duration, rep.Reproduce)
	p("| run | %s, wall time %s (%s) |\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), (r.Phases["setup"] + r.Ended.Sub(r.Started)).Round(time.Second), phases(r.Phases))
	p("| steps planned | %d |\n| container ids used | %d (%d live at rest) |\n| events on the stream | %d |\n", r.Steps, rep.IDs, rep.LiveAtRest, rep.Events)
	p("| run folder (history.jsonl, events.jsonl, final.json, plan.json, logs) | `%s` |\n\n", r.Dir)

	rep.bounds(p)

	p("## Invariants\n\n| invariant | result | checked | what it checks |\n| --- | --- | --- | --- |\n")
	for _, res := range rep.Results {
		v := "pass"
		if !res.OK {
			v = fmt.Sprintf("**FAIL** (%d)", len(res.Violations))
		}
		p("| %s | %s | %d | %s |\n", res.Name, v, res.Checked, res.What)
	}

	p("\n## Operations\n\n| operation | via | count | answers |\n| --- | --- | --- | --- |\n")
	for _, c := range rep.Operations {
		p("| %s | %s | %d | %s |\n", c.Kind, c.Via, c.N, answers(c.Answers))
	}
	p("\n## Faults\n\n| fault | count | time away (sum) | outcome |\n| --- | --- | --- | --- |\n")
	for _, c := range rep.Faults {
		p("| %s | %d | %s | %s |\n", c.Kind, c.N, c.Window.Round(100*time.Millisecond), answers(c.Answers))
	}

	if len(rep.Heals) > 0 {
		p("\n## The test world healed at rest\n\nNot the service's doing: the run repaired the test world's control plane or DCM's registry as an operator would (see Quiesce), then went on waiting for rest.\n\n| heal | when | why | what | error |\n| --- | --- | --- | --- | --- |\n")
		for _, h := range rep.Heals {
			p("| %s | %s | %s | %s | %s |\n", h.Kind, h.Start.UTC().Format("15:04:05"), h.Note, h.Target, h.Err)
		}
	}
	p("\n## Recovery after faults\n\nFrom the end of a fault (its heal; for pod deletions and fates, the moment they were done) until every status that was pending then had reached the stream (a replica's LIST compared with the last event of each container; a change still in its 0.5 s debounce counts as pending).\n\n")
	p("| fault | n | p50 | p99 | max | not recovered |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, rc := range rep.Recovery {
		p("| %s | %d | %s | %s | %s | %d |\n", rc.Kind, rc.N, rc.P50.Round(time.Millisecond), rc.P99.Round(time.Millisecond), rc.Max.Round(time.Millisecond), rc.Never)
	}

	p("\n## Goroutines and memory per service process\n\nWarm sample: the first one %s after the process was ready (for goroutines, the first such one in the role it ends in: the leader runs the status controller); end: its last sample (at rest, or before it was stopped). Processes that lived less than %s after warming up are listed but not judged.\n\n", warmAfter, minLife)
	p("| process | span | goroutines | RSS MiB | judged |\n| --- | --- | --- | --- | --- |\n")
	for _, g := range rep.Growth {
		p("| %s | %s | %.0f → %.0f | %.0f → %.0f | %v |\n", g.Proc, g.Span.Round(time.Second), g.GoroutinesStart, g.GoroutinesEnd, g.RSSStartMiB, g.RSSEndMiB, g.Judged)
	}

	if !rep.OK {
		p("\n## Violations\n\nTimes are seconds from the start of the schedule; `#n` is the history entry (`history.jsonl`), `seq` the stream sequence.\n")
		for _, res := range rep.Results {
			for i, v := range res.Violations {
				if i == 10 {
					p("\n… and %d more of %q (all in reliability.json)\n", len(res.Violations)-10, res.Name)
					break
				}
				p("\n### %s: %s\n\n", res.Name, v.What)
				if len(v.Excerpt) > 0 {
					p("```\n%s\n```\n", strings.Join(v.Excerpt, "\n"))
				}
			}
		}
	}
	return b.String()
}

// bounds states the two bounds the service promises and this run holds it to (issue 23):
// how stale a 200 may be, and what memory the replicas' containers may take.
func (rep *Report) bounds(p func(string, ...any)) {
	stale := rep.Run.MaxStaleness
	if stale <= 0 {
		stale = DefaultMaxStaleness
	}
	p("## Bounds\n\n")
	p("- **Staleness.** The replicas ran with `SP_K8S_MAX_STALENESS=%s`: once one of a replica's caches has lost its watch for longer than that (or a connected watch has sent nothing, not even a bookmark, for %s), its GET and LIST answer 503 and its /readyz fails, naming the cache. So a 200 describes the cluster as it was at most %s ago after a visible watch failure (%s for a stream that hangs while its connection lives). Checked here by *no stale 200* (the bound plus %s of slack for the answer in flight), under the proxy's blocked and broken watches.\n",
		stale, store.SilenceBound, stale, store.SilenceBound, stalenessSlack)
	p("- **Memory.** The replicas ran with the default limits: at most `SP_MAX_CONTAINERS=%d` containers of at most `SP_CONTAINER_MAX_BYTES=%d` bytes each (their Deployment and Service as JSON); a create past either is refused (507, 400). At those maxima the caches hold about %d MiB (BenchmarkCacheBytesPerMaxSizeContainer), within the default 256 MiB memory limit; `make bench` measures RSS at the limit (docs/reports/benchmarks.md). This run's processes are in *Goroutines and memory* below.\n\n",
		container.DefaultMaxContainers, container.DefaultMaxObjectBytes, container.DefaultMaxContainers*maxSizeCacheBytes>>20)
}

// maxSizeCacheBytes is what one container of DefaultMaxObjectBytes costs in the caches,
// as BenchmarkCacheBytesPerMaxSizeContainer measured it (internal/container/limits.go
// has the arithmetic).
const maxSizeCacheBytes = 9614

func answers(m map[string]int) string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func phases(m map[string]time.Duration) string {
	var parts []string
	for _, k := range []string{"setup", "schedule", "quiesce", "check"} {
		if d, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", k, d.Round(time.Second)))
		}
	}
	return strings.Join(parts, ", ")
}

// relDir is dir relative to the working directory when it is inside it.
func relDir(dir string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return dir
}
