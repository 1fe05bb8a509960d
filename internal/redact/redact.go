// Package redact keeps credentials that live in URLs (SP_NATS_URL, DCM_REGISTRATION_URL,
// SP_ENDPOINT) out of everything the service prints or logs: the settings error, log
// lines, errors of the NATS and HTTP clients, health and metrics.
//
// What is secret in a URL: its user information (a user name alone is a token to NATS,
// and with a password both are), every query value (tokens are passed as ?token=...),
// and its fragment. net/url's URL.Redacted hides the password only; URL hides all three.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask replaces every secret part.
const Mask = "xxxxx"

// URL is raw fit to print: user information, query values and fragment replaced by
// Mask; the scheme, host, port and path kept, so the operator still sees which server
// is meant. A value that does not parse as a URL with a host loses everything after
// its scheme that could hold a secret (up to its last '@', and from the first '?' or '#').
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return unparsed(raw)
	}
	c := *u
	if c.User != nil {
		c.User = url.User(Mask)
	}
	if c.RawQuery != "" {
		// Each key=value keeps its key; a piece without "=" (?secret) is masked whole.
		pieces := strings.Split(c.RawQuery, "&")
		for i, p := range pieces {
			if k, _, ok := strings.Cut(p, "="); ok {
				pieces[i] = k + "=" + Mask
			} else if p != "" {
				pieces[i] = Mask
			}
		}
		c.RawQuery = strings.Join(pieces, "&")
	}
	c.ForceQuery = false
	if c.Fragment != "" || c.RawFragment != "" {
		c.Fragment, c.RawFragment = Mask, ""
	}
	// Redacted hides a password; there is none left, it is what String would say.
	return c.Redacted()
}

// unparsed redacts a value url.Parse refuses or that has no host: what could be user
// information (everything before the last '@') and a query or fragment.
func unparsed(raw string) string {
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	tail := ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest, tail = rest[:i], rest[i:i+1]+Mask
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = Mask + rest[i:]
	}
	return scheme + rest + tail
}

// URLs redacts a comma-separated list of URLs (SP_NATS_URL), keeping the commas.
func URLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		trimmed := strings.TrimSpace(p)
		if trimmed == "" {
			continue
		}
		parts[i] = strings.Replace(p, trimmed, URL(trimmed), 1)
	}
	return strings.Join(parts, ",")
}

// urlInText finds URLs in free text: a scheme, "://", then anything up to white space
// or a quote (Go's errors quote the URL they name: Post "http://...": ...).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// minSecret is the shortest secret Text looks for outside a URL: shorter ones would
// mask unrelated letters of the text (a password that short is no protection anyway).
const minSecret = 4

// Text is s with every URL in it redacted (URL), and every secret part of the given
// URLs (user name, password, query values; raw and escaped) replaced by Mask wherever
// it still appears: for the messages of errors from libraries (NATS, HTTP) that quote
// the URL they were given, or a part of it.
func Text(s string, urls ...string) string {
	s = urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// A URL quoted at the end of a sentence keeps its punctuation out of its path.
		trail := ""
		for len(m) > 0 && strings.ContainsAny(m[len(m)-1:], ".,;:)]}") {
			trail, m = m[len(m)-1:]+trail, m[:len(m)-1]
		}
		return URL(m) + trail
	})
	for _, list := range urls {
		for _, raw := range strings.Split(list, ",") {
			for _, secret := range secrets(strings.TrimSpace(raw)) {
				s = strings.ReplaceAll(s, secret, Mask)
			}
		}
	}
	return s
}

// secrets lists the secret parts of raw in the forms they may be printed in, longest
// first (so a password is masked whole before a part of it could be).
func secrets(raw string) []string {
	var parts []string
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// Unparsed: what unparsed would hide.
		hidden := raw
		if i := strings.Index(raw, "://"); i >= 0 {
			hidden = raw[i+3:]
		}
		if i := strings.IndexAny(hidden, "?#"); i >= 0 {
			parts = append(parts, hidden[i+1:])
			hidden = hidden[:i]
		}
		if i := strings.LastIndex(hidden, "@"); i >= 0 {
			parts = append(parts, hidden[:i])
			parts = append(parts, strings.Split(hidden[:i], ":")...)
		}
	} else {
		if u.User != nil {
			name := u.User.Username()
			parts = append(parts, name, url.User(name).String())
			if pw, ok := u.User.Password(); ok {
				parts = append(parts, pw, strings.TrimPrefix(url.UserPassword("", pw).String(), ":"))
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				parts = append(parts, v, url.QueryEscape(v), url.PathEscape(v))
			}
		}
		for _, p := range strings.Split(u.RawQuery, "&") {
			if !strings.Contains(p, "=") {
				parts = append(parts, p)
				if q, err := url.QueryUnescape(p); err == nil {
					parts = append(parts, q)
				}
			}
		}
		if u.Fragment != "" {
			parts = append(parts, u.Fragment, u.EscapedFragment())
		}
	}
	out := parts[:0]
	for _, p := range parts {
		if len(p) >= minSecret && p != Mask {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Error wraps err so that its message is Text(err.Error(), urls...); errors.Is and
// errors.As still see err. nil stays nil.
func Error(err error, urls ...string) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err, msg: Text(err.Error(), urls...)}
}

type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
