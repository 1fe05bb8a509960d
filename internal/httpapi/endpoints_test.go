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

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// keepingStore is a cluster of one container: Create keeps what the apiserver would
// answer, Get and List serve it back.
type keepingStore struct {
	obs     container.Observed
	ingress string // the load balancer's ingress, assigned after the create
}

func (s *keepingStore) Create(_ context.Context, _ string, objs container.Objects) (container.Observed, error) {
	s.obs = allocated(objs).Observed()
	return s.obs, nil
}

func (s *keepingStore) read() container.Observed {
	o := s.obs
	if o.Service != nil && s.ingress != "" {
		svc := *o.Service
		svc.ExternalIP = s.ingress
		o.Service = &svc
	}
	return o
}

func (s *keepingStore) Get(context.Context, string) (container.Observed, error) { return s.read(), nil }

func (s *keepingStore) List(string, int) ([]container.Observed, bool, error) {
	return []container.Observed{s.read()}, false, nil
}

func (s *keepingStore) Delete(context.Context, string) error { return nil }

// The create's answer and GET's and LIST's agree on spec.endpoints (and on the rest
// of the spec and the service block): the 201 reads them from the objects the
// apiserver answered with, as GET reads them from the caches. The load balancer's
// ingress, assigned by the cloud after the create, appears on GET and LIST only.
func TestCreateGetAndListAgreeOnEndpoints(t *testing.T) {
	const base = "/api/v1alpha1/containers"
	for _, tc := range []struct {
		name     string
		external corev1.ServiceType
		ports    string
		ingress  string
		want     string // spec.endpoints of the 201
		later    string // spec.endpoints of GET and LIST, when they differ
	}{
		{name: "internal", ports: `{"container_port":8080,"visibility":"internal"},{"container_port":9090,"visibility":"none"}`,
			want: `[{"address":"10.96.0.10","port":8080,"protocol":"TCP","scope":"internal"}]`},
		{name: "external on a LoadBalancer", external: corev1.ServiceTypeLoadBalancer,
			ports: `{"container_port":8080,"visibility":"external"}`, ingress: "203.0.113.9",
			want: `[{"address":"10.96.0.10","port":8080,"protocol":"TCP","scope":"internal"}]`,
			later: `[{"address":"10.96.0.10","port":8080,"protocol":"TCP","scope":"internal"},` +
				`{"address":"203.0.113.9","port":8080,"protocol":"TCP","scope":"external"}]`},
		{name: "external on a NodePort", external: corev1.ServiceTypeNodePort,
			ports: `{"container_port":8080,"visibility":"external"}`,
			want:  `[{"address":"10.96.0.10","port":8080,"protocol":"TCP","scope":"internal"}]`},
		{name: "nothing exposed", ports: `{"container_port":8080,"visibility":"none"}`, want: "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &keepingStore{}
			h, err := NewHandler(Options{
				Store: s, Objects: container.Options{Namespace: "dcm", ExternalServiceType: tc.external},
				Health: func(context.Context) error { return nil }, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			do := func(method, target, body string) map[string]json.RawMessage {
				t.Helper()
				req := httptest.NewRequest(method, target, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
					t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body)
				}
				var out map[string]json.RawMessage
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			created := do("POST", base+"?id=web-1", body(`"image":`, `"network":{"ports":[`+tc.ports+`]},"image":`))
			s.ingress = tc.ingress
			got := do("GET", base+"/web-1", "")
			var list struct{ Containers []map[string]json.RawMessage }
			b, _ := json.Marshal(do("GET", base, ""))
			if err := json.Unmarshal(b, &list); err != nil || len(list.Containers) != 1 {
				t.Fatalf("list: %v %s", err, b)
			}
			later := tc.later
			if later == "" {
				later = tc.want
			}
			for _, c := range []struct {
				what string
				c    map[string]json.RawMessage
				want string
			}{{"201", created, tc.want}, {"GET", got, later}, {"LIST", list.Containers[0], later}} {
				var spec struct{ Endpoints json.RawMessage }
				if err := json.Unmarshal(c.c["spec"], &spec); err != nil {
					t.Fatal(err)
				}
				if e := string(spec.Endpoints); e != c.want && !(e == "" && c.want == "null") {
					t.Errorf("%s: endpoints %s, want %s", c.what, e, c.want)
				}
			}
			if tc.later == "" {
				// Nothing changed in the cluster between them: the same spec and service.
				for _, k := range []string{"spec", "service"} {
					if string(created[k]) != string(got[k]) || string(got[k]) != string(list.Containers[0][k]) {
						t.Errorf("%s differs:\n201  %s\nGET  %s\nLIST %s", k, created[k], got[k], list.Containers[0][k])
					}
				}
			}
		})
	}
}
