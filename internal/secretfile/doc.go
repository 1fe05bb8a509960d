// Package secretfile keeps secrets that live in files current without a restart: the
// API token (SP_API_TOKEN_FILE) and the server's TLS certificate and key
// (SP_SERVER_TLS_CERT_FILE, SP_SERVER_TLS_KEY_FILE), and what the NATS client
// authenticates with (SP_NATS_CREDS_FILE, SP_NATS_NKEY_SEED_FILE, SP_NATS_TLS_*_FILE),
// which Kubernetes Secret volumes and cert-manager replace in place.
//
// The files' metadata (inode, size, modification time) is looked at no more than once
// per interval; when it changed, the files are read and parsed again. A change that does
// not parse (a half-written file, a certificate without its key) is logged once, as a
// warning, and the last good value is kept.
package secretfile
