package localstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dcm-project/k8s-container-sp/internal/app"
	"github.com/dcm-project/k8s-container-sp/internal/buildinfo"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// Stack is a running local stack.
type Stack struct {
	Dir         string
	Kubeconfig  string
	NATSURL     string
	RegistryURL string
	ServiceURL  string
	// CACert is the certificate a client trusts for ServiceURL when the service serves
	// HTTPS (SP_SERVER_TLS_CERT_FILE); empty for plain HTTP.
	CACert     string
	Namespace  string
	ProviderID string
	LogFile    string

	// ImageRegistry is the registry on this machine the service resolves images through
	// with kwok ("" with a real node, whose registry it uses, or the user's settings).
	ImageRegistry string
	images        *imageregistry.Local

	// RealNode is the real kubelet the service's containers run on (REAL_NODE=1), or nil:
	// then kwok plays the kubelet.
	RealNode *harness.RealNode

	cluster  *harness.Cluster
	nats     *harness.NATS
	registry *harness.Registry
	stopApp  func()
	events   *nats.Conn
}

// Start brings everything up. environ holds the user's settings: SP_K8S_KUBECONFIG,
// SP_NATS_URL and DCM_REGISTRATION_URL choose existing parts instead of local ones; any
// other SP_ setting goes to the service; REAL_NODE=1 adds a real node (or reuses the one
// `make cluster-up REAL_NODE=1` joined to SP_K8S_KUBECONFIG's cluster) and makes the
// service's namespace send every pod there. Progress goes to progress.
//
// The settings are checked first, before anything starts (a cluster takes a while to
// come up for nothing). On error, whatever was started is stopped again.
func Start(ctx context.Context, dir string, environ []string, progress io.Writer) (*Stack, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	s := &Stack{Dir: dir, Namespace: orDefault(env["SP_K8S_NAMESPACE"], "dcm-containers")}
	addr := orDefault(env["SP_SERVER_ADDRESS"], "127.0.0.1:8080")
	s.ServiceURL = "http://" + addr
	if cert := env["SP_SERVER_TLS_CERT_FILE"]; cert != "" {
		s.ServiceURL, s.CACert = "https://"+addr, cert
	}
	// The parts this stack starts itself are not there yet: stand-ins of the right form.
	early := parts{orDefault(env["SP_K8S_KUBECONFIG"], standIns.kubeconfig),
		orDefault(env["SP_NATS_URL"], standIns.natsURL), orDefault(env["DCM_REGISTRATION_URL"], standIns.registryURL), ""}
	if _, err := config.Load(s.settings(env, addr, early)); err != nil {
		return nil, err
	}
	fmt.Fprintln(progress, "local: starting the stack (the first run builds Kubernetes and the registry: 10-20 minutes)")
	if err := s.start(ctx, env, addr, progress); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// standIns fill the settings of the parts the stack starts itself, for the check before
// anything runs.
var standIns = parts{kubeconfig: "/local/kubeconfig", natsURL: "nats://127.0.0.1:4222", registryURL: "http://127.0.0.1:1/api/v1alpha1"}

type parts struct{ kubeconfig, natsURL, registryURL, imageMirror string }

// settings is the service's environment: ours, the user's SP_ settings over them, and
// where the parts are.
func (s *Stack) settings(env map[string]string, addr string, p parts) []string {
	out := []string{
		"SP_NAME=k8s-container-sp", "SP_DISPLAY_NAME=Kubernetes Container Service Provider (local)",
		"SP_ENDPOINT=" + s.ServiceURL, "SP_SERVER_ADDRESS=" + addr,
		// The banner's example runs a test image (example.invalid/web:v1); your own
		// SP_IMAGE_REGISTRIES replaces this.
		"SP_IMAGE_REGISTRIES=" + harness.ImageRegistries,
	}
	if p.imageMirror != "" {
		out = append(out, "SP_IMAGE_MIRRORS=*="+p.imageMirror)
	}
	for k, v := range env {
		if strings.HasPrefix(k, "SP_") {
			out = append(out, k+"="+v)
		}
	}
	return append(out, "SP_K8S_KUBECONFIG="+p.kubeconfig, "SP_K8S_NAMESPACE="+s.Namespace,
		"SP_NATS_URL="+p.natsURL, "DCM_REGISTRATION_URL="+p.registryURL)
}

// start starts the parts and the service; the caller stops what started on error.
func (s *Stack) start(ctx context.Context, env map[string]string, addr string, progress io.Writer) error {
	dir := s.Dir
	// Every run starts from scratch: a fresh cluster, NATS store and registry database.
	for _, sub := range []string{"cluster", "nats", "registry", "realnode", "images"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		return fmt.Errorf("%s is taken (%v): stop what uses it or set SP_SERVER_ADDRESS", addr, err)
	} else {
		ln.Close()
	}

	bins, err := harness.EnsureBinaries(ctx, progress)
	if err != nil {
		return err
	}
	if s.Kubeconfig = env["SP_K8S_KUBECONFIG"]; s.Kubeconfig == "" {
		if s.cluster, err = harness.Start(ctx, harness.Options{Dir: filepath.Join(dir, "cluster"), Progress: progress}); err != nil {
			return err
		}
		s.Kubeconfig = s.cluster.Kubeconfig
	} else {
		fmt.Fprintf(progress, "local: using the cluster of %s\n", s.Kubeconfig)
	}
	if env["REAL_NODE"] == "1" {
		if err := s.startRealNode(ctx, progress); err != nil {
			return err
		}
	} else if err := ensureNamespace(ctx, s.Kubeconfig, s.Namespace, false); err != nil {
		return err
	}
	if s.NATSURL = env["SP_NATS_URL"]; s.NATSURL == "" {
		if s.nats, err = harness.StartNATS(filepath.Join(dir, "nats")); err != nil {
			return err
		}
		s.NATSURL = s.nats.URL
		fmt.Fprintf(progress, "local: NATS with JetStream on %s\n", s.NATSURL)
	}
	if s.RegistryURL = env["DCM_REGISTRATION_URL"]; s.RegistryURL == "" {
		if s.registry, err = harness.StartRegistry(bins.Registry, filepath.Join(dir, "registry"), s.NATSURL, false); err != nil {
			return err
		}
		s.RegistryURL = s.registry.URL
		fmt.Fprintf(progress, "local: DCM registry (service-provider-manager %s) on %s\n", harness.RegistryVersion, s.RegistryURL)
	}

	mirror, err := s.imageMirror(ctx, env, progress)
	if err != nil {
		return err
	}
	cfg, err := config.Load(s.settings(env, addr, parts{s.Kubeconfig, s.NATSURL, s.RegistryURL, mirror}))
	if err != nil {
		return err
	}
	s.LogFile = filepath.Join(dir, "k8s-container-sp.log")
	logf, err := os.Create(s.LogFile)
	if err != nil {
		return err
	}
	rc, err := app.RESTConfig(cfg)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(logf, nil))
	klog.SetSlogLogger(log) // client-go's logs too go to the log file, not the terminal
	// Health's version: "local", with the commit the service was built from when Go
	// stamped one (make run's go build does; go test does not).
	a, err := app.New(cfg, rc, buildinfo.Labelled("local"), log)
	if err != nil {
		return err
	}
	appCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(appCtx, nil) }()
	s.stopApp = func() {
		cancel()
		<-done
		logf.Close()
	}
	// Ready means: caches synced and registered with the registry.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := a.Registrar().State()
		if a.Store().Synced() && st.Phase == registration.Registered {
			s.ProviderID = st.ProviderID
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("the service stopped: %v (log: %s)", err, s.LogFile)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 60s (registration: %+v); see %s", st, s.LogFile)
		}
	}
}

// WatchEvents prints every status event as one line until the stack stops.
func (s *Stack) WatchEvents(out io.Writer) error {
	nc, err := nats.Connect(s.NATSURL, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	s.events = nc
	p := &eventPrinter{out: out, last: map[string]printed{}}
	_, err = nc.Subscribe(status.Subject, func(m *nats.Msg) { p.print(m.Data) })
	return err
}

// eventPrinter prints status events one a line. An event that says what the container's
// last printed one said (its data but the timestamp) is marked "(again)": a republish,
// not a change: the resend of a new container's status (SP_MONITOR_STATUS_RESEND_AFTER),
// a new leader's start-up republish, a resync's. The same event delivered twice (a
// retried publish: the same CloudEvent id) is marked "(retry)".
type eventPrinter struct {
	mu   sync.Mutex
	out  io.Writer
	last map[string]printed // by container id; DELETED forgets it
}

type printed struct{ eventID, content string }

func (p *eventPrinter) print(raw []byte) {
	var ev struct {
		ID   string          `json:"id"`
		Time string          `json:"time"`
		Data json.RawMessage `json:"data"`
	}
	var data struct{ ID, Status, Message string } // status.EventData's, as text
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &ev) != nil || json.Unmarshal(ev.Data, &data) != nil || json.Unmarshal(ev.Data, &fields) != nil {
		return
	}
	delete(fields, "timestamp")
	content, _ := json.Marshal(fields) // map keys sorted: the same data, the same bytes
	p.mu.Lock()
	defer p.mu.Unlock()
	mark := ""
	switch last, ok := p.last[data.ID]; {
	case ok && last.eventID == ev.ID:
		mark = "  (retry)"
	case ok && last.content == string(content):
		mark = "  (again)"
	}
	if data.Status == "DELETED" {
		delete(p.last, data.ID)
	} else {
		p.last[data.ID] = printed{ev.ID, string(content)}
	}
	fmt.Fprintf(p.out, "event  %s  %-24s %-8s %s%s\n", eventTime(ev.Time), data.ID, data.Status, data.Message, mark)
}

// eventTimeLayout is RFC 3339 in UTC with milliseconds, always 24 columns: the event's
// own time (RFC 3339 with nanoseconds, their trailing zeros dropped) varies in width,
// and the columns after it would not line up.
const eventTimeLayout = "2006-01-02T15:04:05.000Z"

// eventTime is an event's time in eventTimeLayout; one that is not RFC 3339 is printed
// as it came, padded to the same width.
func eventTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Sprintf("%-*s", len(eventTimeLayout), s)
	}
	return t.UTC().Format(eventTimeLayout)
}

// Stop stops everything Start started, newest first. It is safe on a stack whose Start
// failed part-way (only what started is stopped) and on nil.
func (s *Stack) Stop() {
	if s == nil {
		return
	}
	if s.events != nil {
		s.events.Close()
	}
	if s.stopApp != nil {
		s.stopApp()
	}
	if s.registry != nil {
		s.registry.Stop()
	}
	if s.images != nil {
		_ = s.images.Close()
	}
	if s.nats != nil {
		s.nats.Stop()
	}
	if s.RealNode != nil && s.RealNode.Owned() {
		_ = s.RealNode.Stop()
	}
	if s.cluster != nil {
		s.cluster.Stop()
	}
}

// startRealNode joins a real node to the local cluster, or finds the one already joined to
// SP_K8S_KUBECONFIG's cluster (never to any other cluster: the kubelet would join it),
// and makes the service's namespace a real-node namespace.
func (s *Stack) startRealNode(ctx context.Context, progress io.Writer) error {
	if n, err := harness.LoadRealNode(); err == nil && n.JoinedTo(s.Kubeconfig) {
		s.RealNode = n
		fmt.Fprintf(progress, "local: using the real node %s already joined to this cluster\n", n.Name)
	} else if s.cluster == nil {
		return fmt.Errorf("REAL_NODE=1 with SP_K8S_KUBECONFIG needs a cluster started by `make cluster-up REAL_NODE=1`: " +
			"no real node is joined to it, and the harness never joins one to another cluster")
	} else if s.RealNode, err = harness.StartRealNode(ctx, s.cluster, filepath.Join(s.Dir, "realnode"), progress); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	return ensureNamespace(ctx, s.Kubeconfig, s.Namespace, true)
}

func ensureNamespace(ctx context.Context, kubeconfig, ns string, realNode bool) error {
	rc, err := (&harness.Cluster{Kubeconfig: kubeconfig}).RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if realNode {
		return harness.RealNodeNamespace(ctx, cs, ns)
	}
	return harness.EnsureNamespace(ctx, cs, ns)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
