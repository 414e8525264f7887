package probe

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Guards against hostile or broken servers that the HTTP drivers share, and
// the secret handling that keeps credentials out of errors. The bounds are
// listed in docs/security.md.

// DefaultMaxRedirects bounds the redirects followed when a target sets
// follow_redirects.
const DefaultMaxRedirects = 5

// SensitiveHeader reports whether a header name looks like it carries a
// credential (Authorization, X-Api-Key, Cookie, …). Such values are
// redacted from probe errors and from the printed configuration.
func SensitiveHeader(name string) bool { return sensitiveHeader(name) }

// credentialParts returns the strings to redact for one credential header
// value: the value itself, its credential after an auth scheme ("Basic x",
// "Bearer x"), and for Basic the decoded user:password and password, so a
// server that echoes the header in any of these forms does not leak it.
func credentialParts(value string) []string {
	out := []string{value}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok {
		return out
	}
	cred = strings.TrimSpace(cred)
	if len(cred) >= 4 {
		out = append(out, cred)
	}
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil && utf8.Valid(dec) {
			if _, pw, ok := strings.Cut(string(dec), ":"); ok && len(pw) >= 4 {
				out = append(out, string(dec), pw)
			}
		}
	}
	return out
}

// minRedactedPrefix: a secret cut by the error-message length bound leaves
// a prefix before the "…"; prefixes from this length on are redacted too.
const minRedactedPrefix = 4

// redactString replaces every secret in msg with <secret>, including a
// secret that sanitize cut short (a prefix of it right before "…").
func redactString(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "<secret>")
		}
	}
	if !strings.Contains(msg, "…") {
		return msg
	}
	var b strings.Builder
	rest := msg
	for {
		i := strings.Index(rest, "…")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		head := rest[:i]
		for _, s := range secrets {
			for n := min(len(s)-1, len(head)); n >= minRedactedPrefix; n-- {
				if strings.HasSuffix(head, s[:n]) {
					head = head[:len(head)-n] + "<secret>"
					break
				}
			}
		}
		b.WriteString(head)
		b.WriteString("…")
		rest = rest[i+len("…"):]
	}
}

// errRedirect: a redirect that follow_redirects does not follow.
var errRedirect = errors.New("redirect refused")

// errHeadersTooLarge: the response head exceeded MaxResponseHeaderBytes.
var errHeadersTooLarge = errors.New("response headers exceed the maximum header size")

// headersTooLarge recognises net/http's error for a response head over
// Transport.MaxResponseHeaderBytes (it has no sentinel).
func headersTooLarge(err error) bool {
	return err != nil && strings.Contains(err.Error(), "server response headers exceeded")
}

// checkBody refuses, before reading a byte, an answer the drivers could not
// use: a Content-Encoding (the prober asks for identity and never decodes,
// so a compressed body, or a decompression bomb, is never expanded) or a
// declared length over max_response_bytes.
func (ex *exchange) checkBody(r *Result) bool {
	h := ex.resp.Header
	if ce := strings.TrimSpace(h.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "identity") {
		r.Outcome = OutcomeProtocolError
		r.Err = fmt.Errorf("server sent Content-Encoding %q although the request asked for identity; compressed answers are not decoded", sanitize([]byte(ce)))
		return false
	}
	if n := ex.resp.ContentLength; n > ex.t.opts.MaxResponseBytes {
		r.Outcome = OutcomeProtocolError
		r.Err = fmt.Errorf("Content-Length %d: %w (max_response_bytes %d)", n, errBodyTooLarge, ex.t.opts.MaxResponseBytes)
		return false
	}
	return true
}

// checkRedirect is the redirect policy of a target: by default none is
// followed (the 3xx becomes a protocol_error naming the Location); with
// follow_redirects, at most DefaultMaxRedirects, only to http(s). net/http
// drops Authorization and other credentials when a redirect leaves the
// original host, and re-sends the body on 307 and 308.
func checkRedirect(follow bool) func(*http.Request, []*http.Request) error {
	if !follow {
		return func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > DefaultMaxRedirects {
			return fmt.Errorf("%w: stopped after %d redirects", errRedirect, DefaultMaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w: redirect to scheme %q", errRedirect, req.URL.Scheme)
		}
		return nil
	}
}
