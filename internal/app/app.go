// Package app assembles the provider from its configuration: Kubernetes client, store
// (informer caches), HTTP API, NATS and the status reporter (run by the elected
// replica); and runs it until its context ends, then stops gracefully. The binary and
// the integration tests both use it, so tests run what ships.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/httpapi"
	"github.com/dcm-project/k8s-container-sp/internal/metrics"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
	"github.com/dcm-project/k8s-container-sp/internal/status"
	"github.com/dcm-project/k8s-container-sp/internal/store"
)

// App is one running provider.
type App struct {
	cfg       *config.Config
	log       *slog.Logger
	client    kubernetes.Interface
	store     *store.Store
	handler   http.Handler
	server    *http.Server
	nats      *nats.Conn
	reporter  *status.Reporter
	registrar *registration.Registrar
	metrics   *metrics.Metrics
	identity  string
	leading   atomic.Bool
}

// RESTConfig loads the Kubernetes client configuration: the kubeconfig file when set,
// else the in-cluster service account.
func RESTConfig(cfg *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubernetes.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubernetes.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	// Reads come from caches; writes are a few per create. Leave room for bursts of
	// creates without client-side throttling becoming the bottleneck.
	rc.QPS, rc.Burst = 100, 200
	rc.Timeout = 15 * time.Second
	return rc, nil
}

// New builds the provider. version is reported by the health endpoint.
func New(cfg *config.Config, rc *rest.Config, version string, log *slog.Logger) (*App, error) {
	a := &App{cfg: cfg, log: log, identity: cfg.Monitor.Identity}
	a.metrics = metrics.New(metrics.Gauges{
		EventsPending:     func() float64 { return float64(a.reporter.Pending()) },
		InformersSynced:   func() bool { return a.store.Synced() },
		Leader:            a.Leading,
		RegistrationState: func() string { return string(a.registrar.State().Phase) },
	})
	rc = rest.CopyConfig(rc)
	rc.Wrap(a.metrics.Transport)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	st, err := store.New(client, cfg.Kubernetes.Namespace, cfg.Monitor.ResyncPeriod, log)
	if err != nil {
		return nil, err
	}
	st.CreateTimeout = cfg.Kubernetes.CreateTimeout
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
	}, log)
	if err != nil {
		return nil, err
	}
	handler, err := httpapi.NewHandler(httpapi.Options{
		Store: st,
		Objects: container.Options{
			Namespace:           cfg.Kubernetes.Namespace,
			ExternalServiceType: corev1.ServiceType(cfg.Kubernetes.ExternalServiceType),
		},
		Health: func(ctx context.Context) error {
			return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		},
		Registration: func() *v1alpha1.RegistrationState {
			st := registrar.State()
			out := &v1alpha1.RegistrationState{Status: v1alpha1.RegistrationStateStatus(st.Phase)}
			if st.ProviderID != "" {
				out.ProviderId = &st.ProviderID
			}
			if st.LastError != "" {
				out.LastError = &st.LastError
			}
			return out
		},
		Version:        version,
		RequestTimeout: cfg.Server.RequestTimeout,
		Log:            log,
	})
	if err != nil {
		return nil, err
	}
	a.client, a.store, a.registrar = client, st, registrar
	// /metrics beside the API, outside its OpenAPI validation.
	top := http.NewServeMux()
	top.Handle("/metrics", a.metrics.Handler())
	top.Handle("/", a.metrics.Middleware(handler))
	a.handler = top
	if a.identity == "" {
		host, _ := os.Hostname()
		a.identity = host + "_" + uuid.NewString()[:8]
	}
	pub := status.NewNATSPublisher(cfg.Name)
	rep := status.NewReporter(st, client, pub, status.Options{
		Debounce:     time.Duration(cfg.Monitor.DebounceMS) * time.Millisecond,
		MaxWait:      cfg.Monitor.DebounceMaxWait,
		Resync:       cfg.Monitor.ResyncPeriod,
		DrainTimeout: cfg.Server.ShutdownTimeout / 2,
		Published:    func(st container.Status) { a.metrics.EventPublished(string(st.Status)) },
		Failed:       a.metrics.EventFailed,
	}, log)
	a.reporter = rep
	// The service starts and serves while NATS is down; events wait for it. Whatever
	// a (re)connected server's consumers missed is published again.
	a.nats, err = nats.Connect(cfg.NATSURL,
		nats.Name(cfg.Name+"/"+a.identity),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ConnectHandler(func(*nats.Conn) { rep.RepublishAll() }),
		nats.ReconnectHandler(func(*nats.Conn) {
			log.Info("NATS reconnected; republishing every status")
			rep.RepublishAll()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("NATS disconnected", "err", err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	if err := pub.Attach(a.nats); err != nil {
		a.nats.Close()
		return nil, err
	}
	a.server = &http.Server{
		Addr:              cfg.Server.Address,
		Handler:           a.handler,
		ReadTimeout:       cfg.Server.ReadTimeout,
		ReadHeaderTimeout: cfg.Server.ReadTimeout,
		WriteTimeout:      cfg.Server.WriteTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return a, nil
}

// Leading reports whether this replica currently runs the status reporter.
func (a *App) Leading() bool { return a.leading.Load() }

// Registrar keeps the provider registered with DCM.
func (a *App) Registrar() *registration.Registrar { return a.registrar }

// Reporter is the status reporter.
func (a *App) Reporter() *status.Reporter { return a.reporter }

// Handler is the HTTP API, for tests that serve it themselves.
func (a *App) Handler() http.Handler { return a.handler }

// Store is the cluster store.
func (a *App) Store() *store.Store { return a.store }

// Run serves until ctx ends, then shuts down within the configured timeout. If ln is nil
// it listens on the configured address.
func (a *App) Run(ctx context.Context, ln net.Listener) error {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.Server.Address); err != nil {
			return err
		}
	}
	informerCtx, stopInformers := context.WithCancel(context.Background())
	a.store.Start(informerCtx)
	go func() {
		if a.store.WaitForSync(ctx) {
			a.log.Info("informer caches synced", "namespace", a.cfg.Kubernetes.Namespace)
		}
	}()

	// The status reporter runs on the elected replica only. Shutdown waits for its flush
	// (leading) before releasing the Lease; once stopping, it is not started again.
	var (
		leadMu   sync.Mutex
		stopping bool
		leading  sync.WaitGroup
	)
	leCtx, stopElection := context.WithCancel(context.Background())
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		status.LeaderLoop(leCtx, a.client, a.cfg.Kubernetes.Namespace, a.cfg.Monitor.LeaderLease, a.identity,
			func(ctx context.Context) {
				leadMu.Lock()
				if stopping {
					leadMu.Unlock()
					return
				}
				leading.Add(1)
				leadMu.Unlock()
				defer leading.Done()
				a.reporter.Run(ctx)
			},
			a.leading.Store, a.log)
	}()

	errc := make(chan error, 1)
	go func() { errc <- a.server.Serve(ln) }()
	// Register in the background once our own server answers.
	regCtx, stopRegistration := context.WithCancel(context.Background())
	regDone := make(chan struct{})
	self := "http://" + ln.Addr().String() + "/health"
	go func() {
		defer close(regDone)
		a.registrar.Run(regCtx, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, self, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	}()
	a.log.Info("serving", "address", ln.Addr().String(), "namespace", a.cfg.Kubernetes.Namespace, "identity", a.identity)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		a.log.Info("shutting down", "timeout", a.cfg.Server.ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout)
		err = a.server.Shutdown(sctx)
		cancel()
	}
	stopRegistration()
	<-regDone
	// Flush pending status events, then hand the Lease over at once.
	a.reporter.Stop()
	leadMu.Lock()
	stopping = true
	leadMu.Unlock()
	leading.Wait()
	stopElection()
	<-electionDone
	a.nats.Close()
	stopInformers()
	a.store.Shutdown()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
