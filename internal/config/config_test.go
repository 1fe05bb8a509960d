package config

import (
	"strings"
	"testing"
	"time"
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
		c.Server.ShutdownTimeout != 15*time.Second || c.Server.ReadTimeout != 15*time.Second || c.Server.WriteTimeout != 15*time.Second ||
		c.Server.IdleTimeout != 60*time.Second || c.Server.RequestTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	if c.Monitor.LeaderLease != "k8s-container-sp-status" || c.Monitor.Identity == "" {
		t.Errorf("derived defaults: lease %q identity %q", c.Monitor.LeaderLease, c.Monitor.Identity)
	}
	if other, _ := Load(required); other.Monitor.Identity == c.Monitor.Identity {
		t.Errorf("two replicas on one host share the identity %q", c.Monitor.Identity)
	}
}

func TestOverrides(t *testing.T) {
	c, err := Load(append(required, "SP_DISPLAY_NAME=K8s", "SP_REGION=eu-1", "SP_ZONE=eu-1a", "SP_K8S_NAMESPACE=dcm",
		"SP_K8S_KUBECONFIG=/kc", "SP_K8S_EXTERNAL_SVC_TYPE=NodePort", "SP_MONITOR_DEBOUNCE_MS=0", "SP_MONITOR_RESYNC_PERIOD=1m",
		"SP_SERVER_ADDRESS=127.0.0.1:9000", "SP_SERVER_REQUEST_TIMEOUT=5s"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DisplayName != "K8s" || c.Region != "eu-1" || c.Zone != "eu-1a" || c.Kubernetes.Namespace != "dcm" ||
		c.Kubernetes.Kubeconfig != "/kc" || c.Kubernetes.ExternalServiceType != "NodePort" || c.Monitor.DebounceMS != 0 ||
		c.Monitor.ResyncPeriod != time.Minute || c.Server.Address != "127.0.0.1:9000" || c.Server.RequestTimeout != 5*time.Second {
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
			"SP_NATS_URL=http://nats:4222", "SP_K8S_NAMESPACE=Bad_NS", "SP_K8S_EXTERNAL_SVC_TYPE=ClusterIP", "SP_MONITOR_DEBOUNCE_MS=-1"),
			[]string{"SP_ENDPOINT", "SP_NATS_URL", "SP_K8S_NAMESPACE", "SP_K8S_EXTERNAL_SVC_TYPE", "SP_MONITOR_DEBOUNCE_MS"}},
		{"a missing variable does not hide bad values", []string{"SP_ENDPOINT=nope", "SP_NATS_URL=nats://n:4222",
			"DCM_REGISTRATION_URL=http://r/api", "SP_K8S_NAMESPACE=Bad_NS", "SP_SERVER_IDLE_TIMEOUT=later"},
			[]string{"SP_NAME", "SP_ENDPOINT", "SP_K8S_NAMESPACE", "SP_SERVER_IDLE_TIMEOUT"}},
		{"unparsable duration", append(required, "SP_SERVER_READ_TIMEOUT=soon"), []string{"SP_SERVER_READ_TIMEOUT"}},
		{"unknown pod security profile", append(required, "SP_K8S_POD_SECURITY=privileged"), []string{"SP_K8S_POD_SECURITY"}},
		{"zero timeout", append(required, "SP_SERVER_WRITE_TIMEOUT=0s"), []string{"SP_SERVER_WRITE_TIMEOUT"}},
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
