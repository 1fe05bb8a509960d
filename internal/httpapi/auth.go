package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// openPaths answer without a token: health and readiness, which DCM's registry, the
// kubelet and Prometheus poll without credentials. (/readyz, /livez and /metrics are
// served beside this handler today, in app.go; listed so they stay open if moved.)
var openPaths = map[string]bool{
	"/health":                         true,
	"/api/v1alpha1/containers/health": true,
	"/readyz":                         true,
	"/livez":                          true,
	"/metrics":                        true,
}

// withAuth answers 401 to a request without "Authorization: Bearer <token>" (token()
// is the current token; nil turns authentication off). Every path but openPaths needs
// it, so an unknown path is a 401 too, not a 404 that tells what exists.
func withAuth(token func() []byte, next http.Handler) http.Handler {
	if token == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !openPaths[r.URL.Path] {
			if detail := checkBearer(r.Header.Get("Authorization"), token()); detail != "" {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeProblem(w, r, unauthenticated(detail))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkBearer says what is wrong with an Authorization header ("" when nothing is).
func checkBearer(header string, want []byte) string {
	if header == "" {
		return "this API needs the header Authorization: Bearer with the API token"
	}
	scheme, got, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "the Authorization header must use the Bearer scheme"
	}
	// Compared as digests in constant time: neither the time taken nor an early exit
	// on a length difference tells anything about the token.
	g, w := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256(want)
	if len(want) == 0 || subtle.ConstantTimeCompare(g[:], w[:]) != 1 {
		return "the bearer token is not valid"
	}
	return ""
}

func unauthenticated(detail string) *Problem {
	return &Problem{Status: http.StatusUnauthorized, Code: "unauthenticated", Detail: detail}
}
