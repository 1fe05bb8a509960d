package registration

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/logtest"
)

func payloadJSON(t *testing.T, o Options) map[string]any {
	t.Helper()
	o.RegistryURL = "http://registry:8080/api/v1alpha1"
	r, err := New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.Payload())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestPayload(t *testing.T) {
	m := payloadJSON(t, Options{Name: "k8s-container-sp", Endpoint: "http://sp:8080/"})
	if m["name"] != "k8s-container-sp" || m["endpoint"] != "http://sp:8080/api/v1alpha1/containers" ||
		m["service_type"] != "container" || m["schema_version"] != "v1alpha1" || m["id"] != nil || m["metadata"] != nil {
		t.Errorf("minimal payload: %v", m)
	}
	if ops, _ := m["operations"].([]any); len(ops) != 3 {
		t.Errorf("operations %v", m["operations"])
	}

	m = payloadJSON(t, Options{Name: "sp", DisplayName: "SP", Endpoint: "http://sp", Region: "r", Zone: "z",
		Capacity: Capacity{TotalCPU: 200, TotalMemory: "2TB"}})
	md := m["metadata"].(map[string]any)
	res := md["resources"].(map[string]any)
	// total_cpu is an integer in the registry client's type; body() sends it as the
	// string an environment agent takes first.
	if m["display_name"] != "SP" || md["region_code"] != "r" || md["zone"] != "z" || res["total_cpu"] != float64(200) ||
		res["total_memory"] != "2TB" || res["total_node"] != nil || res["total_storage"] != nil {
		t.Errorf("full payload: %v", m)
	}
}

// What each registrar's answers make of the registration: total_cpu goes first as the
// string an environment agent (today's DCM) takes; the older registry refuses it and
// takes the integer, tried at once and kept; a 404, 409 and 422 are refusals named for
// what they mean; none is retried at once.
func TestAnswers(t *testing.T) {
	olderRegistry := func(s bool) (int, string) {
		if s {
			return 400, `{"title":"Bad Request","detail":"total_cpu: must be an integer"}`
		}
		return 201, `{"id":"p1"}`
	}
	for _, tc := range []struct {
		name string
		// answer is the registrar's: code for a body with total_cpu as a string or not.
		answer      func(cpuString bool) (int, string)
		wantPhase   Phase
		wantReason  Reason
		wantString  bool // the form kept
		wantBodies  int  // registrations sent
		wantLastErr string
		wantAgent   bool
	}{
		{name: "agent", answer: func(s bool) (int, string) {
			if !s {
				return 400, `{"type":"about:blank","title":"Bad Request","detail":"total_cpu: value must be a string"}`
			}
			return 201, `{"id":"p1","type":"external","status":"Unavailable"}`
		}, wantPhase: Registered, wantString: true, wantBodies: 1, wantAgent: true},
		{name: "older registry", answer: olderRegistry, wantPhase: Registered, wantBodies: 2},
		{name: "agent serving container itself", answer: func(s bool) (int, string) {
			if !s {
				return 400, `{"title":"Bad Request"}`
			}
			return 409, `{"title":"Service Type Conflict","detail":"service type 'container' is already served by provider 'k8s-container'"}`
		}, wantPhase: Rejected, wantReason: ReasonConflict, wantString: true, wantBodies: 1,
			wantLastErr: "another provider already serves service type container at this registrar (at an environment agent: leave container out of its embeddedSps)"},
		{name: "today's control plane", answer: func(bool) (int, string) { return 404, `404 page not found` },
			wantPhase: Rejected, wantReason: ReasonNoProviders, wantString: true, wantBodies: 1,
			wantLastErr: "this DCM registers providers through an environment agent: set DCM_REGISTRATION_URL to http://<agent>:8080/api/v1alpha1"},
		{name: "semantic refusal in both forms", answer: func(bool) (int, string) { return 422, `{"title":"Unprocessable","detail":"endpoint unreachable"}` },
			wantPhase: Rejected, wantReason: ReasonRefused, wantString: true, wantBodies: 2,
			wantLastErr: "the registrar refused the registration body; the log has its reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, bodies := registrar(t, tc.answer)
			r := newRegistrar(t, srv.URL, Options{Capacity: Capacity{TotalCPU: 200}}, io.Discard)
			r.registerWithRetry(context.Background())
			st := r.State()
			if st.Phase != tc.wantPhase || st.Reason != tc.wantReason || r.cpuAsString != tc.wantString || len(*bodies) != tc.wantBodies ||
				st.LastError != tc.wantLastErr || r.Agent() != tc.wantAgent {
				t.Errorf("got %+v, string form %v, bodies %v, agent %v", st, r.cpuAsString, *bodies, r.Agent())
			}
			if len(*bodies) > 0 && !(*bodies)[0] {
				t.Errorf("the first body carried total_cpu as a number")
			}
		})
	}
}

// The form that worked is kept: at the older registry the string is refused once, and
// every later registration in the process sends the number first (level-triggered);
// should the registrar become an agent at the same URL, the string is taken up again.
func TestFormKept(t *testing.T) {
	agent := false
	srv, bodies := registrar(t, func(s bool) (int, string) {
		if s != agent {
			return 400, `{"title":"Bad Request"}`
		}
		if agent {
			return 200, `{"id":"p1","type":"external"}`
		}
		return 200, `{"id":"p1"}`
	})
	r := newRegistrar(t, srv.URL, Options{Capacity: Capacity{TotalCPU: 8}}, io.Discard)
	for range 3 {
		r.registerWithRetry(context.Background())
	}
	if want := []bool{true, false, false, false}; !slices.Equal(*bodies, want) || r.State().Phase != Registered || r.Agent() {
		t.Errorf("at the older registry: string forms sent %v, want %v; %+v", *bodies, want, r.State())
	}
	agent, *bodies = true, nil
	r.registerWithRetry(context.Background())
	r.registerWithRetry(context.Background())
	if want := []bool{false, true, true}; !slices.Equal(*bodies, want) || !r.Agent() {
		t.Errorf("at an agent: string forms sent %v, want %v", *bodies, want)
	}
}

// With SP_API_TOKEN_FILE set, meeting an environment agent (by its answer's type, or by
// its taking total_cpu as a string) logs one warning that its creates and deletes will
// be refused; not at the older registry, and not without a token.
func TestTokenWarning(t *testing.T) {
	agentAnswer := func(bool) (int, string) { return 201, `{"id":"p1","type":"external"}` }
	olderRegistry := func(s bool) (int, string) {
		if s {
			return 400, `{"title":"Bad Request"}`
		}
		return 201, `{"id":"p1"}`
	}
	for _, tc := range []struct {
		name   string
		answer func(bool) (int, string)
		opts   Options
		warn   bool
	}{
		{"agent, token, no capacity", agentAnswer, Options{APIToken: true}, true},
		{"agent by total_cpu, token", func(s bool) (int, string) {
			if !s {
				return 400, `{"title":"Bad Request"}`
			}
			return 201, `{"id":"p1"}`
		}, Options{APIToken: true, Capacity: Capacity{TotalCPU: 4}}, true},
		{"agent, no token", agentAnswer, Options{Capacity: Capacity{TotalCPU: 4}}, false},
		{"older registry, token", olderRegistry, Options{APIToken: true, Capacity: Capacity{TotalCPU: 4}}, false},
		{"older registry without capacity, token", func(bool) (int, string) { return 201, `{"id":"p1"}` }, Options{APIToken: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := registrar(t, tc.answer)
			var log logtest.Buffer
			r := newRegistrar(t, srv.URL, tc.opts, &log)
			r.registerWithRetry(context.Background())
			r.registerWithRetry(context.Background()) // a re-registration warns no more
			if r.State().Phase != Registered {
				t.Fatalf("%+v", r.State())
			}
			n := strings.Count(log.String(), "level=WARN")
			if got := strings.Count(log.String(), TokenWarning); got != n || (tc.warn && n != 1) || (!tc.warn && n != 0) {
				t.Errorf("%d warnings, %d of them the token's:\n%s", n, got, log.String())
			}
			if tc.warn && !strings.Contains(log.String(), "401") {
				t.Errorf("the warning does not name the 401: %s", log.String())
			}
		})
	}
}

// registrar serves POST /providers with answer (given whether total_cpu was a string),
// and records, for each body, whether its total_cpu was a string.
func registrar(t *testing.T, answer func(cpuString bool) (int, string)) (*httptest.Server, *[]bool) {
	t.Helper()
	var mu sync.Mutex
	bodies := &[]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Metadata struct {
				Resources struct {
					TotalCPU any `json:"total_cpu"`
				}
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		_, s := b.Metadata.Resources.TotalCPU.(string)
		mu.Lock()
		*bodies = append(*bodies, s)
		mu.Unlock()
		code, body := answer(s)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, bodies
}

func newRegistrar(t *testing.T, url string, o Options, log io.Writer) *Registrar {
	t.Helper()
	o.RegistryURL, o.Name, o.Endpoint = url, "sp", "http://sp"
	r, err := New(o, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
