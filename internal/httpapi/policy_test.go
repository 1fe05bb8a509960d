package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// policyHandler serves the API with a policy; a nil store answer means nothing may
// reach the store.
func policyHandler(t *testing.T, p container.Policy, a *answer) http.Handler {
	t.Helper()
	h, err := NewHandler(Options{
		Store: fakeStore{t: t, a: a}, Policy: p,
		Objects: container.Options{Namespace: "dcm", ExternalServiceType: corev1.ServiceTypeNodePort},
		Health:  func(context.Context) error { return nil },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func post(h http.Handler, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/containers?id=c1", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// What the policy refuses is a 400 problem naming the field and the rule, and nothing
// reaches the store; also beside a schema problem (the validator's path).
func TestPolicyRefusalsAre400sThatChangeNothing(t *testing.T) {
	p := container.Policy{Registries: []string{"quay.io"}, ExternalRefused: true}
	cases := []struct{ name, body, pointer, says string }{
		{"a port scan", body(`"nginx"`, `"10.0.0.1:22/x"`), "#/spec/image/reference", "is an IP address"},
		{"a registry not listed", body(`"nginx"`, `"ghcr.io/x:v1"`), "#/spec/image/reference", "SP_IMAGE_REGISTRIES: quay.io"},
		{"a mesh label", body(`"name":"web"`, `"name":"web","labels":{"sidecar.istio.io/inject":"true"}`, `"nginx"`, `"quay.io/x"`),
			"#/spec/metadata/labels/sidecar.istio.io~1inject", "reserved"},
		{"external refused", body(`"nginx"`, `"quay.io/x"`, `}}}}`, `}},"network":{"ports":[{"container_port":80,"visibility":"external"}]}}}`),
			"#/spec/network/ports/0/visibility", "SP_K8S_EXTERNAL_SVC_TYPE=None"},
		{"beside a schema problem", body(`"nginx"`, `"localhost:5000/x"`, `"service_type"`, `"bogus":1,"service_type"`),
			"#/spec/image/reference", "a loopback name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(policyHandler(t, p, nil), tc.body)
			if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			var pr wireProblem
			if err := json.Unmarshal(rec.Body.Bytes(), &pr); err != nil {
				t.Fatal(err)
			}
			found := deref(pr.Pointer) == tc.pointer && strings.Contains(deref(pr.Detail), tc.says)
			for _, e := range pr.Errors {
				if deref(e.Pointer) == tc.pointer && strings.Contains(e.Detail, tc.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem at %s saying %q: %s", tc.pointer, tc.says, rec.Body)
			}
		})
	}
}

// Mixed visibility exposed: the 201 says what will be exposed, as GET will (it said
// internal for a port the NodePort Service exposed outside the cluster).
func TestCreateAnswerSaysWhatIsExposed(t *testing.T) {
	b := body(`}}}}`, `}},"network":{"ports":[{"container_port":8080,"visibility":"external"},{"container_port":9090,"visibility":"internal"},{"container_port":7070,"visibility":"none"}]}}}`)
	rec := post(policyHandler(t, container.Policy{}, &answer{}), b)
	if rec.Code != http.StatusCreated {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	var c v1alpha1.Container
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	var got []v1alpha1.ContainerPortVisibility
	for _, p := range *c.Spec.Network.Ports {
		got = append(got, p.Visibility)
	}
	if len(got) != 3 || got[0] != "external" || got[1] != "external" || got[2] != "none" {
		t.Errorf("visibilities %v, want [external external none]", got)
	}
	// Refused when the operator says so, naming the internal port.
	rec = post(policyHandler(t, container.Policy{RefuseMixed: true}, nil), b)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "network.ports[1] (port 9090) is internal beside external") {
		t.Errorf("%d: %s", rec.Code, rec.Body)
	}
}
