package main

import (
	"bytes"
	"strings"
	"testing"
)

// The settings error printed at start never shows a credential of a URL setting, and
// --help shows none either.
func TestSettingsErrorHidesURLCredentials(t *testing.T) {
	const pw, tok = "pa55w0rd-secret", "qu3ry-t0ken"
	var stdout, stderr bytes.Buffer
	code := run(nil, []string{
		"SP_NAME=sp",
		"SP_ENDPOINT=ftp://sp:" + pw + "@sp:8080",
		"DCM_REGISTRATION_URL=nats://dcm:" + pw + "@registry:8080/api/v1alpha1?token=" + tok,
		"SP_NATS_URL=http://sp:" + pw + "@nats:4222,nats://" + tok + "@[nats",
	}, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	for _, name := range []string{"SP_ENDPOINT=", "DCM_REGISTRATION_URL=", "SP_NATS_URL="} {
		if !strings.Contains(stderr.String(), name) {
			t.Errorf("the message does not name %s: %s", name, &stderr)
		}
	}
	for _, s := range []string{pw, tok} {
		if strings.Contains(stderr.String(), s) || strings.Contains(stdout.String(), s) {
			t.Errorf("the message shows %q: %s", s, &stderr)
		}
	}
	stdout.Reset()
	usage(&stdout)
	if strings.Contains(stdout.String(), "@") && strings.Contains(stdout.String(), "://") {
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.Contains(line, "://") && strings.Contains(line, "@") {
				t.Errorf("--help shows a URL with user information: %q", line)
			}
		}
	}
}
