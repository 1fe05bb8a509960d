package app

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/config"
	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
)

// security loads what SP_API_TOKEN_FILE and SP_SERVER_TLS_CERT_FILE/_KEY_FILE configure:
// the API token (nil: no authentication) and the server's TLS configuration (nil:
// plain HTTP). Both follow their files (rotation without a restart).
func security(cfg *config.Config, log *slog.Logger) (token func() []byte, tlsConfig *tls.Config, err error) {
	s := cfg.Security
	if s.APITokenFile != "" {
		tok, err := secretfile.Token(s.APITokenFile, secretfile.Interval, log)
		if err != nil {
			return nil, nil, err
		}
		token = tok.Get
	}
	if s.TLSCertFile != "" {
		if tlsConfig, err = secretfile.ServerTLS(s.TLSCertFile, s.TLSKeyFile, secretfile.Interval, log); err != nil {
			return nil, nil, err
		}
	}
	log.Info("API security", "token", token != nil, "tls", tlsConfig != nil)
	return token, tlsConfig, nil
}

// selfProbeClient is selfProbe's client (app.go). With TLS it does not verify the
// certificate: the probe dials our own listener's address (loopback or this pod's own
// IP), for which the certificate (issued for SP_ENDPOINT's host name) cannot be
// verified, and it only asks whether that listener answers /health, sending nothing
// secret. Every other client of the API verifies the certificate as usual.
var selfProbeClient = &http.Client{
	Timeout: 5 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
		DisableKeepAlives: true,
	},
}
