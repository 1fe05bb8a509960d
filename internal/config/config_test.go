package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

var required = []string{
	"SP_NAME=k8s-container-sp", "SP_ENDPOINT=http://k8s-container-sp:8080",
	"DCM_REGISTRATION_URL=http://service-provider-manager:8080/api/v1alpha1", "SP_NATS_URL=nats://nats:4222",
}

func TestDefaults(t *testing.T) {
	c, err := Load(required)
	if err != nil {
		t.Fatal(err)
	}
	if c.DisplayName != "k8s-container-sp" || c.Kubernetes.Namespace != "default" || c.Kubernetes.ExternalServiceType != "LoadBalancer" ||
		c.Monitor.DebounceMS != 500 || c.Monitor.ResyncPeriod != 10*time.Minute || c.Server.Address != ":8080" ||
		c.Server.ShutdownTimeout != 25*time.Second || c.Server.ReadTimeout != 15*time.Second || c.Server.WriteTimeout != 35*time.Second ||
		c.Server.IdleTimeout != 60*time.Second || c.Server.RequestTimeout != 30*time.Second || c.Server.MaxInFlight != 64 ||
		c.Monitor.StatusResendAfter != 15*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	if c.Kubernetes.MaxStaleness != 5*time.Second {
		t.Errorf("SP_K8S_MAX_STALENESS default %s, want 5s", c.Kubernetes.MaxStaleness)
	}
	if c.Kubernetes.QPS >= 0 || c.Kubernetes.Burst != 200 {
		t.Errorf("SP_K8S_QPS default %v (want negative: no client-side limiter), SP_K8S_BURST %d", c.Kubernetes.QPS, c.Kubernetes.Burst)
	}
	if c.Monitor.LeaderLease != "k8s-container-sp-status" || c.Monitor.Identity == "" {
		t.Errorf("derived defaults: lease %q identity %q", c.Monitor.LeaderLease, c.Monitor.Identity)
	}
	if other, _ := Load(required); other.Monitor.Identity == c.Monitor.Identity {
		t.Errorf("two replicas on one host share the identity %q", c.Monitor.Identity)
	}
}

// The memory limits' defaults are the ones their arithmetic is done for (beside
// container.DefaultMaxObjectBytes).
func TestLimitsDefaults(t *testing.T) {
	c, err := Load(required)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.ContainerMaxBytes != container.DefaultMaxObjectBytes || c.Limits.MaxContainers != container.DefaultMaxContainers {
		t.Errorf("limits %+v, want %d bytes and %d containers", c.Limits, container.DefaultMaxObjectBytes, container.DefaultMaxContainers)
	}
}

func TestOverrides(t *testing.T) {
	c, err := Load(append(required, "SP_DISPLAY_NAME=K8s", "SP_REGION=eu-1", "SP_ZONE=eu-1a", "SP_K8S_NAMESPACE=dcm",
		"SP_K8S_KUBECONFIG=/kc", "SP_K8S_EXTERNAL_SVC_TYPE=NodePort", "SP_MONITOR_DEBOUNCE_MS=0", "SP_MONITOR_RESYNC_PERIOD=1m",
		"SP_MONITOR_STATUS_RESEND_AFTER=0", "SP_SERVER_ADDRESS=127.0.0.1:9000", "SP_SERVER_REQUEST_TIMEOUT=5s", "SP_K8S_CREATE_TIMEOUT=5s"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DisplayName != "K8s" || c.Region != "eu-1" || c.Zone != "eu-1a" || c.Kubernetes.Namespace != "dcm" ||
		c.Kubernetes.Kubeconfig != "/kc" || c.Kubernetes.ExternalServiceType != "NodePort" || c.Monitor.DebounceMS != 0 ||
		c.Monitor.ResyncPeriod != time.Minute || c.Server.Address != "127.0.0.1:9000" || c.Server.RequestTimeout != 5*time.Second ||
		c.Monitor.StatusResendAfter != 0 {
		t.Errorf("overrides: %+v", c)
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want []string // substrings of the one error message
	}{
		{"nothing set", nil, []string{"SP_NAME", "SP_ENDPOINT", "DCM_REGISTRATION_URL", "SP_NATS_URL"}},
		{"bad values", append(required[:1:1], "SP_ENDPOINT=k8s-container-sp:8080", "DCM_REGISTRATION_URL=http://r/api",
			"SP_NATS_URL=http://nats:4222", "SP_K8S_NAMESPACE=Bad_NS", "SP_K8S_EXTERNAL_SVC_TYPE=ClusterIP", "SP_MONITOR_DEBOUNCE_MS=-1",
			"SP_MONITOR_STATUS_RESEND_AFTER=-1s"),
			[]string{"SP_ENDPOINT", "SP_NATS_URL", "SP_K8S_NAMESPACE", "SP_K8S_EXTERNAL_SVC_TYPE", "SP_MONITOR_DEBOUNCE_MS",
				"SP_MONITOR_STATUS_RESEND_AFTER"}},
		{"a missing variable does not hide bad values", []string{"SP_ENDPOINT=nope", "SP_NATS_URL=nats://n:4222",
			"DCM_REGISTRATION_URL=http://r/api", "SP_K8S_NAMESPACE=Bad_NS", "SP_SERVER_IDLE_TIMEOUT=later"},
			[]string{"SP_NAME", "SP_ENDPOINT", "SP_K8S_NAMESPACE", "SP_SERVER_IDLE_TIMEOUT"}},
		{"unparsable duration", append(required, "SP_SERVER_READ_TIMEOUT=soon"), []string{"SP_SERVER_READ_TIMEOUT"}},
		{"unknown pod security profile", append(required, "SP_K8S_POD_SECURITY=privileged"), []string{"SP_K8S_POD_SECURITY"}},
		{"zero timeout", append(required, "SP_SERVER_WRITE_TIMEOUT=0s"), []string{"SP_SERVER_WRITE_TIMEOUT"}},
		// The reference provider's write timeout (15 s) under a 30 s request: a slow
		// create would succeed and its client get EOF.
		{"write timeout shorter than the request", append(required, "SP_SERVER_WRITE_TIMEOUT=15s"),
			[]string{"SP_SERVER_WRITE_TIMEOUT (15s) must be more than SP_SERVER_REQUEST_TIMEOUT (30s)"}},
		{"request timeout shorter than a create", append(required, "SP_SERVER_REQUEST_TIMEOUT=10s"),
			[]string{"SP_SERVER_REQUEST_TIMEOUT (10s) must be at least SP_K8S_CREATE_TIMEOUT (20s)"}},
		{"in-flight cap", append(required, "SP_SERVER_MAX_IN_FLIGHT=0"), []string{"SP_SERVER_MAX_IN_FLIGHT"}},
		// The earlier defaults: a create in flight at SIGTERM was cut at 15 s of its 20.
		{"shutdown shorter than a create", append(required, "SP_SERVER_SHUTDOWN_TIMEOUT=15s"),
			[]string{"SP_SERVER_SHUTDOWN_TIMEOUT (15s) must be at least SP_K8S_CREATE_TIMEOUT (20s)"}},
		{"container size limit below a minimal container", append(required, "SP_CONTAINER_MAX_BYTES=1000"),
			[]string{"SP_CONTAINER_MAX_BYTES: must be at least 2048"}},
		{"no containers", append(required, "SP_MAX_CONTAINERS=0"), []string{"SP_MAX_CONTAINERS: must be 1 or more"}},
		{"no reservation window", append(required, "SP_K8S_RESERVE_WINDOW=0s"), []string{"SP_K8S_RESERVE_WINDOW: must be more than 0"}},
		{"no staleness bound", append(required, "SP_K8S_MAX_STALENESS=0s"), []string{"SP_K8S_MAX_STALENESS: must be more than 0"}},
		{"QPS 0 (client-go's 5)", append(required, "SP_K8S_QPS=0"), []string{"SP_K8S_QPS: must not be 0"}},
		{"a limiter without a burst", append(required, "SP_K8S_QPS=50", "SP_K8S_BURST=0"), []string{"SP_K8S_BURST: must be at least 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.env)
			if err == nil {
				t.Fatal("want an error")
			}
			if strings.Contains(err.Error(), "SP_MONITOR_LEADER_LEASE") {
				t.Errorf("error %q blames a setting that was not set", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

// selfSigned writes a PEM certificate and key for cn into dir and returns their paths.
func selfSigned(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestSecurity(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, empty := write("token", "  s3cret\n"), write("empty", " \n\t")
	cert, key := selfSigned(t, dir, "one")
	_, otherKey := selfSigned(t, dir, "two")
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name string
		env  []string
		want []string // substrings of the error; none: valid
		sec  Security // when valid
	}{
		{name: "off by default"},
		{name: "token file", env: []string{"SP_API_TOKEN_FILE=" + token}, sec: Security{APITokenFile: token}},
		{name: "certificate and key", env: []string{"SP_SERVER_TLS_CERT_FILE=" + cert, "SP_SERVER_TLS_KEY_FILE=" + key},
			sec: Security{TLSCertFile: cert, TLSKeyFile: key}},
		{name: "all three", env: []string{"SP_API_TOKEN_FILE=" + token, "SP_SERVER_TLS_CERT_FILE=" + cert, "SP_SERVER_TLS_KEY_FILE=" + key},
			sec: Security{APITokenFile: token, TLSCertFile: cert, TLSKeyFile: key}},
		{name: "empty token file", env: []string{"SP_API_TOKEN_FILE=" + empty}, want: []string{"SP_API_TOKEN_FILE", "is empty"}},
		{name: "missing token file", env: []string{"SP_API_TOKEN_FILE=" + missing}, want: []string{"SP_API_TOKEN_FILE", missing}},
		{name: "certificate without key", env: []string{"SP_SERVER_TLS_CERT_FILE=" + cert}, want: []string{"SP_SERVER_TLS_KEY_FILE", "both or neither"}},
		{name: "key without certificate", env: []string{"SP_SERVER_TLS_KEY_FILE=" + key}, want: []string{"SP_SERVER_TLS_CERT_FILE", "both or neither"}},
		{name: "missing certificate file", env: []string{"SP_SERVER_TLS_CERT_FILE=" + missing, "SP_SERVER_TLS_KEY_FILE=" + key},
			want: []string{"SP_SERVER_TLS_CERT_FILE", missing}},
		{name: "key of another certificate", env: []string{"SP_SERVER_TLS_CERT_FILE=" + cert, "SP_SERVER_TLS_KEY_FILE=" + otherKey},
			want: []string{"SP_SERVER_TLS_CERT_FILE", "not a certificate and its key"}},
		{name: "not PEM", env: []string{"SP_SERVER_TLS_CERT_FILE=" + token, "SP_SERVER_TLS_KEY_FILE=" + token},
			want: []string{"SP_SERVER_TLS_CERT_FILE", "not a certificate and its key"}},
		{name: "reported with the other problems", env: []string{"SP_API_TOKEN_FILE=" + empty, "SP_SERVER_TLS_CERT_FILE=" + cert, "SP_K8S_NAMESPACE=Bad_NS"},
			want: []string{"SP_API_TOKEN_FILE", "SP_SERVER_TLS_KEY_FILE", "SP_K8S_NAMESPACE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(append(required[:len(required):len(required)], tc.env...))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.Security != tc.sec {
					t.Errorf("security %+v, want %+v", c.Security, tc.sec)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

func TestUnreadableTokenFileNamesTheUID(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads any file")
	}
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("s3cret"), 0o000); err != nil {
		t.Fatal(err)
	}
	_, err := Load(append(required[:len(required):len(required)], "SP_API_TOKEN_FILE="+p))
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "uid") {
		t.Errorf("error %v, want permission denied naming the uid", err)
	}
}

// The leader ConfigMap lives beside the container records: a name in their space is refused.
func TestLeaderLeaseIsNeverAContainerRecord(t *testing.T) {
	for _, env := range [][]string{
		{"SP_NAME=dcm-container-sp"}, // leader ConfigMap dcm-container-sp-status: the record of id sp-status
		{"SP_MONITOR_LEADER_LEASE=dcm-container-x"},
	} {
		_, err := Load(append(required[:len(required):len(required)], env...))
		if err == nil || !strings.Contains(err.Error(), "would be the record of container") {
			t.Errorf("%v: %v", env, err)
		}
	}
	if _, err := Load(append(required[:len(required):len(required)], "SP_NAME=dcm-container-sp", "SP_MONITOR_LEADER_LEASE=sp-leader")); err != nil {
		t.Errorf("an explicit leader ConfigMap outside the records: %v", err)
	}
}

// Every bad variable is one line of the error, in the operator's terms: the value as
// written and what it must be, never Go's parse error (strconv.ParseInt: ...).
func TestOneLinePerBadVariable(t *testing.T) {
	_, err := Load([]string{
		"SP_ENDPOINT=http://sp:8080", "DCM_REGISTRATION_URL=", "SP_NATS_URL=http://a:4222, nats://b:4222,c",
		"SP_MONITOR_DEBOUNCE_MS=abc", "SP_SERVER_READ_TIMEOUT=soon", "SP_SERVER_MAX_IN_FLIGHT=99999999999999999999",
		"SP_TOTAL_CPU=-1", "SP_TOTAL_NODES=-2", "SP_K8S_EXTERNAL_SVC_TYPE=Ingress", "SP_K8S_QPS=abc", "SP_K8S_BURST=1e40",
		"SP_LOG_LEVEL=verbose",
	})
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %v (%T), want *Error", err, err)
	}
	want := map[string]string{
		"SP_NAME":                  "SP_NAME: required, not set: provider name, the DCM registry's key and the source of its status events (e.g. k8s-container-sp)",
		"DCM_REGISTRATION_URL":     "DCM_REGISTRATION_URL: required, set but empty: where DCM takes provider registrations, API base with its version: today's DCM's environment agent (e.g. http://dcm-environment-agent:8080/api/v1alpha1) or an older DCM's registry",
		"SP_NATS_URL":              `SP_NATS_URL="http://a:4222, nats://b:4222,c": each comma-separated URL must be a nats, tls, ws or wss URL with a host (not "http://a:4222", "c")`,
		"SP_MONITOR_DEBOUNCE_MS":   `SP_MONITOR_DEBOUNCE_MS="abc": not a whole number of milliseconds`,
		"SP_SERVER_READ_TIMEOUT":   `SP_SERVER_READ_TIMEOUT="soon": not a duration (a number with a unit: 500ms, 30s, 5m, 1h30m)`,
		"SP_SERVER_MAX_IN_FLIGHT":  `SP_SERVER_MAX_IN_FLIGHT="99999999999999999999": too large for a whole number of requests`,
		"SP_TOTAL_CPU":             "SP_TOTAL_CPU: must not be negative",
		"SP_TOTAL_NODES":           "SP_TOTAL_NODES: must not be negative",
		"SP_K8S_EXTERNAL_SVC_TYPE": `SP_K8S_EXTERNAL_SVC_TYPE="Ingress": must be LoadBalancer, NodePort or None (external ports refused)`,
		"SP_K8S_QPS":               `SP_K8S_QPS="abc": not a number`, // was "not a valid float32"
		"SP_K8S_BURST":             `SP_K8S_BURST="1e40": not a whole number`,
		"SP_LOG_LEVEL":             `SP_LOG_LEVEL="verbose": must be debug, info, warn or error`,
	}
	got := map[string]string{}
	for _, line := range cerr.Problems {
		key := problemKey(line)
		if _, dup := got[key]; dup {
			t.Errorf("%s has two lines: %q and %q", key, got[key], line)
		}
		got[key] = line
	}
	for key, line := range want {
		if got[key] != line {
			t.Errorf("%s:\n got %q\nwant %q", key, got[key], line)
		}
	}
	for key, line := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("unexpected problem %q", line)
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid configuration:\n  ") || strings.Count(msg, "\n") != len(want) {
		t.Errorf("not one line per variable:\n%s", msg)
	}
	for _, internal := range []string{"strconv", "ParseInt", "time: ", "parsing"} {
		if strings.Contains(msg, internal) {
			t.Errorf("the message shows Go internals (%s):\n%s", internal, msg)
		}
	}
}

// The leader-lease message blames the variable that made the name: SP_MONITOR_LEADER_LEASE
// when it is set (and does not tell the operator to set it), else SP_NAME.
func TestLeaderLeaseMessageBlamesTheRightVariable(t *testing.T) {
	cases := []struct {
		env  []string
		want string
	}{
		{[]string{"SP_NAME=dcm-container-sp"}, `SP_NAME="dcm-container-sp" makes the leader ConfigMap "dcm-container-sp-status", which would be the record of container "sp-status" (names starting with "dcm-container-" are container records); set SP_MONITOR_LEADER_LEASE to another name, or choose another SP_NAME`},
		{[]string{"SP_MONITOR_LEADER_LEASE=dcm-container-x"}, `SP_MONITOR_LEADER_LEASE="dcm-container-x": would be the record of container "x" (names starting with "dcm-container-" are container records); choose another name`},
		{[]string{"SP_MONITOR_LEADER_LEASE=Bad_Lease"}, `SP_MONITOR_LEADER_LEASE="Bad_Lease": is not a Kubernetes object name`},
		{[]string{"SP_NAME=Bad_Name"}, `SP_NAME="Bad_Name" makes the leader ConfigMap "Bad_Name-status", which is not a Kubernetes object name`},
		// Two reasons, one line.
		{[]string{"SP_MONITOR_LEADER_LEASE=dcm-container-X"}, `SP_MONITOR_LEADER_LEASE="dcm-container-X": is not a Kubernetes object name`},
	}
	for _, tc := range cases {
		_, err := Load(append(required[:len(required):len(required)], tc.env...))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || !strings.HasPrefix(cerr.Problems[0], tc.want) {
			t.Errorf("%v:\n got %v\nwant %s", tc.env, err, tc.want)
			continue
		}
		if set := strings.HasPrefix(tc.env[0], "SP_MONITOR_LEADER_LEASE="); set && strings.Contains(err.Error(), "set SP_MONITOR_LEADER_LEASE") {
			t.Errorf("%v: tells the operator to set a variable that is set: %v", tc.env, err)
		}
	}
}

// Settings is Config's tags: every variable once, each with its meaning.
func TestSettingsDescribeEveryVariable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings() {
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Help == "" {
			t.Errorf("%s has no help tag", s.Name)
		}
	}
	for _, name := range []string{"SP_NAME", "SP_ENDPOINT", "DCM_REGISTRATION_URL", "SP_NATS_URL", "SP_MONITOR_DEBOUNCE_MS",
		"SP_SERVER_TLS_KEY_FILE", "SP_TOTAL_NODES", "SP_K8S_POD_SECURITY"} {
		if !seen[name] {
			t.Errorf("%s missing", name)
		}
	}
}

func TestOneLineEach(t *testing.T) {
	got := oneLineEach([]string{"SP_A: x", `SP_B="1": y`, "SP_A (3s) must be z", "SP_C: w"})
	want := []string{"SP_A: x; SP_A (3s) must be z", `SP_B="1": y`, "SP_C: w"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNumberProblems(t *testing.T) {
	for value, want := range map[string]string{
		"abc":  `SP_K8S_QPS="abc": not a number`,
		"1e40": `SP_K8S_QPS="1e40": too large a number`,
	} {
		_, err := Load(append(required[:len(required):len(required)], "SP_K8S_QPS="+value))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0] != want {
			t.Errorf("SP_K8S_QPS=%s: %v, want %s", value, err, want)
		}
	}
}

func TestLogLevel(t *testing.T) {
	for value, want := range map[string]slog.Level{
		"": slog.LevelInfo, "debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
		"DEBUG": slog.LevelDebug, "Warn": slog.LevelWarn,
	} {
		env := required[:len(required):len(required)]
		if value != "" {
			env = append(env, "SP_LOG_LEVEL="+value)
		}
		c, err := Load(env)
		if err != nil {
			t.Fatalf("SP_LOG_LEVEL=%s: %v", value, err)
		}
		if c.Level() != want {
			t.Errorf("SP_LOG_LEVEL=%s: level %s, want %s", value, c.Level(), want)
		}
	}
	// Go's level names beyond the four (an offset, "warning") are refused, not guessed.
	for _, value := range []string{"verbose", "info+2", "warning", "trace", " info"} {
		if _, err := Load(append(required[:len(required):len(required)], "SP_LOG_LEVEL="+value)); err == nil ||
			!strings.Contains(err.Error(), "SP_LOG_LEVEL=") {
			t.Errorf("SP_LOG_LEVEL=%q: %v, want refused", value, err)
		}
	}
}

// SP_SERVER_ADDRESS is checked with the other settings, not by the listen at start: a
// bad address is one line among the others' problems.
func TestServerAddress(t *testing.T) {
	cases := []struct {
		addr string
		want string // the problem; "": valid
	}{
		{":8080", ""},
		{"", ""},
		{"127.0.0.1:9000", ""},
		{"[::1]:8080", ""},
		{"[fe80::1%eth0]:8080", ""},
		{"localhost:8080", ""},
		{"sp.example.com:443", ""},
		{"My-Host:8080", ""},
		{":0", ""},
		{"0.0.0.0:65535", ""},
		{"nonsense", `SP_SERVER_ADDRESS="nonsense": must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)`},
		{"8080", `SP_SERVER_ADDRESS="8080": must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)`},
		{"::1:8080", `SP_SERVER_ADDRESS="::1:8080": must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)`},
		{"localhost:", `SP_SERVER_ADDRESS="localhost:": the port "" is not a number from 0 to 65535`},
		{":http", `SP_SERVER_ADDRESS=":http": the port "http" is not a number from 0 to 65535`},
		{":65536", `SP_SERVER_ADDRESS=":65536": the port "65536" is not a number from 0 to 65535`},
		{":-1", `SP_SERVER_ADDRESS=":-1": the port "-1" is not a number from 0 to 65535`},
		{"bad_host:8080", `SP_SERVER_ADDRESS="bad_host:8080": the host "bad_host" is not an IP address or a host name`},
		{"http://sp:8080", `SP_SERVER_ADDRESS="http://sp:8080": must be host:port or :port (e.g. :8080, 127.0.0.1:8080, [::1]:8080)`},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			c, err := Load(append(required[:len(required):len(required)], "SP_SERVER_ADDRESS="+tc.addr))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Server.Address != tc.addr && !(tc.addr == "" && c.Server.Address == ":8080") { // set but empty: the default
					t.Errorf("address %q, want %q", c.Server.Address, tc.addr)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) || !slices.Equal(cerr.Problems, []string{tc.want}) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// Every problem is listed, sorted by variable name, whatever the order of the
// environment and of the checks: the same settings give the same message.
func TestProblemsSortedByVariable(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want []string // the variables, in the message's order
	}{
		{"a bad address and another bad setting", append(required[:len(required):len(required)],
			"SP_SERVER_ADDRESS=nonsense", "SP_K8S_NAMESPACE=Bad_NS"),
			[]string{"SP_K8S_NAMESPACE", "SP_SERVER_ADDRESS"}},
		{"nothing set", nil, []string{"DCM_REGISTRATION_URL", "SP_ENDPOINT", "SP_NAME", "SP_NATS_URL"}},
		{"parse and value problems mixed", []string{"SP_NAME=sp", "SP_ENDPOINT=http://sp:8080", "SP_NATS_URL=nats://n:4222",
			"SP_SERVER_READ_TIMEOUT=soon", "SP_LOG_LEVEL=verbose", "SP_SERVER_ADDRESS=:99999", "SP_MONITOR_DEBOUNCE_MS=abc",
			"SP_K8S_EXTERNAL_SVC_TYPE=Ingress", "SP_TOTAL_CPU=-1"},
			[]string{"DCM_REGISTRATION_URL", "SP_K8S_EXTERNAL_SVC_TYPE", "SP_LOG_LEVEL", "SP_MONITOR_DEBOUNCE_MS",
				"SP_SERVER_ADDRESS", "SP_SERVER_READ_TIMEOUT", "SP_TOTAL_CPU"}},
		{"two problems of one variable stay one line", append(required[:len(required):len(required)],
			"SP_SERVER_WRITE_TIMEOUT=10s", "SP_SERVER_REQUEST_TIMEOUT=15s", "SP_K8S_CREATE_TIMEOUT=20s", "SP_K8S_NAMESPACE=Bad_NS"),
			[]string{"SP_K8S_NAMESPACE", "SP_SERVER_REQUEST_TIMEOUT", "SP_SERVER_WRITE_TIMEOUT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, env := range [][]string{tc.env, reversed(tc.env)} {
				_, err := Load(env)
				var cerr *Error
				if !errors.As(err, &cerr) {
					t.Fatalf("error %v (%T), want *Error", err, err)
				}
				var got []string
				for _, line := range cerr.Problems {
					got = append(got, problemKey(line))
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("variables %q, want %q:\n%v", got, tc.want, err)
				}
			}
		})
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
