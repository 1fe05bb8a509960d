package testenv

import "net/http"

// RoundTripFunc is a transport that runs F for every request; F calls RT to send it.
// Integration tests wrap the provider's rest.Config with it (rest.Config.Wrap) to count
// requests, hold them, or lose an answer at an exact request.
type RoundTripFunc struct {
	RT http.RoundTripper
	F  func(*http.Request) (*http.Response, error)
}

// RoundTrip runs F.
func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f.F(r) }

// WrappedRoundTripper lets client-go reach the transport underneath (to cancel requests).
func (f RoundTripFunc) WrappedRoundTripper() http.RoundTripper { return f.RT }
