package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// A secret in any URL setting never appears in the settings error, however the URL is
// wrong (scheme, no host, does not parse), nor in --help's source (Settings).
func TestURLSettingsErrorsHideCredentials(t *testing.T) {
	const pw, user, tok = "pa55w0rd-secret", "us3r-name", "qu3ry-t0ken"
	cases := []struct{ name, env string }{
		{"SP_ENDPOINT wrong scheme", "SP_ENDPOINT=ftp://" + user + ":" + pw + "@sp:8080/?token=" + tok},
		{"SP_ENDPOINT does not parse", "SP_ENDPOINT=http://" + user + ":" + pw + "@[sp:8080?token=" + tok},
		{"DCM_REGISTRATION_URL wrong scheme", "DCM_REGISTRATION_URL=nats://" + user + ":" + pw + "@registry:8080/api?token=" + tok},
		{"DCM_REGISTRATION_URL no host", "DCM_REGISTRATION_URL=http:" + user + ":" + pw + "@registry?token=" + tok},
		{"SP_NATS_URL one of two wrong", "SP_NATS_URL=nats://" + user + ":" + pw + "@nats:4222,http://" + user + ":" + pw + "@nats:8222?token=" + tok},
		{"SP_NATS_URL does not parse", "SP_NATS_URL=nats://" + user + ":" + pw + "@[nats"},
		{"SP_NATS_URL token as user", "SP_NATS_URL=nats://nats:4222, ws:" + tok + "@nats"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(append(required[:len(required):len(required)], tc.env))
			if err == nil {
				t.Fatalf("%s: accepted", tc.env)
			}
			name, _, _ := strings.Cut(tc.env, "=")
			if !strings.Contains(err.Error(), name) {
				t.Errorf("the error does not name %s: %v", name, err)
			}
			for _, s := range []string{pw, user, tok} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error shows %q: %v", s, err)
				}
			}
		})
	}
	for _, s := range Settings() {
		if strings.Contains(s.Default, "@") {
			t.Errorf("%s's default carries user information: %q", s.Name, s.Default)
		}
	}
}

// The NATS files are read at start: a missing or broken one stops the service naming
// its variable, like SP_API_TOKEN_FILE.
func TestNATSFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	seedFile := write("user.nk", string(seed)+"\n")
	// A credentials file as nsc writes it (the JWT's content is not checked here: the
	// server checks it).
	creds := write("user.creds", fmt.Sprintf("-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"+
		"************************* IMPORTANT *************************\n\n-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n",
		"eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQSJ9.c2lnbmF0dXJl", seed))
	credsNoSeed := write("noseed.creds", "-----BEGIN NATS USER JWT-----\neyJ0.eyJz.c2ln\n------END NATS USER JWT------\n")
	accountSeedFile := write("account.nk", string(accountSeed)+"\n")
	junk, empty := write("junk", "not a key\n"), write("empty", "\n")
	cert, key := selfSigned(t, dir, "client")
	_, otherKey := selfSigned(t, dir, "other")
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name string
		env  []string
		want []string // substrings of the error; none: valid
	}{
		{name: "off by default"},
		{name: "NKey seed", env: []string{"SP_NATS_NKEY_SEED_FILE=" + seedFile}},
		{name: "credentials", env: []string{"SP_NATS_CREDS_FILE=" + creds}},
		{name: "TLS: CA, certificate and key", env: []string{"SP_NATS_TLS_CA_FILE=" + cert, "SP_NATS_TLS_CERT_FILE=" + cert, "SP_NATS_TLS_KEY_FILE=" + key}},
		{name: "TLS: CA only", env: []string{"SP_NATS_TLS_CA_FILE=" + cert}},
		{name: "both kinds of credentials", env: []string{"SP_NATS_CREDS_FILE=" + creds, "SP_NATS_NKEY_SEED_FILE=" + seedFile},
			want: []string{"SP_NATS_CREDS_FILE / SP_NATS_NKEY_SEED_FILE: set one or neither"}},
		{name: "missing seed file", env: []string{"SP_NATS_NKEY_SEED_FILE=" + missing}, want: []string{"SP_NATS_NKEY_SEED_FILE: ", missing}},
		{name: "empty seed file", env: []string{"SP_NATS_NKEY_SEED_FILE=" + empty}, want: []string{"SP_NATS_NKEY_SEED_FILE: ", "is empty"}},
		{name: "not a seed", env: []string{"SP_NATS_NKEY_SEED_FILE=" + junk}, want: []string{"SP_NATS_NKEY_SEED_FILE: ", "not a NATS user NKey seed"}},
		{name: "an account's seed", env: []string{"SP_NATS_NKEY_SEED_FILE=" + accountSeedFile}, want: []string{"SP_NATS_NKEY_SEED_FILE: ", "not a NATS user NKey seed"}},
		{name: "missing credentials file", env: []string{"SP_NATS_CREDS_FILE=" + missing}, want: []string{"SP_NATS_CREDS_FILE: ", missing}},
		{name: "credentials without JWT", env: []string{"SP_NATS_CREDS_FILE=" + seedFile}, want: []string{"SP_NATS_CREDS_FILE: ", "no user JWT"}},
		{name: "credentials without seed", env: []string{"SP_NATS_CREDS_FILE=" + credsNoSeed}, want: []string{"SP_NATS_CREDS_FILE: ", "no user NKey seed"}},
		{name: "credentials and a user in the URL", env: []string{"SP_NATS_CREDS_FILE=" + creds, "SP_NATS_URL=nats://u:p@nats:4222"},
			want: []string{"SP_NATS_URL: carries user information"}},
		{name: "missing CA", env: []string{"SP_NATS_TLS_CA_FILE=" + missing}, want: []string{"SP_NATS_TLS_CA_FILE: ", missing}},
		{name: "CA not PEM", env: []string{"SP_NATS_TLS_CA_FILE=" + junk}, want: []string{"SP_NATS_TLS_CA_FILE: ", "no PEM certificate"}},
		{name: "certificate without key", env: []string{"SP_NATS_TLS_CERT_FILE=" + cert}, want: []string{"SP_NATS_TLS_CERT_FILE / SP_NATS_TLS_KEY_FILE: set both or neither"}},
		{name: "key of another certificate", env: []string{"SP_NATS_TLS_CERT_FILE=" + cert, "SP_NATS_TLS_KEY_FILE=" + otherKey},
			want: []string{"SP_NATS_TLS_CERT_FILE / SP_NATS_TLS_KEY_FILE: ", "not a certificate and its key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(append(required[:len(required):len(required)], tc.env...))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := c.NATS.TLS(); got != strings.Contains(strings.Join(tc.env, " "), "TLS") {
					t.Errorf("TLS() = %v", got)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if strings.Contains(err.Error(), string(seed)) {
				t.Errorf("the error shows the seed: %v", err)
			}
		})
	}
}
