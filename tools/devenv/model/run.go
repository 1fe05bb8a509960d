package model

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// Options configure Run.
type Options struct {
	Sizes []int
	// Exe is the program run once per size as the service's process: it must call
	// ChildMain when given ChildArgs (sp-model does).
	Exe string
	// Dir receives each size's service log (model-<size>.log) and NATS's store.
	Dir      string
	Progress io.Writer
	// Profile: the sizes whose service process writes a CPU profile to Dir.
	Profile []int
}

// Report is what Run measured.
type Report struct {
	When     time.Time    `json:"when"`
	Command  string       `json:"command"`
	Machine  Machine      `json:"machine"`
	Sizes    []SizeResult `json:"sizes"`
	Duration float64      `json:"duration_s"`
}

// Run measures each size in a process of its own (Exe with ChildArgs): the model
// apiserver, NATS (with JetStream and the stream DCM's registry makes, on dcm.*) and
// the event subscriber stay in this process, so the child's memory is the service's.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	r := &Report{When: began.UTC(), Machine: machine()}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: filepath.Join(o.Dir, "nats"), MaxPending: 1 << 30})
	if err != nil {
		return nil, err
	}
	go ns.Start()
	defer func() {
		ns.Shutdown()
		_ = os.RemoveAll(filepath.Join(o.Dir, "nats"))
	}()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("NATS did not start")
	}
	// DCM's registry: registration answered, nothing else.
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = io.WriteString(w, `{"id":"model-provider"}`)
	}))
	defer registry.Close()
	for _, n := range o.Sizes {
		fmt.Fprintf(o.Progress, "model: %d containers\n", n)
		res, err := runSize(ctx, o, n, ns.ClientURL(), registry.URL+"/api/v1alpha1")
		if err != nil {
			return nil, fmt.Errorf("%d containers: %w", n, err)
		}
		fmt.Fprintf(o.Progress, "model: %d containers: synced in %.1f s, RSS %.0f MB idle, %.0f MB after reads, republished in %.1f s\n",
			n, res.SyncedS, mib(res.Idle.RSSBytes), mib(res.AfterReads.RSSBytes), res.RepublishS)
		r.Sizes = append(r.Sizes, res)
	}
	r.Duration = time.Since(began).Seconds()
	return r, nil
}

// ChildArgs are the arguments that make Exe measure one size (see ChildMain).
func ChildArgs(n int, apiserver, natsURL, registry, logPath string) []string {
	return []string{"-child", "-size", strconv.Itoa(n), "-apiserver", apiserver, "-nats", natsURL, "-registry", registry, "-log", logPath}
}

// ChildMain is the child's side: measure the service, print the result as one JSON
// line on stdout; once a line comes on stdin (the parent's reads are done), measure
// this process again and print that as a second line; stop the service once stdin is
// closed (the parent has counted the events by then).
func ChildMain(ctx context.Context, o ServiceOptions, stdin io.Reader, stdout io.Writer) error {
	res, stop, err := MeasureService(ctx, o)
	if err != nil {
		return err
	}
	defer stop()
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(res); err != nil {
		return err
	}
	in := bufio.NewReader(stdin)
	if _, err := in.ReadBytes('\n'); err != nil { // the parent's reads are done
		return nil
	}
	if err := enc.Encode(MeasureAfterReads()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, in)
	return nil
}

// events counts the status events of the modelled containers as they arrive.
type events struct {
	mu       sync.Mutex
	seen     []bool
	distinct int
	total    int
	last     time.Time
}

func (e *events) add(m *nats.Msg) {
	var ev struct{ Data status.EventData }
	if json.Unmarshal(m.Data, &ev) != nil {
		return
	}
	i, ok := IndexOf(ev.Data.ID)
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total++
	if !ok || i >= len(e.seen) {
		return
	}
	if !e.seen[i] {
		e.seen[i] = true
		e.distinct++
		e.last = now
	}
}

func (e *events) state() (distinct, total int, last time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.distinct, e.total, e.last
}

func runSize(ctx context.Context, o Options, n int, natsURL, registryURL string) (SizeResult, error) {
	var res SizeResult
	srv, err := NewServer(Namespace, n, time.Now().Add(-time.Hour))
	if err != nil {
		return res, err
	}
	srv.Log = o.Progress
	api := httptest.NewServer(srv)
	defer func() {
		api.CloseClientConnections()
		api.Close()
	}()

	nc, err := nats.Connect(natsURL)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	// The stream DCM's registry makes (dcm-status on dcm.*), afresh for each size: the
	// service publishes to it with acknowledgements, as it does in production.
	_ = js.DeleteStream(ctx, "dcm-status")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dcm-status", Subjects: []string{"dcm.*"},
		Storage: jetstream.FileStorage, MaxBytes: 1 << 30}); err != nil {
		return res, err
	}
	ev := &events{seen: make([]bool, n)}
	sub, err := nc.Subscribe(status.Subject, ev.add)
	if err != nil {
		return res, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)

	logPath := filepath.Join(o.Dir, fmt.Sprintf("model-%d.log", n))
	args := ChildArgs(n, api.URL, natsURL, registryURL, logPath)
	if slices.Contains(o.Profile, n) {
		args = append(args, "-cpuprofile", filepath.Join(o.Dir, fmt.Sprintf("model-%d.cpu.pprof", n)))
	}
	cmd := exec.CommandContext(ctx, o.Exe, args...)
	cmd.Env = defaultGC(os.Environ())
	cmd.Stderr = o.Progress
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	out := bufio.NewReader(stdout)
	line, err := out.ReadBytes('\n')
	if err != nil {
		return res, fmt.Errorf("the service's process printed no result (see %s): %v", logPath, err)
	}
	if err := json.Unmarshal(line, &res); err != nil {
		return res, fmt.Errorf("the service's process printed %q: %v", line, err)
	}
	if err := MeasureReads(&res, res.URL, n); err != nil {
		return res, err
	}
	var after AfterReads
	if _, err := stdin.Write([]byte("reads done\n")); err != nil {
		return res, err
	}
	if line, err = out.ReadBytes('\n'); err != nil {
		return res, fmt.Errorf("the service's process printed no memory after the reads (see %s): %v", logPath, err)
	}
	if err := json.Unmarshal(line, &after); err != nil {
		return res, fmt.Errorf("the service's process printed %q: %v", line, err)
	}
	res.AfterReads, res.TotalCPUS, res.URL = after.Memory, after.TotalCPUS, ""
	// Every container's event, or 30 s without a new one.
	for last, lastCount := time.Now(), -1; ; time.Sleep(50 * time.Millisecond) {
		d, _, _ := ev.state()
		if d == n {
			break
		}
		if d != lastCount {
			last, lastCount = time.Now(), d
		}
		if time.Since(last) > 30*time.Second {
			break
		}
	}
	d, total, last := ev.state()
	res.ContainersReported, res.EventsReceived = d, total
	if d > 0 {
		res.RepublishS = last.Sub(time.Unix(0, res.SyncedAt)).Seconds()
		if res.RepublishS > 0 {
			res.EventsPerSecond = float64(d) / res.RepublishS
		}
	}
	res.Requests, res.Unknown = srv.Requests(), srv.Unknown()
	return res, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// defaultGC is env without GOMEMLIMIT and with the binary's GOGC: the RSS target is
// measured without a memory limit, the collector set as the binary sets it, whatever
// the environment of the model's run sets.
func defaultGC(env []string) []string {
	return append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "GOMEMLIMIT" || name == "GOGC"
	}), fmt.Sprintf("GOGC=%d", app.DefaultGOGC))
}
