package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/redact"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
)

// Config is every setting. Each field's tags are the one description of its variable:
// env (name, required), envDefault, help (meaning) and unit; Load reads them, and
// Settings lists them for --help and the error messages, so neither can drift.
type Config struct {
	Name            string `env:"SP_NAME,required,notEmpty" help:"provider name, the DCM registry's key and the source of its status events (e.g. k8s-container-sp)"`
	Endpoint        string `env:"SP_ENDPOINT,required,notEmpty" help:"base URL DCM reaches the provider at (https://... with TLS); the registered endpoint is SP_ENDPOINT/api/v1alpha1/containers"`
	DisplayName     string `env:"SP_DISPLAY_NAME" help:"human name shown by DCM; default SP_NAME"`
	Region          string `env:"SP_REGION" help:"region code sent with the registration"`
	Zone            string `env:"SP_ZONE" help:"zone sent with the registration"`
	RegistrationURL string `env:"DCM_REGISTRATION_URL,required,notEmpty" help:"where DCM takes provider registrations, API base with its version: today's DCM's environment agent (e.g. http://dcm-environment-agent:8080/api/v1alpha1) or an older DCM's registry"`
	NATSURL         string `env:"SP_NATS_URL,required,notEmpty" help:"DCM messaging (NATS) URL(s) for status events, comma-separated (nats://, tls://, ws://, wss://)"`
	// LogLevel is the least level logged (Level reads it).
	LogLevel string `env:"SP_LOG_LEVEL" envDefault:"info" help:"least level of the log lines written: debug, info, warn or error; debug adds, among others, a line per health and probe poll"`

	Kubernetes   Kubernetes
	Limits       Limits
	Monitor      Monitor
	Server       Server
	Registration Registration
	Security     Security
	Tenants      Tenants
	Images       Images
	NATS         NATS
}

// Registration settings.
type Registration struct {
	// Interval between re-registrations, so a registry that lost its data learns us
	// again; 0 registers once.
	Interval time.Duration `env:"SP_REGISTRATION_INTERVAL" envDefault:"5m" help:"re-register this often, so a registry that lost its data learns the provider again; 0 = once"`
	// Capacity sent with the registration, only when set.
	TotalCPU     int    `env:"SP_TOTAL_CPU" unit:"cores" help:"capacity sent with the registration, only when set"`
	TotalMemory  string `env:"SP_TOTAL_MEMORY" help:"capacity sent with the registration, e.g. 512GB or 2TB, only when set"`
	TotalStorage string `env:"SP_TOTAL_STORAGE" help:"capacity sent with the registration, e.g. 10TB, only when set"`
	TotalNodes   int    `env:"SP_TOTAL_NODES" unit:"nodes" help:"capacity sent with the registration, only when set"`
}

// Kubernetes settings.
type Kubernetes struct {
	Namespace string `env:"SP_K8S_NAMESPACE" envDefault:"default" help:"the one namespace every container (and the provider's records and leader election ConfigMap) lives in"`
	// Kubeconfig: empty means in-cluster credentials.
	Kubeconfig string `env:"SP_K8S_KUBECONFIG" help:"kubeconfig file; empty = the in-cluster service account"`
	// ExternalServiceType is the Service type for external ports.
	ExternalServiceType string `env:"SP_K8S_EXTERNAL_SVC_TYPE" envDefault:"LoadBalancer" help:"Service type when a port is external: LoadBalancer or NodePort; None refuses external ports (400 naming the port)"`
	// PodSecurity is the security profile of every pod: baseline, restricted, or auto
	// (restricted when the namespace enforces Pod Security "restricted", else baseline).
	PodSecurity string `env:"SP_K8S_POD_SECURITY" envDefault:"auto" help:"security profile of every pod: baseline, restricted, or auto (restricted when the namespace enforces Pod Security restricted, else baseline)"`
	// CreateTimeout bounds one create (record, Deployment, Service). A record older
	// than twice this with no Deployment is an abandoned create (its creator died).
	CreateTimeout time.Duration `env:"SP_K8S_CREATE_TIMEOUT" envDefault:"20s" help:"bound of one create; a record without a Deployment older than twice this is an abandoned create"`
	// ReserveWindow orders a DELETE after a create that began before it on any replica
	// (store.ReserveWindow explains how).
	ReserveWindow time.Duration `env:"SP_K8S_RESERVE_WINDOW" envDefault:"1s" help:"a create must have reserved its id this long after it began, or it takes the reservation back (503); a DELETE whose cache shows no container looks again, at the Kubernetes API, this long after it began before answering 404, so it never answers 404 while a create that began before it will still make a container; at most half of SP_K8S_CREATE_TIMEOUT is used"`
	// MaxStaleness bounds how out of date a read may be: once a cache's watch has been
	// disconnected this long, reads that need it answer 503 and /readyz fails.
	MaxStaleness time.Duration `env:"SP_K8S_MAX_STALENESS" envDefault:"5s" help:"once a cache's watch of the Kubernetes API has been broken this long, GET and LIST answer 503 and /readyz fails, naming the cache (a watch the apiserver closes is replaced in milliseconds)"`
	// QPS and Burst: client-go's limiter of the provider's Kubernetes requests. Off by
	// default, as SIG API Machinery recommends and controller-runtime does since v0.21:
	// the apiserver's priority and fairness queues and sheds load across its clients,
	// and the provider's own concurrency is bounded (SP_SERVER_MAX_IN_FLIGHT requests,
	// the status controller's workers). A fixed limit capped concurrent deletes well
	// below what the apiserver serves (docs/benchmarks-analysis.md).
	QPS   float32 `env:"SP_K8S_QPS" envDefault:"-1" help:"Kubernetes requests a second the provider's client sends at most (client-go's limiter); negative = no limit, the apiserver's priority and fairness is the limit"`
	Burst int     `env:"SP_K8S_BURST" envDefault:"200" help:"with SP_K8S_QPS > 0: requests the limiter lets through at once"`
}

// Limits bound the provider's memory: the worst case is SP_MAX_CONTAINERS containers of
// SP_CONTAINER_MAX_BYTES each, and the defaults fit the default memory limit (256 MiB;
// the arithmetic is beside container.DefaultMaxObjectBytes). Raising either means
// raising the memory limit: about SP_MAX_CONTAINERS × SP_CONTAINER_MAX_BYTES × 1.8 for
// the caches.
type Limits struct {
	ContainerMaxBytes int `env:"SP_CONTAINER_MAX_BYTES" envDefault:"8192" unit:"bytes" help:"largest container: its Kubernetes objects (Deployment and Service) as JSON; a larger create is refused (400), and the request body limit is this + 65536"`
	MaxContainers     int `env:"SP_MAX_CONTAINERS" envDefault:"5000" unit:"containers" help:"containers the provider holds at most; a create beyond answers 507 (replicas creating at once may overshoot by their creates in flight)"`
}

// Monitor settings (status reporting).
type Monitor struct {
	DebounceMS int `env:"SP_MONITOR_DEBOUNCE_MS" envDefault:"500" unit:"milliseconds" help:"a container's status is sent once it has been quiet this long (0 = at once)"`
	// DebounceMaxWait caps the debounce: a container that keeps changing is still
	// reported at least this often.
	DebounceMaxWait time.Duration `env:"SP_MONITOR_DEBOUNCE_MAX_WAIT" envDefault:"5s" help:"...but never later than this after its first change, so a flapping container is still reported"`
	ResyncPeriod    time.Duration `env:"SP_MONITOR_RESYNC_PERIOD" envDefault:"10m" help:"every container's current status is published again this often; 0 = off"`
	// StatusResendAfter: DCM drops the status events of an instance it has not stored
	// yet, and stores it only after the create answered and its own commit is done.
	// 15 s covers a slow commit with room (docs/reliability-runs.md), and comes well
	// before the next resync.
	StatusResendAfter time.Duration `env:"SP_MONITOR_STATUS_RESEND_AFTER" envDefault:"15s" help:"a new container's current status is sent once more this long after its first status, for a DCM that had not stored the instance yet when that arrived (its events are dropped); 0 = off"`
	// LeaderLease names the ConfigMap the replicas elect the status controller with; default
	// "<SP_NAME>-status".
	LeaderLease string `env:"SP_MONITOR_LEADER_LEASE" help:"ConfigMap the replicas elect the status publisher with (the name keeps its earlier word: an election holds a lease on it); default <SP_NAME>-status; a name starting with dcm-container- is refused"`
	// Identity of this replica in the election; default: host name plus a random suffix.
	Identity string `env:"SP_MONITOR_IDENTITY" help:"this replica's name in that election; default host name + random suffix"`
}

// Server settings.
type Server struct {
	Address string `env:"SP_SERVER_ADDRESS" envDefault:":8080" help:"listen address of the API, health, metrics and probes"`
	// ShutdownTimeout bounds the graceful stop (the budget is beside app.stopTail): the
	// status flush gets SP_SERVER_SHUTDOWN_TIMEOUT − SP_K8S_CREATE_TIMEOUT, requests run
	// until SP_SERVER_SHUTDOWN_TIMEOUT, so a create in flight can finish; the process
	// exits within it + 3 s (the pod's grace period must be longer: 30 s).
	ShutdownTimeout time.Duration `env:"SP_SERVER_SHUTDOWN_TIMEOUT" envDefault:"25s" help:"graceful stop: the status flush gets this minus SP_K8S_CREATE_TIMEOUT, in-flight requests until this after the stop began; at least SP_K8S_CREATE_TIMEOUT; the process exits within this + 3s"`
	ReadTimeout     time.Duration `env:"SP_SERVER_READ_TIMEOUT" envDefault:"15s" help:"reading a request (headers and body)"`
	// WriteTimeout bounds a whole exchange after the headers, answer included, so it
	// must exceed RequestTimeout, which must cover a create (SP_K8S_CREATE_TIMEOUT):
	// otherwise a slow create succeeds and the client gets EOF, and its retry makes a
	// duplicate.
	WriteTimeout   time.Duration `env:"SP_SERVER_WRITE_TIMEOUT" envDefault:"35s" help:"a whole exchange after the headers, answer included; must be more than SP_SERVER_REQUEST_TIMEOUT"`
	IdleTimeout    time.Duration `env:"SP_SERVER_IDLE_TIMEOUT" envDefault:"60s" help:"keep-alive idle timeout"`
	RequestTimeout time.Duration `env:"SP_SERVER_REQUEST_TIMEOUT" envDefault:"30s" help:"time budget of one request, Kubernetes calls included; at least SP_K8S_CREATE_TIMEOUT"`
	// MaxInFlight caps the API requests served at once (503 with Retry-After beyond).
	MaxInFlight int `env:"SP_SERVER_MAX_IN_FLIGHT" envDefault:"64" unit:"requests" help:"API requests served at once; beyond, 503 with Retry-After: 1 (health and probes are never refused)"`
}

// Security settings, all off by default (DCM's registry sends no credentials).
type Security struct {
	// APITokenFile holds the bearer token every /api/v1alpha1/containers request but
	// health must carry; re-read when it changes.
	APITokenFile string `env:"SP_API_TOKEN_FILE" help:"file holding the bearer token every API request but health must carry; re-read when it changes; empty = off"`
	// TLSCertFile and TLSKeyFile (both or neither): serve HTTPS with this PEM pair,
	// re-read when the files change.
	TLSCertFile string `env:"SP_SERVER_TLS_CERT_FILE" help:"PEM certificate (chain): serve HTTPS only, with SP_SERVER_TLS_KEY_FILE (both or neither); re-read when it changes; empty = off"`
	TLSKeyFile  string `env:"SP_SERVER_TLS_KEY_FILE" help:"PEM private key of SP_SERVER_TLS_CERT_FILE"`
}

// Setting describes one environment variable, as Config's tags declare it.
type Setting struct {
	Name     string // the environment variable
	Group    string // "" for the provider's own settings, else Kubernetes, Limits, Monitor, Server, Registration, Security, Tenants or Images
	Default  string // "" when none or derived (Help says which)
	Unit     string // of a whole number, e.g. milliseconds; "" when none
	Required bool
	Help     string
	field    string
	typ      reflect.Type
}

// Settings lists every variable Load reads, in the order of Config's fields.
func Settings() []Setting {
	var out []Setting
	var walk func(t reflect.Type, group string)
	walk = func(t reflect.Type, group string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
				walk(f.Type, f.Name)
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
			if name == "" {
				continue
			}
			out = append(out, Setting{
				Name: name, Group: group, Default: f.Tag.Get("envDefault"), Unit: f.Tag.Get("unit"),
				Required: strings.Contains(","+opts+",", ",required,"), Help: f.Tag.Get("help"),
				field: f.Name, typ: f.Type,
			})
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// Error is an invalid configuration: one problem per line, each naming its variable.
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// Load reads the environment (environ is os.Environ() in production) and validates it.
// The error (an *Error) lists every problem at once, one line per bad variable, in the
// operator's terms: a missing required variable does not hide a bad value elsewhere.
func Load(environ []string) (*Config, error) {
	cfg := &Config{}
	vars := env.ToMap(environ)
	var problems []string
	reported := map[string]bool{} // variables with a parse problem: not validated again
	if err := env.ParseWithOptions(cfg, env.Options{Environment: vars}); err != nil {
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return nil, &Error{Problems: []string{err.Error()}}
		}
		for _, e := range agg.Errors {
			key, msg := parseProblem(e, vars)
			reported[key] = true
			problems = append(problems, msg)
		}
	}
	leaseDerived := cfg.Monitor.LeaderLease == ""
	cfg.defaults()
	for _, p := range cfg.validate(leaseDerived) {
		if !reported[problemKey(p)] {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: sortedByVariable(oneLineEach(problems))}
	}
	return cfg, nil
}

// sortedByVariable orders the problem lines by the variable each starts with, so the
// same settings always give the same message.
func sortedByVariable(problems []string) []string {
	slices.SortStableFunc(problems, func(a, b string) int { return strings.Compare(problemKey(a), problemKey(b)) })
	return problems
}

// oneLineEach joins the problems that start with the same variable into one line.
func oneLineEach(problems []string) []string {
	var out []string
	at := map[string]int{}
	for _, p := range problems {
		key := problemKey(p)
		if i, ok := at[key]; ok && key != "" {
			out[i] += "; " + p
			continue
		}
		at[key] = len(out)
		out = append(out, p)
	}
	return out
}

// parseProblem says what is wrong with one variable the env parser refused, and which
// variable that is: the value as written and what it should be, not Go's parse error.
func parseProblem(err error, vars map[string]string) (key, msg string) {
	var pe env.ParseError
	var notSet env.VarIsNotSetError
	var empty env.EmptyVarError
	switch {
	case errors.As(err, &notSet):
		return notSet.Key, notSet.Key + ": required, not set" + about(notSet.Key)
	case errors.As(err, &empty):
		return empty.Key, empty.Key + ": required, set but empty" + about(empty.Key)
	case errors.As(err, &pe):
		s, ok := settingOfField(pe.Name)
		if !ok {
			return pe.Name, fmt.Sprintf("%s: %v", pe.Name, pe.Err)
		}
		return s.Name, fmt.Sprintf("%s=%q: %s", s.Name, vars[s.Name], s.expects(pe.Err))
	}
	return "", err.Error()
}

// about is ": what the variable is" for a missing one, so the line alone says what to set.
func about(key string) string {
	for _, s := range Settings() {
		if s.Name == key && s.Help != "" {
			return ": " + s.Help
		}
	}
	return ""
}

func settingOfField(field string) (Setting, bool) {
	for _, s := range Settings() {
		if s.field == field {
			return s, true
		}
	}
	return Setting{}, false
}

// expects says what a value of the setting's type must look like.
func (s Setting) expects(err error) string {
	if s.typ == reflect.TypeOf(time.Duration(0)) {
		return "not a duration (a number with a unit: 500ms, 30s, 5m, 1h30m)"
	}
	switch s.typ.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		what := "a whole number"
		if s.Unit != "" {
			what += " of " + s.Unit
		}
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return "too large for " + what
		}
		return "not " + what
	case reflect.Float32, reflect.Float64:
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return "too large a number"
		}
		return "not a number"
	}
	return "not a valid " + s.typ.String()
}

// logLevels are SP_LOG_LEVEL's values.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// Level is the least level to log, from SP_LOG_LEVEL (any case).
func (c *Config) Level() slog.Level {
	return logLevels[strings.ToLower(c.LogLevel)] // validated: info when unset
}

// defaults fills the settings whose default depends on others or on the host.
func (c *Config) defaults() {
	if c.DisplayName == "" {
		c.DisplayName = c.Name
	}
	if c.Monitor.LeaderLease == "" && c.Name != "" {
		c.Monitor.LeaderLease = c.Name + "-status"
	}
	if c.Monitor.Identity == "" {
		host, _ := os.Hostname()
		c.Monitor.Identity = host + "_" + uuid.NewString()[:8]
	}
}

// validate checks the values; leaseDerived says the leader ConfigMap's name came from SP_NAME
// (SP_MONITOR_LEADER_LEASE unset), so a problem with it is blamed on the right variable.
func (c *Config) validate(leaseDerived bool) []string {
	var p []string
	// The URLs are printed redacted: credentials in them (user information, a token in
	// the query) never reach the terminal or the pod's log.
	if err := checkURL(c.Endpoint, "http", "https"); err != nil {
		p = append(p, fmt.Sprintf("SP_ENDPOINT=%q: %v", redact.URL(c.Endpoint), err))
	}
	if err := checkURL(c.RegistrationURL, "http", "https"); err != nil {
		p = append(p, fmt.Sprintf("DCM_REGISTRATION_URL=%q: %v", redact.URL(c.RegistrationURL), err))
	}
	var badNATS []string
	for _, u := range strings.Split(c.NATSURL, ",") {
		if checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss") != nil {
			badNATS = append(badNATS, fmt.Sprintf("%q", redact.URL(strings.TrimSpace(u))))
		}
	}
	if len(badNATS) > 0 && c.NATSURL != "" {
		p = append(p, fmt.Sprintf("SP_NATS_URL=%q: each comma-separated URL must be a nats, tls, ws or wss URL with a host (not %s)",
			redact.URLs(c.NATSURL), strings.Join(badNATS, ", ")))
	}
	if _, ok := logLevels[strings.ToLower(c.LogLevel)]; !ok {
		p = append(p, fmt.Sprintf("SP_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel))
	}
	if msgs := validation.IsDNS1123Label(c.Kubernetes.Namespace); len(msgs) > 0 {
		p = append(p, fmt.Sprintf("SP_K8S_NAMESPACE=%q: not a Kubernetes namespace name: %s", c.Kubernetes.Namespace, strings.Join(msgs, ", ")))
	}
	if t := c.Kubernetes.ExternalServiceType; t != "LoadBalancer" && t != "NodePort" && t != ExternalNone {
		p = append(p, fmt.Sprintf("SP_K8S_EXTERNAL_SVC_TYPE=%q: must be LoadBalancer, NodePort or None (external ports refused)", t))
	}
	if s := c.Kubernetes.PodSecurity; s != "auto" && s != "baseline" && s != "restricted" {
		p = append(p, fmt.Sprintf("SP_K8S_POD_SECURITY=%q: must be auto, baseline or restricted", s))
	}
	if c.Kubernetes.CreateTimeout <= 0 {
		p = append(p, "SP_K8S_CREATE_TIMEOUT: must be more than 0")
	}
	if c.Limits.ContainerMaxBytes < minContainerBytes {
		p = append(p, fmt.Sprintf("SP_CONTAINER_MAX_BYTES: must be at least %d (a minimal container's objects are ~1 KB)", minContainerBytes))
	}
	if c.Limits.MaxContainers < 1 {
		p = append(p, "SP_MAX_CONTAINERS: must be 1 or more")
	}
	if c.Kubernetes.ReserveWindow <= 0 {
		p = append(p, "SP_K8S_RESERVE_WINDOW: must be more than 0")
	}
	if c.Kubernetes.QPS == 0 {
		p = append(p, "SP_K8S_QPS: must not be 0 (client-go would take 5 a second); negative = no limit")
	}
	if c.Kubernetes.QPS > 0 && c.Kubernetes.Burst < 1 {
		p = append(p, "SP_K8S_BURST: must be at least 1 when SP_K8S_QPS is set")
	}
	if c.Kubernetes.MaxStaleness <= 0 {
		p = append(p, "SP_K8S_MAX_STALENESS: must be more than 0")
	}
	if c.Monitor.DebounceMS < 0 {
		p = append(p, "SP_MONITOR_DEBOUNCE_MS: must be 0 or more")
	}
	if c.Monitor.DebounceMaxWait < 0 {
		p = append(p, "SP_MONITOR_DEBOUNCE_MAX_WAIT: must be 0 or more")
	}
	p = append(p, c.Monitor.validateLease(c.Name, leaseDerived)...)
	if c.Server.MaxInFlight < 1 {
		p = append(p, "SP_SERVER_MAX_IN_FLIGHT: must be 1 or more")
	}
	if s := c.Server; s.WriteTimeout > 0 && s.RequestTimeout > 0 && s.WriteTimeout <= s.RequestTimeout {
		p = append(p, fmt.Sprintf("SP_SERVER_WRITE_TIMEOUT (%s) must be more than SP_SERVER_REQUEST_TIMEOUT (%s): the answer is written after the request's work", s.WriteTimeout, s.RequestTimeout))
	}
	if t := c.Kubernetes.CreateTimeout; t > 0 && c.Server.RequestTimeout > 0 && c.Server.RequestTimeout < t {
		p = append(p, fmt.Sprintf("SP_SERVER_REQUEST_TIMEOUT (%s) must be at least SP_K8S_CREATE_TIMEOUT (%s): a create must be able to finish or take its record back within its request", c.Server.RequestTimeout, t))
	}
	if t := c.Kubernetes.CreateTimeout; t > 0 && c.Server.ShutdownTimeout > 0 && c.Server.ShutdownTimeout < t {
		p = append(p, fmt.Sprintf("SP_SERVER_SHUTDOWN_TIMEOUT (%s) must be at least SP_K8S_CREATE_TIMEOUT (%s): a create in flight when the service stops must be able to finish", c.Server.ShutdownTimeout, t))
	}
	if c.Monitor.ResyncPeriod < 0 {
		p = append(p, "SP_MONITOR_RESYNC_PERIOD: must be 0 (off) or more")
	}
	if c.Monitor.StatusResendAfter < 0 {
		p = append(p, "SP_MONITOR_STATUS_RESEND_AFTER: must be 0 (off) or more")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"SP_SERVER_SHUTDOWN_TIMEOUT", c.Server.ShutdownTimeout}, {"SP_SERVER_READ_TIMEOUT", c.Server.ReadTimeout},
		{"SP_SERVER_WRITE_TIMEOUT", c.Server.WriteTimeout}, {"SP_SERVER_IDLE_TIMEOUT", c.Server.IdleTimeout},
		{"SP_SERVER_REQUEST_TIMEOUT", c.Server.RequestTimeout},
	} {
		if d.v <= 0 {
			p = append(p, d.name+": must be more than 0")
		}
	}
	if c.Registration.Interval < 0 {
		p = append(p, "SP_REGISTRATION_INTERVAL: must be 0 (once) or more")
	}
	if c.Registration.TotalCPU < 0 {
		p = append(p, "SP_TOTAL_CPU: must not be negative")
	}
	if c.Registration.TotalNodes < 0 {
		p = append(p, "SP_TOTAL_NODES: must not be negative")
	}
	if m := c.Registration.TotalMemory; m != "" && !sizePattern.MatchString(m) {
		p = append(p, fmt.Sprintf("SP_TOTAL_MEMORY=%q: must look like 2TB or 512GB", m))
	}
	if m := c.Registration.TotalStorage; m != "" && !sizePattern.MatchString(m) {
		p = append(p, fmt.Sprintf("SP_TOTAL_STORAGE=%q: must look like 10TB or 512GB", m))
	}
	if err := checkAddress(c.Server.Address); err != nil {
		p = append(p, fmt.Sprintf("SP_SERVER_ADDRESS=%q: %v", c.Server.Address, err))
	}
	p = append(p, c.Security.validate()...)
	p = append(p, c.Tenants.validate()...)
	p = append(p, c.Images.validate()...)
	p = append(p, c.NATS.validate(c.NATSURL)...)
	return p
}

// validateLease checks the leader ConfigMap's name. Derived from SP_NAME, a bad name is
// SP_NAME's doing, and the message says so rather than blaming a variable not set.
func (m Monitor) validateLease(name string, derived bool) []string {
	lease := m.LeaderLease
	if lease == "" { // only when SP_NAME is missing, which is reported already
		return nil
	}
	// Said as SP_MONITOR_LEADER_LEASE="x": <reason>, or SP_NAME="y" makes the leader
	// ConfigMap "y-status", which <reason>.
	say := func(reason string) string {
		if derived {
			return fmt.Sprintf("SP_NAME=%q makes the leader ConfigMap %q, which %s; set SP_MONITOR_LEADER_LEASE to another name, or choose another SP_NAME",
				name, lease, reason)
		}
		return fmt.Sprintf("SP_MONITOR_LEADER_LEASE=%q: %s; choose another name", lease, reason)
	}
	var reasons []string
	if msgs := validation.IsDNS1123Subdomain(lease); len(msgs) > 0 {
		reasons = append(reasons, fmt.Sprintf("is not a Kubernetes object name (%s)", strings.Join(msgs, ", ")))
	}
	// The leader ConfigMap shares the namespace with the container records: a name in
	// their space would be the record of some container id (SP_NAME=dcm-container-sp
	// makes it the record of id "sp-status").
	if prefix := container.RecordName(""); strings.HasPrefix(lease, prefix) {
		reasons = append(reasons, fmt.Sprintf("would be the record of container %q (names starting with %q are container records)",
			strings.TrimPrefix(lease, prefix), prefix))
	}
	if len(reasons) == 0 {
		return nil
	}
	return []string{say(strings.Join(reasons, ", and "))}
}

// validate reads the files now, so a missing, unreadable or empty token or a broken
// certificate stops the service at start rather than failing its first request.
func (s Security) validate() []string {
	var p []string
	if s.APITokenFile != "" {
		if _, err := secretfile.LoadToken(s.APITokenFile); err != nil {
			p = append(p, "SP_API_TOKEN_FILE: "+err.Error())
		}
	}
	switch {
	case (s.TLSCertFile == "") != (s.TLSKeyFile == ""):
		p = append(p, "SP_SERVER_TLS_CERT_FILE / SP_SERVER_TLS_KEY_FILE: set both or neither")
	case s.TLSCertFile != "":
		if _, err := secretfile.LoadKeyPair(s.TLSCertFile, s.TLSKeyFile); err != nil {
			p = append(p, "SP_SERVER_TLS_CERT_FILE / SP_SERVER_TLS_KEY_FILE: "+err.Error())
		}
	}
	return p
}

// minContainerBytes is the smallest SP_CONTAINER_MAX_BYTES: a container with no env,
// command, args or labels has objects of ~1 KB.
const minContainerBytes = 2048

var sizePattern = regexp.MustCompile(`^[0-9]+(MB|GB|TB|PB)$`)

// checkAddress checks a listen address: host:port, the port a number from 0 to 65535
// (0: any free port), the host empty (every interface), an IP address or a host name.
func checkAddress(addr string) error {
	const form = "must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(form)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("the port %q is not a number from 0 to 65535", port)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("the host %q is not an IP address or a host name", host)
	}
	return nil
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	for _, s := range schemes {
		if u.Scheme == s && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("must be a %s URL with a host", strings.Join(schemes, " or "))
}

// problemKey is the variable a problem line starts with.
func problemKey(p string) string {
	i := strings.IndexFunc(p, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') })
	if i < 0 {
		return p
	}
	return p[:i]
}
