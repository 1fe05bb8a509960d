package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

// Each URL carries a secret the way operators put them there; no form of it survives.
var secretURLs = []struct {
	name, raw string
	secrets   []string // none may appear
	want      string   // URL's answer
}{
	{"user and password", "nats://sp-user:s3cr3t-pw@nats.dcm.svc:4222", []string{"s3cr3t-pw", "sp-user"}, "nats://xxxxx@nats.dcm.svc:4222"},
	{"token as user name (NATS)", "tls://t0ken-abcdef@nats:4222", []string{"t0ken-abcdef"}, "tls://xxxxx@nats:4222"},
	{"escaped password", "https://admin:p%40ss%2Fw0rd@registry:8080/api/v1alpha1", []string{"p@ss/w0rd", "p%40ss%2Fw0rd", "admin"}, "https://xxxxx@registry:8080/api/v1alpha1"},
	{"token in the query", "http://registry:8080/api/v1alpha1?token=qu3ry-t0ken&x=1", []string{"qu3ry-t0ken"}, "http://registry:8080/api/v1alpha1?token=xxxxx&x=xxxxx"},
	{"bare query", "http://registry:8080/api?b4re-s3cret", []string{"b4re-s3cret"}, "http://registry:8080/api?xxxxx"},
	{"fragment", "https://sp:8080/#fr4gment-key", []string{"fr4gment-key"}, "https://sp:8080/#xxxxx"},
	{"websocket with both", "wss://u5er:pa55word@ws.nats:443/path?auth_token=zzzz9999", []string{"pa55word", "u5er", "zzzz9999"}, "wss://xxxxx@ws.nats:443/path?auth_token=xxxxx"},
	{"does not parse", "nats://us3r:p@ss w0rd@[bad", []string{"p@ss w0rd", "us3r"}, "nats://xxxxx@[bad"},
	{"no host", "http:us3r:passw0rd@host", []string{"passw0rd", "us3r:passw0rd"}, ""},
	{"no secret", "http://registry:8080/api/v1alpha1", nil, "http://registry:8080/api/v1alpha1"},
}

func TestURLHidesEverySecret(t *testing.T) {
	for _, tc := range secretURLs {
		t.Run(tc.name, func(t *testing.T) {
			got := URL(tc.raw)
			if tc.want != "" && got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			for _, s := range tc.secrets {
				if strings.Contains(got, s) {
					t.Errorf("URL(%q) = %q shows %q", tc.raw, got, s)
				}
			}
			if list := URLs("nats://a:4222, " + tc.raw); strings.Contains(list, "@") && !strings.Contains(list, Mask+"@") {
				t.Errorf("URLs shows user information: %q", list)
			}
		})
	}
}

// The forms libraries print a URL in: quoted as given, as net/http's client does
// (password replaced by ***, user name and query kept), as url.Parse's error does, and
// bare in a sentence. Text masks them all, and the secrets even where no URL is left.
func TestTextHidesEverySecret(t *testing.T) {
	for _, tc := range secretURLs {
		t.Run(tc.name, func(t *testing.T) {
			var forms []string
			forms = append(forms,
				fmt.Sprintf("connecting to %s: refused.", tc.raw),
				fmt.Sprintf("Post %q: dial tcp 10.0.0.1:8080: connect: connection refused", tc.raw),
				"the password is "+strings.Join(tc.secrets, " and "))
			if u, err := url.Parse(tc.raw); err == nil {
				forms = append(forms, fmt.Sprintf("Post %q: EOF", u.Redacted()), u.String())
			} else {
				forms = append(forms, err.Error())
			}
			for _, f := range forms {
				got := Text(f, tc.raw)
				for _, s := range tc.secrets {
					if strings.Contains(got, s) {
						t.Errorf("Text(%q) = %q shows %q", f, got, s)
					}
				}
			}
		})
	}
	// A URL in the text that was not named is redacted too; the rest of the text stays.
	if got := Text(`dial "nats://u:pw@h:1": refused`); got != `dial "nats://xxxxx@h:1": refused` {
		t.Errorf("Text: %q", got)
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	inner := fmt.Errorf("connecting to nats://user:hunter22@nats: %w", fs.ErrPermission)
	err := Error(inner, "nats://user:hunter22@nats")
	if strings.Contains(err.Error(), "hunter22") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Error: %q, is %v", err, errors.Is(err, fs.ErrPermission))
	}
	if Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
