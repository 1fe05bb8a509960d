package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // to read the registry's own database
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/registration"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/agent"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/proc"
)

// registryProvider is our provider as the registry lists it.
func registryProvider(t *testing.T, reg *harness.Registry) (map[string]any, int) {
	t.Helper()
	r := do(t, http.MethodGet, reg.URL+"/providers", nil)
	if r.Status != 200 {
		t.Fatalf("list providers: %d %s", r.Status, r.Body)
	}
	list, _ := r.JSON["providers"].([]any)
	for _, p := range list {
		if m := p.(map[string]any); m["name"] == "k8s-container-sp" {
			return m, len(list)
		}
	}
	return nil, len(list)
}

func waitHealth(t *testing.T, reg *harness.Registry, want string) map[string]any {
	t.Helper()
	var p map[string]any
	testenv.Eventually(t, 30*time.Second, "registry says "+want, func() error {
		p, _ = registryProvider(t, reg)
		if p == nil || p["health_status"] != want {
			return fmt.Errorf("provider %v", p)
		}
		return nil
	})
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// We register (201), again after a restart (200, same id); the registry's health poll
// keeps us ready, marks us not ready while we are down, and ready when we are back.
func TestRegistrationAndHealthPolling(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	addr := freeAddr(t)
	opts := []providerOpt{withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+reg.URL, "SP_SERVER_ADDRESS="+addr,
		"SP_DISPLAY_NAME=Kubernetes Containers", "SP_REGION=eu-west-1", "SP_ZONE=eu-west-1a", "SP_TOTAL_CPU=200", "SP_TOTAL_MEMORY=2TB")}

	first := startProvider(t, ns, opts...)
	var st registration.State
	testenv.Eventually(t, 30*time.Second, "registered", func() error {
		if st = first.App.Registrar().State(); st.Phase != registration.Registered {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	// total_cpu went as the agent's string first: the older registry refused it (400),
	// took the number (201), and is not taken for an agent.
	if st.LastHTTPStatus != http.StatusCreated || st.ProviderID == "" || first.App.Registrar().Agent() {
		t.Errorf("first registration: %+v (agent %v), want 201 with an id", st, first.App.Registrar().Agent())
	}
	p := waitHealth(t, reg, "ready")
	if p["endpoint"] != "http://"+addr+"/api/v1alpha1/containers" || p["service_type"] != "container" ||
		p["schema_version"] != "v1alpha1" || p["display_name"] != "Kubernetes Containers" || p["id"] != st.ProviderID {
		t.Errorf("registered as %v", p)
	}
	md, _ := p["metadata"].(map[string]any)
	if res, _ := md["resources"].(map[string]any); md["zone"] != "eu-west-1a" || md["region_code"] != "eu-west-1" || res["total_cpu"] != float64(200) {
		t.Errorf("metadata %v", md)
	}
	h := do(t, http.MethodGet, first.URL+containers+"/health", nil)
	if r, _ := h.JSON["registration"].(map[string]any); r["status"] != "registered" || r["provider_id"] != st.ProviderID {
		t.Errorf("health shows %s", h.Body)
	}

	first.Stop()
	waitHealth(t, reg, "not_ready")

	second := startProvider(t, ns, opts...)
	testenv.Eventually(t, 30*time.Second, "registered again", func() error {
		if st2 := second.App.Registrar().State(); st2.Phase != registration.Registered {
			return fmt.Errorf("%+v", st2)
		}
		return nil
	})
	if st2 := second.App.Registrar().State(); st2.LastHTTPStatus != http.StatusOK || st2.ProviderID != st.ProviderID {
		t.Errorf("re-registration: %+v, want 200 with id %s", st2, st.ProviderID)
	}
	waitHealth(t, reg, "ready")
	if _, n := registryProvider(t, reg); n != 1 {
		t.Errorf("registry lists %d providers", n)
	}
}

// The registry is down when we start: we register as soon as it is up, and meanwhile
// serve (the service never exits because of the registry).
func TestRegistryDownAtStart(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	reg := testenv.UnstartedRegistry(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+reg.URL))
	testenv.Eventually(t, 30*time.Second, "a failed registration attempt", func() error {
		if st := p.App.Registrar().State(); st.Phase != registration.Pending || st.LastError != "registry unreachable" || st.Reason != registration.ReasonUnreachable {
			return fmt.Errorf("with no registry: %+v", st)
		}
		return nil
	})
	if r := do(t, http.MethodGet, p.URL+"/health", nil); r.Status != 200 {
		t.Fatalf("not serving: %d", r.Status)
	}
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	testenv.Eventually(t, 30*time.Second, "registered", func() error {
		if st := p.App.Registrar().State(); st.Phase != registration.Registered {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	t.Logf("registered %s after the registry came up", time.Since(up).Round(10*time.Millisecond))
	waitHealth(t, reg, "ready")
}

// A registration URL without /providers (today's DCM control plane answers 404 there:
// it registers agents) is a configuration error: health, /readyz and the log say where
// to register instead; not retried in a loop, and the service serves meanwhile.
func TestRegistrationRejected(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+reg.URL+"/nonexistent-version"))
	testenv.Eventually(t, 30*time.Second, "rejected", func() error {
		if st := p.App.Registrar().State(); st.Phase != registration.Rejected {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	if st := p.App.Registrar().State(); st.LastHTTPStatus != http.StatusNotFound || st.Reason != registration.ReasonNoProviders {
		t.Errorf("state %+v", st)
	}
	const advice = "this DCM registers providers through an environment agent: set DCM_REGISTRATION_URL to http://<agent>:8080/api/v1alpha1"
	h := do(t, http.MethodGet, p.URL+"/health", nil)
	// Health answers anyone: a fixed text, not the registry's host or answer (the log has them).
	if r, _ := h.JSON["registration"].(map[string]any); r["status"] != "rejected" || r["last_error"] != advice {
		t.Errorf("health shows %s", h.Body)
	}
	if r := do(t, http.MethodGet, p.URL+"/readyz", nil); r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "registration: "+advice) {
		t.Errorf("readyz: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(p.Logs(), advice) {
		t.Errorf("the log does not say %q", advice)
	}
}

// With today's DCM the provider registers with an environment agent (here the
// project's double of its published contract): total_cpu goes as the string the agent
// takes on the first try, 201 then 200 after a restart, and the agent's health poll finds it Ready. An
// agent whose embedded provider serves container answers 409: a configuration error
// named as such, in health and /readyz, and the service does not exit.
func TestRegistrationWithAnEnvironmentAgent(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	ag, err := agent.Start(agent.Options{PollInterval: 200 * time.Millisecond, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	addr := freeAddr(t)
	opts := []providerOpt{withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+ag.URL, "SP_SERVER_ADDRESS="+addr, "SP_TOTAL_CPU=200", "SP_TOTAL_MEMORY=2TB")}
	registered := func(p *provider) registration.State {
		t.Helper()
		var st registration.State
		testenv.Eventually(t, 30*time.Second, "registered", func() error {
			if st = p.App.Registrar().State(); st.Phase != registration.Registered {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		return st
	}
	first := startProvider(t, ns, opts...)
	st := registered(first)
	ap, ok := ag.Provider("k8s-container-sp")
	if !ok || st.LastHTTPStatus != http.StatusCreated || st.ProviderID != ap.ID || ap.Endpoint != "http://"+addr+"/api/v1alpha1/containers" || !first.App.Registrar().Agent() {
		t.Fatalf("registered %+v as %+v", st, ap)
	}
	var body struct {
		Metadata struct {
			Resources map[string]any `json:"resources"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ap.Body, &body); err != nil || body.Metadata.Resources["total_cpu"] != "200" {
		t.Errorf("the agent got %s", ap.Body)
	}
	// The agent's form on the first try: no 400 before it.
	if got := ag.Attempts(); len(got) != 1 || got[0] != http.StatusCreated {
		t.Errorf("the agent answered %v", got)
	}
	testenv.Eventually(t, 30*time.Second, "the agent's health poll finds the provider Ready", func() error {
		if p, _ := ag.Provider("k8s-container-sp"); p.Status != "Ready" {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	first.Stop()
	second := startProvider(t, ns, opts...)
	if st2 := registered(second); st2.LastHTTPStatus != http.StatusOK || st2.ProviderID != st.ProviderID {
		t.Errorf("re-registration: %+v, want 200 with id %s", st2, st.ProviderID)
	}
	second.Stop()

	embedded, err := agent.Start(agent.Options{Embedded: []string{"container"}})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	third := startProvider(t, ns, withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+embedded.URL))
	testenv.Eventually(t, 30*time.Second, "rejected", func() error {
		if st := third.App.Registrar().State(); st.Phase != registration.Rejected || st.Reason != registration.ReasonConflict {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	conflict := registration.ReasonConflict.Text()
	if r, _ := do(t, http.MethodGet, third.URL+"/health", nil).JSON["registration"].(map[string]any); r["last_error"] != conflict {
		t.Errorf("health shows %v", r)
	}
	if r := do(t, http.MethodGet, third.URL+"/readyz", nil); r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), conflict) {
		t.Errorf("readyz: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(third.Logs(), "already served by embedded provider") {
		t.Errorf("the log lacks the agent's reason:\n%s", third.Logs())
	}
}

// instanceInRegistry reads what the registry stored for an instance: its API shows the
// status; the message it keeps only in its database.
func instanceInRegistry(t *testing.T, reg *harness.Registry, id string) (status, message string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+reg.DB()+"?mode=ro&_busy_timeout=2000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT status, COALESCE(status_message, '') FROM service_type_instances WHERE id = ?`, id).Scan(&status, &message); err != nil {
		return "", err.Error()
	}
	return status, message
}

// The whole DCM loop: a create through the registry reaches our POST with DCM's id,
// makes a Deployment, and the registry's instance follows our events to RUNNING; a bad
// image shows PENDING with our message; a delete through the registry removes the
// objects; NATS restarting mid-way does not stop the registry ending right.
func TestDCMLoopThroughTheRegistry(t *testing.T) {
	ns := testenv.Namespace(t)
	srv := testenv.NATS(t)
	reg := testenv.Registry(t, srv.URL)
	p := startProvider(t, ns, withNATS(srv.URL), withEnv("DCM_REGISTRATION_URL="+reg.URL, "SP_MONITOR_DEBOUNCE_MS=100"))
	waitHealth(t, reg, "ready")
	cs := testenv.Cluster(t).Client
	ctx := context.Background()

	createVia := func(id, image string, ports ...map[string]any) {
		t.Helper()
		body := spec("web", image)
		if len(ports) > 0 {
			body = spec("web", image, withPorts(ports...))
		}
		r := do(t, http.MethodPost, reg.URL+"/service-type-instances?id="+id,
			map[string]any{"provider_name": "k8s-container-sp", "spec": body["spec"]})
		if r.Status != http.StatusCreated {
			t.Fatalf("create through the registry: %d %s", r.Status, r.Body)
		}
	}
	registryStatus := func(id, want, msg string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("registry: %s %s", id, want), func() error {
			r := do(t, http.MethodGet, reg.URL+"/service-type-instances/"+id, nil)
			if r.Status != 200 || r.JSON["status"] != want {
				return fmt.Errorf("%d %s", r.Status, r.Body)
			}
			if st, m := instanceInRegistry(t, reg, id); st != want || !strings.Contains(m, msg) {
				return fmt.Errorf("registry database: %q %q", st, m)
			}
			return nil
		})
	}

	createVia("dcm-web-1", "quay.io/example/web:v1", port(8080, "internal"))
	deploymentOf(t, ns, "dcm-web-1") // our Deployment, for DCM's id
	registryStatus("dcm-web-1", "RUNNING", "Container is running.")

	createVia("dcm-bad-image", harness.FateImagePullBackOff+":v1")
	registryStatus("dcm-bad-image", "PENDING", "ImagePullBackOff")

	// NATS restarts; the next changes still reach the registry.
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	createVia("dcm-after-restart", "nginx")
	registryStatus("dcm-after-restart", "RUNNING", "Container is running.")

	r := do(t, http.MethodDelete, reg.URL+"/service-type-instances/dcm-web-1", nil)
	if r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Fatalf("delete through the registry: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 30*time.Second, "Deployment and Service removed", func() error {
		sel := metav1.ListOptions{LabelSelector: container.InstanceSelector("dcm-web-1")}
		d, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		s, err := cs.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		if len(d.Items)+len(s.Items) > 0 {
			return fmt.Errorf("%d Deployments, %d Services", len(d.Items), len(s.Items))
		}
		return nil
	})
	if g := do(t, http.MethodGet, p.URL+containers+"/dcm-web-1", nil); g.Status != http.StatusNotFound {
		t.Errorf("GET after delete: %d", g.Status)
	}
}
