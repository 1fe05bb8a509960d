package localstack_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/localstack"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// `SP_MONITOR_DEBOUNCE_MS=abc make run` ended in a nil-pointer panic in Stop, and the
// message naming the setting never showed. A bad setting now stops Start before anything
// runs, with the setting named, and stopping what was (not) started is safe.
func TestStartWithABadSettingFailsAtOnce(t *testing.T) {
	// Were the settings ever accepted, the stack would go on to build the control plane:
	// an empty cache and a tools folder that does not exist make that fail at once.
	t.Setenv("SP_HARNESS_CACHE", t.TempDir())
	t.Setenv("SP_HARNESS_TOOLS_DIR", filepath.Join(t.TempDir(), "none"))
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		environ []string
		want    string
	}{
		{"not a number", []string{"SP_MONITOR_DEBOUNCE_MS=abc"}, "SP_MONITOR_DEBOUNCE_MS"},
		{"not a namespace", []string{"SP_K8S_NAMESPACE=Not_A_Name"}, "SP_K8S_NAMESPACE"},
		{"an existing part's URL", []string{"SP_NATS_URL=http://127.0.0.1:4222"}, "SP_NATS_URL"},
		{"a missing certificate", []string{"SP_SERVER_TLS_CERT_FILE=/nonexistent/tls.crt", "SP_SERVER_TLS_KEY_FILE=/nonexistent/tls.key"}, "SP_SERVER_TLS_CERT_FILE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var progress strings.Builder
			s, err := localstack.Start(context.Background(), t.TempDir(), append(c.environ, "SP_SERVER_ADDRESS="+addr), &progress)
			if err == nil {
				s.Stop()
				t.Fatal("Start accepted the settings")
			}
			if s != nil {
				t.Errorf("Start returned a stack with its error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not name %s: %v", c.want, err)
			}
			if progress.Len() > 0 {
				t.Errorf("something started before the settings were checked:\n%s", progress.String())
			}
		})
	}
}

func TestStopIsSafeOnAStackThatNeverStarted(t *testing.T) {
	for _, s := range []*localstack.Stack{nil, {}, {Dir: t.TempDir(), ServiceURL: "http://127.0.0.1:1"}} {
		s.Stop()
	}
}

// With TLS on (SP_SERVER_TLS_CERT_FILE) the banner shows https:// and its commands trust
// the service's certificate; the registry's stay plain HTTP.
func TestBannerFollowsTLS(t *testing.T) {
	cases := []struct {
		name, url, caCert string
		want, not         []string
	}{
		{"plain", "http://127.0.0.1:8080", "", []string{"http://127.0.0.1:8080/api/v1alpha1/containers", "curl -s http://127.0.0.1:8080/api/v1alpha1/containers/hello"},
			[]string{"https://", "--cacert"}},
		{"tls", "https://127.0.0.1:8443", "/etc/sp/tls.crt", []string{"https://127.0.0.1:8443/api/v1alpha1/containers", "https://127.0.0.1:8443/health",
			"curl -s --cacert /etc/sp/tls.crt https://127.0.0.1:8443/api/v1alpha1/containers/hello", "curl -s http://127.0.0.1:9000/api/v1alpha1/service-type-instances/hello-dcm"},
			[]string{"http://127.0.0.1:8443"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &localstack.Stack{ServiceURL: c.url, CACert: c.caCert, RegistryURL: "http://127.0.0.1:9000/api/v1alpha1",
				NATSURL: "nats://127.0.0.1:4222", Namespace: "dcm-containers", ProviderID: "p1"}
			b := localstack.Banner(s)
			for _, w := range c.want {
				if !strings.Contains(b, w) {
					t.Errorf("banner lacks %q:\n%s", w, b)
				}
			}
			for _, n := range c.not {
				if strings.Contains(b, n) {
					t.Errorf("banner has %q:\n%s", n, b)
				}
			}
		})
	}
}
