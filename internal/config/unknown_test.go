package config

import (
	"slices"
	"strings"
	"testing"
)

// Each unknown name and the setting suggested for it: names DCM's other providers read
// (the environment agent's container provider, its shared settings), a word more, less
// or another, a word misspelt, words run together, the wrong case, and other programs'
// variables, for which nothing is suggested.
func TestNearest(t *testing.T) {
	known := knownNames()
	for _, tc := range []struct{ name, want string }{
		// DCM's environment agent embeds a container provider that reads these.
		{"SP_CONTAINER_NAMESPACE", "SP_K8S_NAMESPACE"},
		{"SP_KUBECONFIG", "SP_K8S_KUBECONFIG"},
		{"SP_DEFAULT_KUBECONFIG", "SP_K8S_KUBECONFIG"},
		{"SP_VM_NAMESPACE", "SP_K8S_NAMESPACE"},
		// A word less, a word more.
		{"SP_NAMESPACE", "SP_K8S_NAMESPACE"},
		{"SP_K8S_EXTERNAL_SERVICE_TYPE", "SP_K8S_EXTERNAL_SVC_TYPE"},
		{"SP_EXTERNAL_SVC_TYPE", "SP_K8S_EXTERNAL_SVC_TYPE"},
		{"SP_SERVER_MAX_IN_FLIGHT_REQUESTS", "SP_SERVER_MAX_IN_FLIGHT"},
		{"SP_MONITOR_DEBOUNCE", "SP_MONITOR_DEBOUNCE_MS"},
		{"SP_REQUEST_TIMEOUT", "SP_SERVER_REQUEST_TIMEOUT"},
		{"SP_CREATE_TIMEOUT", "SP_K8S_CREATE_TIMEOUT"},
		{"SP_TLS_CERT_FILE", "SP_SERVER_TLS_CERT_FILE"}, // the first of two as near, in the settings' order
		{"SP_NATS_CREDS", "SP_NATS_CREDS_FILE"},
		// The prefix is not a word of the name: DCM_REGISTRATION_URL under SP_.
		{"SP_REGISTRATION_URL", "DCM_REGISTRATION_URL"},
		{"SP_DCM_REGISTRATION_URL", "DCM_REGISTRATION_URL"},
		// A word misspelt, words run together or apart, another case.
		{"SP_K8S_NAMESPCE", "SP_K8S_NAMESPACE"},
		{"SP_K8S_NAMESAPCE", "SP_K8S_NAMESPACE"},
		{"SP_MONITOR_RESYNC_PERIOUD", "SP_MONITOR_RESYNC_PERIOD"},
		{"SP_LOGLEVEL", "SP_LOG_LEVEL"},
		{"SP_LOG_LVL", "SP_LOG_LEVEL"},
		{"SP_MAX_EXTERNALPORTS", "SP_MAX_EXTERNAL_PORTS"},
		{"SP_k8s_namespace", "SP_K8S_NAMESPACE"},
		{"SP_K8S__NAMESPACE", "SP_K8S_NAMESPACE"},
		{"SP_IMAGE_REGISTRY", "SP_IMAGE_REGISTRIES"},
		{"SP_MAX_CONTAINER", "SP_MAX_CONTAINERS"},
		{"SP_CONTAINERS_MAX_BYTES", "SP_CONTAINER_MAX_BYTES"},
		// Nothing of the name in any setting: another program's variable, no guess.
		{"SP_HARNESS_CACHE", ""},
		{"SP_FOO", ""},
		{"SP_PORT", ""},
		{"SP_", ""},
		{"SP_X_Y_Z", ""},
	} {
		if got := Nearest(tc.name, known); got != tc.want {
			t.Errorf("Nearest(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Letters alone rank the agent's SP_CONTAINER_NAMESPACE nearer to SP_CONTAINER_MAX_BYTES
// than to SP_K8S_NAMESPACE: why Nearest compares words.
func TestLettersAloneRankPoorly(t *testing.T) {
	u := "SP_CONTAINER_NAMESPACE"
	if a, b := editDistance(u, "SP_CONTAINER_MAX_BYTES"), editDistance(u, "SP_K8S_NAMESPACE"); a >= b {
		t.Errorf("edit distances %d and %d: the comment on Nearest is out of date", a, b)
	}
}

func TestUnknownSettings(t *testing.T) {
	got := UnknownSettings([]string{
		"SP_NAME=x", "SP_K8S_NAMESPACE=dcm", "DCM_REGISTRATION_URL=http://r", // known
		"SP_CONTAINER_NAMESPACE=dcm", "SP_HARNESS_CACHE=/tmp", "SP_LOGLEVEL=debug",
		"SP_CONTAINER_NAMESPACE=again",                             // twice in the environment, named once
		"PATH=/bin", "DCM_OTHER=1", "KUBECONFIG=/kc", "sp_lower=1", // not SP_: another program's
		"SP_EMPTY=", "SP_NO_VALUE",
	})
	want := []Unknown{
		{"SP_CONTAINER_NAMESPACE", "SP_K8S_NAMESPACE"}, {"SP_EMPTY", ""}, {"SP_HARNESS_CACHE", ""},
		{"SP_LOGLEVEL", "SP_LOG_LEVEL"}, {"SP_NO_VALUE", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	if got := UnknownSettings(append(required, "SP_LOG_LEVEL=debug", "HOME=/root")); len(got) != 0 {
		t.Errorf("known settings reported unknown: %v", got)
	}
}

// Every setting is known: none is ever reported, whatever its value.
func TestEverySettingIsKnown(t *testing.T) {
	var environ []string
	for _, s := range Settings() {
		environ = append(environ, s.Name+"=x")
		if Nearest(s.Name, knownNames()) != s.Name {
			t.Errorf("Nearest(%s) is not itself", s.Name)
		}
		if !strings.HasPrefix(s.Name, "SP_") && !strings.HasPrefix(s.Name, "DCM_") {
			t.Errorf("%s: neither SP_ nor DCM_", s.Name)
		}
	}
	if got := UnknownSettings(environ); len(got) != 0 {
		t.Errorf("settings reported unknown: %v", got)
	}
}
