package registration

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/logtest"
)

// Secrets of the registry's URL and of SP_ENDPOINT, and what a registry answers.
const (
	regUser, regPass, regToken = "reg-us3r", "reg-pa55w0rd", "reg-qu3ry-t0ken"
	epUser, epPass             = "ep-us3r", "ep-pa55w0rd"
	// What a registry (or a proxy before it) may put in its answer: internal names and
	// a stack trace. Health must not repeat it.
	answerDetail = "upstream db-primary.internal.example:5432 refused: pq: password authentication failed"
)

// Whatever the registry's answer or failure, health's last_error is a fixed text per
// reason (never the registry's host or its answer), the reason is the metric's label, and
// no credential of DCM_REGISTRATION_URL or SP_ENDPOINT is in any log line; the log
// keeps the registry's answer for the operator.
func TestRegistrationSaysFixedTextsAndLogsNoSecret(t *testing.T) {
	answer := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			if code == http.StatusCreated {
				_, _ = w.Write([]byte(`{"id": "p-1", "name": "sp", "endpoint": "x", "service_type": "container", "schema_version": "v1alpha1"}`))
				return
			}
			_, _ = w.Write([]byte(`{"detail": "` + answerDetail + `"}`))
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cases := []struct {
		name    string
		srv     *httptest.Server
		url     string // the registry's base when no srv
		phase   Phase
		reason  Reason
		logged  string // in the log
		retried bool
	}{
		{name: "rejected", srv: httptest.NewServer(answer(http.StatusBadRequest)), phase: Rejected, reason: ReasonRejected, logged: answerDetail},
		{name: "unavailable", srv: httptest.NewServer(answer(http.StatusServiceUnavailable)), phase: Pending, reason: ReasonUnavailable, logged: answerDetail, retried: true},
		{name: "unreachable", url: closed.URL, phase: Pending, reason: ReasonUnreachable, logged: "connection refused", retried: true},
		{name: "tls", srv: httptest.NewTLSServer(answer(http.StatusCreated)), phase: Pending, reason: ReasonTLS, logged: "certificate", retried: true},
		{name: "registered", srv: httptest.NewServer(answer(http.StatusCreated)), phase: Registered, logged: "registered with DCM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.url
			if tc.srv != nil {
				defer tc.srv.Close()
				base = tc.srv.URL
			}
			scheme, hostPort, _ := strings.Cut(base, "://")
			regURL := scheme + "://" + regUser + ":" + regPass + "@" + hostPort + "/api/v1alpha1?token=" + regToken
			logs := &logtest.Buffer{}
			r, err := New(Options{RegistryURL: regURL, Name: "sp", Endpoint: "http://" + epUser + ":" + epPass + "@sp:8080",
				RetryBase: 10 * time.Millisecond, RetryCap: 20 * time.Millisecond}, slog.New(slog.NewJSONHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx, func(context.Context) error { return nil }) }()
			deadline := time.Now().Add(10 * time.Second)
			for {
				st := r.State()
				if st.Phase == tc.phase && st.Reason == tc.reason && (!tc.retried || strings.Count(logs.String(), "will retry") >= 2) &&
					strings.Contains(logs.String(), tc.logged) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("state %+v, log %s", st, logs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			st := r.State()
			if st.LastError != tc.reason.Text() || (tc.reason != "") != (st.LastError != "") {
				t.Errorf("last_error %q, want the fixed text %q", st.LastError, tc.reason.Text())
			}
			for _, leak := range []string{answerDetail, "127.0.0.1", "db-primary", regUser, regPass, regToken, epUser, epPass} {
				if strings.Contains(st.LastError, leak) {
					t.Errorf("last_error %q shows %q", st.LastError, leak)
				}
			}
			for _, leak := range []string{regUser, regPass, regToken, epUser, epPass} {
				if strings.Contains(logs.String(), leak) {
					t.Errorf("the log shows %q:\n%s", leak, logs)
				}
			}
		})
	}
}

// Every reason has a fixed text, and Reasons lists each once (the metric's labels).
func TestReasonsHaveTexts(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons {
		if r.Text() == "" || seen[r] {
			t.Errorf("reason %q: text %q, listed before %v", r, r.Text(), seen[r])
		}
		seen[r] = true
	}
	if Reason("").Text() != "" {
		t.Error("no failure has a text")
	}
}
