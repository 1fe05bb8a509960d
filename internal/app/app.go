package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/internal/access"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/election"
	"github.com/dcm-project/k8s-container-sp/internal/httpapi"
	"github.com/dcm-project/k8s-container-sp/internal/image"
	"github.com/dcm-project/k8s-container-sp/internal/metrics"
	"github.com/dcm-project/k8s-container-sp/internal/natslink"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// App is one running provider.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	client  kubernetes.Interface
	store   *store.Store
	handler http.Handler
	server  *http.Server
	nats    *natslink.Link
	podSec  *podSecurity
	// pullSecrets: the keychain images are resolved with (nil: anonymous).
	pullSecrets *image.PullSecrets
	controller  *status.Controller
	election    *election.Election
	registrar   *registration.Registrar
	metrics     *metrics.Metrics
	leading     atomic.Bool
	stop        stopGate // readiness fails once the service stops
	probe       *clusterProbe
	tlsConfig   *tls.Config // nil: plain HTTP
}

// RESTConfig loads the Kubernetes client configuration: the kubeconfig file when set,
// else the in-cluster service account.
// DefaultGOGC is the Go collector's target unless GOGC is set: a collection once the
// heap has grown by half the live heap (mostly the caches), not by all of it.
const DefaultGOGC = 50

func RESTConfig(cfg *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if err := readable(cfg.Kubernetes.Kubeconfig); err != nil {
		return nil, err
	}
	if cfg.Kubernetes.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubernetes.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	// Reads come from caches; writes are a few per create or delete. No client-side
	// limiter unless SP_K8S_QPS sets one (config.Kubernetes.QPS says why).
	rc.QPS, rc.Burst = cfg.Kubernetes.QPS, cfg.Kubernetes.Burst
	// No gzip, as the control plane's own components ask: the apiserver would compress
	// every watch event for this client alone, which on a cluster's network costs both
	// sides more CPU than the bytes it saves.
	rc.DisableCompression = true
	return rc, nil
}

// New builds the provider; Run starts it. New reads only the configuration and the
// files it names (API token, TLS certificate, NATS credentials): it connects to
// nothing. version is reported by the health endpoint.
func New(cfg *config.Config, rc *rest.Config, version string, log *slog.Logger) (*App, error) {
	a := &App{cfg: cfg, log: log}
	a.metrics = metrics.New(metrics.Gauges{
		EventsPending:     func() float64 { return float64(a.controller.Pending()) },
		InformersSynced:   func() bool { return a.store.Synced() },
		NATSConnected:     func() bool { return a.nats.Connected() },
		Leader:            a.Leading,
		RegistrationState: func() string { return string(a.registrar.State().Phase) },
		CacheStale:        func(cache string) float64 { return a.store.Lag(cache).For.Seconds() },
		Caches:            store.Caches,

		// Why the last registration attempt failed, one of a fixed set.
		RegistrationError:  func() string { return string(a.registrar.State().Reason) },
		RegistrationErrors: registration.ReasonLabels(),
	})
	rc = rest.CopyConfig(rc)
	// Per-call deadlines, not rc.Timeout: that one would cut every watch too.
	rc.Timeout = 0
	rc.Wrap(withPerCallDeadline(KubeCallTimeout))
	// Three clients, each counted under its own name (sp_kubernetes_requests_total's
	// client label): the service's, the cache-miss confirmations' and the election's.
	countedAs := func(name string) *rest.Config {
		c := rest.CopyConfig(rc)
		c.Wrap(a.metrics.Transport(name))
		return c
	}
	client, err := kubernetes.NewForConfig(countedAs(metrics.ClientService))
	if err != nil {
		return nil, err
	}
	electionClient, err := kubernetes.NewForConfig(countedAs(metrics.ClientElection))
	if err != nil {
		return nil, err
	}
	a.probe = &clusterProbe{client: client, interval: 5 * time.Second, log: log}
	st, err := store.New(client, cfg.Kubernetes.Namespace, log)
	if err != nil {
		return nil, err
	}
	st.CreateTimeout = cfg.Kubernetes.CreateTimeout
	// A create needs the rest of its time after reserving its id.
	st.ReserveWindow = min(cfg.Kubernetes.ReserveWindow, cfg.Kubernetes.CreateTimeout/2)
	st.MaxStaleness = cfg.Kubernetes.MaxStaleness
	// Confirming cache misses (a GET of an id this replica's cache does not know) has
	// its own client, so its own rate limiter: unknown ids cannot starve other calls.
	confirmRC := countedAs(metrics.ClientConfirm)
	confirmRC.RateLimiter = store.NewConfirmLimiter() // ConfirmQPS, ConfirmBurst
	if st.Confirm, err = kubernetes.NewForConfig(confirmRC); err != nil {
		return nil, err
	}
	registrar, err := registration.New(registration.Options{
		RegistryURL: cfg.RegistrationURL,
		Name:        cfg.Name,
		DisplayName: cfg.DisplayName,
		Endpoint:    cfg.Endpoint,
		Region:      cfg.Region,
		Zone:        cfg.Zone,
		Capacity: registration.Capacity{
			TotalCPU: cfg.Registration.TotalCPU, TotalMemory: cfg.Registration.TotalMemory,
			TotalStorage: cfg.Registration.TotalStorage, TotalNodes: cfg.Registration.TotalNodes,
		},
		Interval:  cfg.Registration.Interval,
		Attempted: a.metrics.RegistrationAttempt,
		// An environment agent sends no token: the registrar warns once it meets one.
		APIToken: cfg.Security.APITokenFile != "",
	}, log)
	if err != nil {
		return nil, err
	}
	apiToken, tlsConfig, err := security(cfg, log)
	if err != nil {
		return nil, err
	}
	a.tlsConfig = tlsConfig
	a.podSec = &podSecurity{client: client, namespace: cfg.Kubernetes.Namespace, configured: cfg.Kubernetes.PodSecurity, log: log}
	images, pullSecrets, err := resolver(cfg, client, log)
	if err != nil {
		return nil, err
	}
	a.pullSecrets = pullSecrets
	handler, err := httpapi.NewHandler(httpapi.Options{
		Store:        st,
		Objects:      cfg.Objects(),
		Policy:       cfg.Policy(),
		PodSecurity:  a.podSec.profile,
		Health:       a.probe.Last,
		Registration: registrar.State,
		Events: func() (bool, int) {
			return a.nats.Connected(), a.controller.Pending()
		},
		Permissions: func() string {
			if missing := st.Access.Missing(); len(missing) > 0 {
				return st.Access.Describe(missing)
			}
			return ""
		},
		APIToken:       apiToken,
		Version:        version,
		RequestTimeout: cfg.Server.RequestTimeout,
		MaxInFlight:    cfg.Server.MaxInFlight,
		// The default: a body is read before it takes an in-flight slot, and every
		// request may be a create (the memory arithmetic beside the limits' defaults).
		MaxBodyReads:      cfg.Server.MaxInFlight,
		MaxContainerBytes: cfg.Limits.ContainerMaxBytes,
		MaxContainers:     cfg.Limits.MaxContainers,
		Containers:        st.Count,
		Images:            images,
		ImageTimeout:      cfg.Images.Timeout,
		Log:               log,
	})
	if err != nil {
		return nil, err
	}
	a.client, a.store, a.registrar = client, st, registrar
	// /metrics beside the API, outside its OpenAPI validation.
	top := http.NewServeMux()
	top.Handle("/metrics", a.metrics.Handler())
	// The probes are logged like the API (at DEBUG: they are polls), so SP_LOG_LEVEL=debug
	// shows what the kubelet asked and was answered.
	top.Handle(httpapi.ReadinessPath, httpapi.Logged(log, httpapi.Readiness(
		a.stop.check(),
		httpapi.Check{Name: "caches", Err: func() error {
			if !st.Synced() {
				return errorString("the informer caches are not synced yet")
			}
			return behind(st.Behind())
		}},
		// A registration the registrar refused is a configuration error the provider
		// cannot fix: not ready, so the operator sees it where rollouts look (the
		// API is then reachable only as a pod; the registrar is asked again every 5 min).
		httpapi.Check{Name: "registration", Err: func() error {
			if st := registrar.State(); st.Phase == registration.Rejected {
				return errorString(st.LastError)
			}
			return nil
		}},
		httpapi.Check{Name: "permissions", Err: func() error {
			if missing := st.Access.Missing(); len(missing) > 0 {
				return errorString(st.Access.Describe(missing))
			}
			return nil
		}},
	)))
	top.Handle(httpapi.LivenessPath, httpapi.Logged(log, httpapi.Liveness()))
	top.Handle("/", a.metrics.Middleware(handler))
	a.handler = top
	if a.nats, err = natslink.New(cfg.NATSURL, cfg.Name+"/"+cfg.Monitor.Identity, cfg.Name, cfg.NATS, log); err != nil {
		return nil, err
	}
	a.controller = status.NewController(st, plantBug(a.nats), st, status.Options{
		Debounce:     time.Duration(cfg.Monitor.DebounceMS) * time.Millisecond,
		MaxWait:      cfg.Monitor.DebounceMaxWait,
		Resync:       cfg.Monitor.ResyncPeriod,
		Settle:       2 * cfg.Kubernetes.CreateTimeout, // a create makes its Deployment, or gives up, within one
		ResendAfter:  cfg.Monitor.StatusResendAfter,
		DrainTimeout: statusStopBudget(cfg) / 2, // the other half: the send in progress, the lock's release
		Republish:    a.nats.Republish(),
		Published:    func(st container.Status) { a.metrics.EventPublished(string(st.Status)) },
		Failed:       a.metrics.EventFailed,
		Images:       images,
	}, log)
	a.election = &election.Election{
		Client: electionClient, Namespace: cfg.Kubernetes.Namespace, Name: cfg.Monitor.LeaderLease, ID: cfg.Monitor.Identity,
		Leader: a.controller, OnChange: a.leading.Store, Log: log,
	}
	a.server = &http.Server{
		Addr:              cfg.Server.Address,
		Handler:           a.handler,
		ReadTimeout:       cfg.Server.ReadTimeout,
		ReadHeaderTimeout: cfg.Server.ReadTimeout,
		WriteTimeout:      cfg.Server.WriteTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    64 << 10, // a request's headers cost at most this (Go's default is 1 MiB)
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return a, nil
}

// behind is the readiness failure of caches that are out of date past their bound:
// which, since when, and why; nil when there are none.
func behind(lags []store.Lag) error {
	if len(lags) == 0 {
		return nil
	}
	msgs := make([]string, len(lags))
	for i, l := range lags {
		msgs[i] = l.String()
	}
	return errorString(strings.Join(msgs, "; "))
}

// Leading reports whether this replica currently runs the status controller.
func (a *App) Leading() bool { return a.leading.Load() }

// Registrar keeps the provider registered with DCM.
func (a *App) Registrar() *registration.Registrar { return a.registrar }

// Controller is the status controller.
func (a *App) Controller() *status.Controller { return a.controller }

// Handler is the HTTP API, for tests that serve it themselves.
func (a *App) Handler() http.Handler { return a.handler }

// Store is the cluster store.
func (a *App) Store() *store.Store { return a.store }

// Run serves until ctx ends, then stops gracefully. If ln is nil it listens on the
// configured address; with SP_SERVER_TLS_CERT_FILE/_KEY_FILE set it serves TLS on ln.
//
// The components start in this order (see runInOrder) and stop in the reverse one: the
// probe of the Kubernetes API (health reports it), the informer caches (everything
// reads them), the permission check, the NATS connection (dialled before what follows
// starts), the pod security profile (decided before the HTTP server starts, so every
// create sees it), the HTTP server, registration (once the server answers), and the
// status controller on the elected replica. Only the NATS dial and the profile hold back
// those after them; the rest run side by side from the start: the HTTP server answers
// while the caches fill (a read answers 503 until they are synced) and the controller
// waits for them itself. On stop, /readyz answers 503 at once (so traffic moves away
// while the API still answers); then the controller delivers what is pending and resigns
// (gives up the leader lock at once), while the API still serves; the HTTP server then
// finishes its requests; the informers and the API probe stop last.
func (a *App) Run(ctx context.Context, ln net.Listener) error {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.Server.Address); err != nil {
			return err
		}
	}
	scheme := "http"
	if a.tlsConfig != nil {
		ln, scheme = tls.NewListener(ln, a.tlsConfig), "https"
	}
	a.log.Info("serving", "address", ln.Addr().String(), "namespace", a.cfg.Kubernetes.Namespace,
		"identity", a.cfg.Monitor.Identity)
	// The HTTP server closes ln when it stops; should the start fail before it, Run does.
	defer ln.Close()
	return runInOrderWithin(ctx, a.log, a.components(ln, scheme), a.cfg.Server.ShutdownTimeout+stopTail)
}

// The stop's budget. With S = SP_SERVER_SHUTDOWN_TIMEOUT and C = SP_K8S_CREATE_TIMEOUT
// (defaults 25 s and 20 s; config refuses S < C), from the moment the stop begins:
//
//	at once        /readyz answers 503, so traffic moves away; the API still answers
//	S − C (5 s)    the status controller delivers what is pending (half of it) and gives
//	               up the leader lock (statusStopBudget; at least 1 s)
//	until S (25 s) the HTTP server stops accepting and finishes its requests: a create
//	               accepted up to S − C after the stop began still has its whole C
//	stopTail (3 s) registration, NATS, the permission check, the informers and the API
//	               probe stop, each left behind if it hangs
//
// So the process exits within S + stopTail (28 s), inside the pod's 30 s grace period
// (deploy/base/deployment.yaml: keep terminationGracePeriodSeconds above it).
const stopTail = 3 * time.Second

// statusStopBudget is how long the status controller's stop may take (S − C, at least 1 s).
func statusStopBudget(cfg *config.Config) time.Duration {
	return max(cfg.Server.ShutdownTimeout-cfg.Kubernetes.CreateTimeout, time.Second)
}

// components are Run's components, in start order; the last stops first.
func (a *App) components(ln net.Listener, scheme string) []component {
	return []component{
		{name: "cluster-probe", run: a.probe.Run},
		{name: "informers", run: a.runInformers},
		{name: "permissions", run: a.checkPermissions},
		{name: "nats", start: a.nats.Start, run: a.nats.Run},
		{name: "pod-security", start: a.podSec.start},
		a.pullSecretsComponent(),
		{name: "http", run: func(ctx context.Context) error { return a.serve(ctx, ln) }},
		{name: "registration", run: func(ctx context.Context) error {
			a.registrar.Run(ctx, selfProbe(scheme+"://"+ln.Addr().String()+"/health"))
			return nil
		}, stopWithin: time.Second},
		{name: "status", run: a.election.Run, stopWithin: statusStopBudget(a.cfg)},
		// Last, so it stops first: /readyz answers 503 before anything else stops.
		a.stop.component(),
	}
}

// runInformers fills the caches and keeps them current until ctx ends.
func (a *App) runInformers(ctx context.Context) error {
	a.store.Start(ctx)
	if a.store.WaitForSync(ctx) {
		a.log.Info("informer caches synced", "namespace", a.cfg.Kubernetes.Namespace)
		a.logKinds()
	}
	<-ctx.Done()
	a.store.Shutdown()
	return nil
}

// logKinds says, once at start, which objects hold the records and the election.
func (a *App) logKinds() {
	a.log.Info(kindsLine(a.cfg.Monitor.LeaderLease))
}

// kindsLine is the start-up line logKinds writes.
func kindsLine(election string) string {
	return fmt.Sprintf("records: ConfigMaps (label %s=%s); election: ConfigMap %s",
		container.LabelRecord, container.RecordValue, election)
}

// checkPermissions asks the apiserver what this identity may do, at start and then
// regularly (a fixed Role clears the alarm): anything missing is one ERROR line naming
// each verb and resource and the Role to apply (repeated at most once a minute), and
// health reports it.
func (a *App) checkPermissions(ctx context.Context) error {
	wasMissing := false
	for {
		wait := 5 * time.Minute
		missing, err := a.store.Access.Check(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			a.log.Warn("cannot check Kubernetes permissions yet", "err", err)
			wait = 5 * time.Second
		case len(missing) > 0:
			a.log.Error("missing Kubernetes permissions: "+a.store.Access.Describe(missing), "missing", access.Names(missing))
			wasMissing, wait = true, time.Minute
		case wasMissing:
			a.log.Info("Kubernetes permissions complete")
			wasMissing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// serve answers HTTP on ln until ctx ends, then lets in-flight requests finish until the
// shutdown timeout after the stop began (see stopTail for the budget).
func (a *App) serve(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- a.server.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	deadline := a.stop.since().Add(a.cfg.Server.ShutdownTimeout)
	a.log.Info("shutting down", "requests_until", deadline, "timeout", a.cfg.Server.ShutdownTimeout.String())
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	err := a.server.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	return err
}

// selfProbe answers once our own server answers: registration waits for it, so the
// registry's first health poll finds us.
func selfProbe(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := selfProbeClient.Do(req) // with TLS: see selfProbeClient
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
}
