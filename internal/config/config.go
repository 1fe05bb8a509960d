// Package config reads the provider's settings from the environment, with the names DCM
// deployments already use (drop-in for the reference provider), and validates them at
// start-up so a mistake stops the process with a clear message instead of failing later.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
)

// Config is every setting. The README lists them with defaults and meaning.
type Config struct {
	Name            string `env:"SP_NAME,required"`
	Endpoint        string `env:"SP_ENDPOINT,required"`
	DisplayName     string `env:"SP_DISPLAY_NAME"`
	Region          string `env:"SP_REGION"`
	Zone            string `env:"SP_ZONE"`
	RegistrationURL string `env:"DCM_REGISTRATION_URL,required"`
	NATSURL         string `env:"SP_NATS_URL,required"`

	Kubernetes   Kubernetes
	Monitor      Monitor
	Server       Server
	Registration Registration
	Security     Security
}

// Registration settings.
type Registration struct {
	// Interval between re-registrations, so a registry that lost its data learns us
	// again; 0 registers once.
	Interval time.Duration `env:"SP_REGISTRATION_INTERVAL" envDefault:"5m"`
	// Capacity sent with the registration, only when set.
	TotalCPU     int    `env:"SP_TOTAL_CPU"`
	TotalMemory  string `env:"SP_TOTAL_MEMORY"`
	TotalStorage string `env:"SP_TOTAL_STORAGE"`
	TotalNodes   int    `env:"SP_TOTAL_NODES"`
}

// Kubernetes settings.
type Kubernetes struct {
	Namespace string `env:"SP_K8S_NAMESPACE" envDefault:"default"`
	// Kubeconfig: empty means in-cluster credentials.
	Kubeconfig string `env:"SP_K8S_KUBECONFIG"`
	// ExternalServiceType is the Service type for external ports.
	ExternalServiceType string `env:"SP_K8S_EXTERNAL_SVC_TYPE" envDefault:"LoadBalancer"`
	// PodSecurity is the security profile of every pod: baseline, restricted, or auto
	// (restricted when the namespace enforces Pod Security "restricted", else baseline).
	PodSecurity string `env:"SP_K8S_POD_SECURITY" envDefault:"auto"`
	// CreateTimeout bounds one create (record, Deployment, Service). A record older
	// than twice this with no Deployment is an abandoned create (its creator died).
	CreateTimeout time.Duration `env:"SP_K8S_CREATE_TIMEOUT" envDefault:"20s"`
}

// Monitor settings (status reporting).
type Monitor struct {
	DebounceMS int `env:"SP_MONITOR_DEBOUNCE_MS" envDefault:"500"`
	// DebounceMaxWait caps the debounce: a container that keeps changing is still
	// reported at least this often.
	DebounceMaxWait time.Duration `env:"SP_MONITOR_DEBOUNCE_MAX_WAIT" envDefault:"5s"`
	ResyncPeriod    time.Duration `env:"SP_MONITOR_RESYNC_PERIOD" envDefault:"10m"`
	// LeaderLease names the Lease the replicas elect the status reporter with; default
	// "<SP_NAME>-status".
	LeaderLease string `env:"SP_MONITOR_LEADER_LEASE"`
	// Identity of this replica in the election; default: host name plus a random suffix.
	Identity string `env:"SP_MONITOR_IDENTITY"`
}

// Server settings.
type Server struct {
	Address         string        `env:"SP_SERVER_ADDRESS" envDefault:":8080"`
	ShutdownTimeout time.Duration `env:"SP_SERVER_SHUTDOWN_TIMEOUT" envDefault:"15s"`
	ReadTimeout     time.Duration `env:"SP_SERVER_READ_TIMEOUT" envDefault:"15s"`
	// WriteTimeout bounds a whole exchange after the headers, answer included, so it
	// must exceed RequestTimeout, which must cover a create (SP_K8S_CREATE_TIMEOUT):
	// otherwise a slow create succeeds and the client gets EOF, and its retry makes a
	// duplicate.
	WriteTimeout   time.Duration `env:"SP_SERVER_WRITE_TIMEOUT" envDefault:"35s"`
	IdleTimeout    time.Duration `env:"SP_SERVER_IDLE_TIMEOUT" envDefault:"60s"`
	RequestTimeout time.Duration `env:"SP_SERVER_REQUEST_TIMEOUT" envDefault:"30s"`
	// MaxInFlight caps the API requests served at once (503 with Retry-After beyond).
	MaxInFlight int `env:"SP_SERVER_MAX_IN_FLIGHT" envDefault:"64"`
}

// Security settings, all off by default (DCM's registry sends no credentials).
type Security struct {
	// APITokenFile holds the bearer token every /api/v1alpha1/containers request but
	// health must carry; re-read when it changes.
	APITokenFile string `env:"SP_API_TOKEN_FILE"`
	// TLSCertFile and TLSKeyFile (both or neither): serve HTTPS with this PEM pair,
	// re-read when the files change.
	TLSCertFile string `env:"SP_SERVER_TLS_CERT_FILE"`
	TLSKeyFile  string `env:"SP_SERVER_TLS_KEY_FILE"`
}

// Load reads the environment (environ is os.Environ() in production) and validates it.
// The error lists every problem at once: a missing required variable does not hide a
// bad value elsewhere.
func Load(environ []string) (*Config, error) {
	cfg := &Config{}
	var problems []string
	reported := map[string]bool{} // variables with a parse problem: not validated again
	if err := env.ParseWithOptions(cfg, env.Options{Environment: env.ToMap(environ)}); err != nil {
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return nil, fmt.Errorf("invalid configuration: %w", err)
		}
		for _, e := range agg.Errors {
			msg, key := e.Error(), ""
			var pe env.ParseError
			var re env.VarIsNotSetError
			switch {
			case errors.As(e, &pe):
				key = envKey(reflect.TypeOf(Config{}), pe.Name)
				msg = fmt.Sprintf("%s: %v", key, pe.Err)
			case errors.As(e, &re):
				key = re.Key
			}
			reported[key] = true
			problems = append(problems, msg)
		}
	}
	cfg.defaults()
	for _, p := range cfg.validate() {
		if key, _, _ := strings.Cut(p, ":"); !reported[key] {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invalid configuration: %s", strings.Join(problems, "; "))
	}
	return cfg, nil
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

func (c *Config) validate() []string {
	var p []string
	if err := checkURL(c.Endpoint, "http", "https"); err != nil {
		p = append(p, "SP_ENDPOINT: "+err.Error())
	}
	if err := checkURL(c.RegistrationURL, "http", "https"); err != nil {
		p = append(p, "DCM_REGISTRATION_URL: "+err.Error())
	}
	for _, u := range strings.Split(c.NATSURL, ",") {
		if err := checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss"); err != nil {
			p = append(p, "SP_NATS_URL: "+err.Error())
		}
	}
	if msgs := validation.IsDNS1123Label(c.Kubernetes.Namespace); len(msgs) > 0 {
		p = append(p, fmt.Sprintf("SP_K8S_NAMESPACE: %q: %s", c.Kubernetes.Namespace, strings.Join(msgs, ", ")))
	}
	if t := c.Kubernetes.ExternalServiceType; t != "LoadBalancer" && t != "NodePort" {
		p = append(p, fmt.Sprintf("SP_K8S_EXTERNAL_SVC_TYPE: %q must be LoadBalancer or NodePort", t))
	}
	if s := c.Kubernetes.PodSecurity; s != "auto" && s != "baseline" && s != "restricted" {
		p = append(p, fmt.Sprintf("SP_K8S_POD_SECURITY: %q must be auto, baseline or restricted", s))
	}
	if c.Kubernetes.CreateTimeout <= 0 {
		p = append(p, "SP_K8S_CREATE_TIMEOUT: must be more than 0")
	}
	if c.Monitor.DebounceMS < 0 {
		p = append(p, "SP_MONITOR_DEBOUNCE_MS: must be 0 or more")
	}
	if c.Monitor.DebounceMaxWait < 0 {
		p = append(p, "SP_MONITOR_DEBOUNCE_MAX_WAIT: must be 0 or more")
	}
	// Empty only when SP_NAME is missing, which is reported already.
	if msgs := validation.IsDNS1123Subdomain(c.Monitor.LeaderLease); c.Monitor.LeaderLease != "" && len(msgs) > 0 {
		p = append(p, fmt.Sprintf("SP_MONITOR_LEADER_LEASE: %q: %s", c.Monitor.LeaderLease, strings.Join(msgs, ", ")))
	}
	// The leader Lease shares the namespace with the container records: a name in
	// their space would be the record of some container id (SP_NAME=dcm-container-sp
	// makes it the record of id "sp-status").
	if prefix := container.RecordName(""); strings.HasPrefix(c.Monitor.LeaderLease, prefix) {
		p = append(p, fmt.Sprintf("SP_MONITOR_LEADER_LEASE: %q would be the record of container %q (names starting with %q are container records); set SP_MONITOR_LEADER_LEASE or another SP_NAME",
			c.Monitor.LeaderLease, strings.TrimPrefix(c.Monitor.LeaderLease, prefix), prefix))
	}
	if c.Server.MaxInFlight < 1 {
		p = append(p, "SP_SERVER_MAX_IN_FLIGHT: must be 1 or more")
	}
	if s := c.Server; s.WriteTimeout > 0 && s.RequestTimeout > 0 && s.WriteTimeout <= s.RequestTimeout {
		p = append(p, fmt.Sprintf("SP_SERVER_WRITE_TIMEOUT (%s) must be more than SP_SERVER_REQUEST_TIMEOUT (%s): the answer is written after the request's work", s.WriteTimeout, s.RequestTimeout))
	}
	if t := c.Kubernetes.CreateTimeout; t > 0 && c.Server.RequestTimeout > 0 && c.Server.RequestTimeout < t {
		p = append(p, fmt.Sprintf("SP_SERVER_REQUEST_TIMEOUT (%s) must be at least SP_K8S_CREATE_TIMEOUT (%s): a create must be able to finish or roll back within its request", c.Server.RequestTimeout, t))
	}
	if c.Monitor.ResyncPeriod < 0 {
		p = append(p, "SP_MONITOR_RESYNC_PERIOD: must be 0 (off) or more")
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
	if c.Registration.TotalCPU < 0 || c.Registration.TotalNodes < 0 {
		p = append(p, "SP_TOTAL_CPU / SP_TOTAL_NODES: must not be negative")
	}
	if m := c.Registration.TotalMemory; m != "" && !sizePattern.MatchString(m) {
		p = append(p, fmt.Sprintf("SP_TOTAL_MEMORY: %q must look like 2TB or 512GB", m))
	}
	if m := c.Registration.TotalStorage; m != "" && !sizePattern.MatchString(m) {
		p = append(p, fmt.Sprintf("SP_TOTAL_STORAGE: %q must look like 10TB or 512GB", m))
	}
	if c.Server.Address == "" {
		p = append(p, "SP_SERVER_ADDRESS: must not be empty")
	}
	p = append(p, c.Security.validate()...)
	return p
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

// envKey finds the variable name of a (nested) Config field, so a parse error names the
// setting the operator wrote, not a Go field.
func envKey(t reflect.Type, field string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == field {
			if k, _, _ := strings.Cut(f.Tag.Get("env"), ","); k != "" {
				return k
			}
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			if k := envKey(f.Type, field); k != field {
				return k
			}
		}
	}
	return field
}

var sizePattern = regexp.MustCompile(`^[0-9]+(MB|GB|TB|PB)$`)

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	for _, s := range schemes {
		if u.Scheme == s && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("%q must be a %s URL with a host", raw, strings.Join(schemes, "/"))
}
