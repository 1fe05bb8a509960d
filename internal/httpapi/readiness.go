package httpapi

import (
	"net/http"
	"strings"
)

// The probes' paths.
const (
	ReadinessPath = "/readyz"
	LivenessPath  = "/livez"
)

// Check is one condition of readiness; nil when it holds.
type Check struct {
	Name string
	Err  func() error
}

// Readiness answers a Kubernetes readiness probe (/readyz): 200 "ok" when every check
// holds, else 503 naming each that fails, one line each ("name: why"). A replica is
// ready to take traffic once its caches are synced (reads answer from them), while none
// of them is behind (its watch broken for longer than SP_K8S_MAX_STALENESS, or silent
// for longer than the silence bound: its reads answer 503 then, and another replica
// may answer them), and while its permissions are complete. A Kubernetes API outage
// shorter than the staleness bound does not make it unready; a longer one makes every
// replica unready in turn, since none can answer reads (clients then get refused
// connections instead of 503s, until the watches are back).
func Readiness(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var failed []string
		for _, c := range checks {
			if err := c.Err(); err != nil {
				failed = append(failed, c.Name+": "+err.Error())
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n" + strings.Join(failed, "\n") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Liveness answers /livez: the process serves HTTP.
func Liveness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}
