package config

import (
	"net/url"
	"strings"

	"github.com/dcm-project/k8s-container-sp/internal/secretfile"
)

// NATS settings: how the provider authenticates to DCM's NATS and verifies it, from
// files (Kubernetes Secrets), each read at start and again when it changes, so a
// rotation needs no restart. All off by default: then SP_NATS_URL alone decides (plain,
// or with user information in the URL).
type NATS struct {
	// CredsFile and NKeySeedFile: at most one (NATS takes a JWT or a bare NKey).
	CredsFile    string `env:"SP_NATS_CREDS_FILE" help:"NATS credentials file (a user JWT and its NKey seed, as nsc writes it) to authenticate with; re-read when it changes and used from the next (re)connection; not with SP_NATS_NKEY_SEED_FILE; empty = off"`
	NKeySeedFile string `env:"SP_NATS_NKEY_SEED_FILE" help:"file holding a NATS user NKey seed (SU...) to authenticate with; re-read when it changes (another key makes a new connection, used once it connects); empty = off"`
	// TLS: any of them turns TLS on (the server must offer it).
	TLSCAFile   string `env:"SP_NATS_TLS_CA_FILE" help:"PEM CA bundle the NATS server's certificate must chain to (instead of the system's); turns TLS on; re-read when it changes; empty = the system's roots"`
	TLSCertFile string `env:"SP_NATS_TLS_CERT_FILE" help:"PEM client certificate (chain) presented to NATS, with SP_NATS_TLS_KEY_FILE (both or neither); turns TLS on; re-read when it changes; empty = none"`
	TLSKeyFile  string `env:"SP_NATS_TLS_KEY_FILE" help:"PEM private key of SP_NATS_TLS_CERT_FILE"`
}

// TLS reports whether any TLS file is set.
func (n NATS) TLS() bool { return n.TLSCAFile != "" || n.TLSCertFile != "" }

// validate reads the files now, so a missing, unreadable or broken file stops the
// service at start, with the variable named, rather than failing every connection.
// natsURL is SP_NATS_URL: credentials in it would win over the files (the NATS client
// takes the URL's user information first), which is refused.
func (n NATS) validate(natsURL string) []string {
	var p []string
	if n.CredsFile != "" && n.NKeySeedFile != "" {
		p = append(p, "SP_NATS_CREDS_FILE / SP_NATS_NKEY_SEED_FILE: set one or neither (a credentials file holds its own NKey seed)")
	}
	if n.CredsFile != "" {
		if _, err := secretfile.LoadCreds(n.CredsFile); err != nil {
			p = append(p, "SP_NATS_CREDS_FILE: "+err.Error())
		}
	}
	if n.NKeySeedFile != "" {
		if _, err := secretfile.LoadNKey(n.NKeySeedFile); err != nil {
			p = append(p, "SP_NATS_NKEY_SEED_FILE: "+err.Error())
		}
	}
	if n.CredsFile != "" || n.NKeySeedFile != "" {
		for _, raw := range strings.Split(natsURL, ",") {
			if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
				p = append(p, "SP_NATS_URL: carries user information, which the NATS client would send instead of SP_NATS_CREDS_FILE / SP_NATS_NKEY_SEED_FILE; remove it from the URL")
				break
			}
		}
	}
	if n.TLSCAFile != "" {
		if _, err := secretfile.LoadCertPool(n.TLSCAFile); err != nil {
			p = append(p, "SP_NATS_TLS_CA_FILE: "+err.Error())
		}
	}
	switch {
	case (n.TLSCertFile == "") != (n.TLSKeyFile == ""):
		p = append(p, "SP_NATS_TLS_CERT_FILE / SP_NATS_TLS_KEY_FILE: set both or neither")
	case n.TLSCertFile != "":
		if _, err := secretfile.LoadKeyPair(n.TLSCertFile, n.TLSKeyFile); err != nil {
			p = append(p, "SP_NATS_TLS_CERT_FILE / SP_NATS_TLS_KEY_FILE: "+err.Error())
		}
	}
	return p
}
