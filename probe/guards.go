package probe

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/llm-prober/llm-prober/internal/redact"
)

// Guards against hostile or broken servers that the HTTP drivers share, and
// the secret handling that keeps credentials out of errors. The bounds are
// listed in docs/security.md.

// DefaultMaxRedirects bounds the redirects followed when a target sets
// follow_redirects.
const DefaultMaxRedirects = 5

// SensitiveHeader reports whether a header name looks like it carries a
// credential (Authorization, X-Api-Key, Cookie, …).
func SensitiveHeader(name string) bool { return redact.SensitiveHeader(name) }

// targetPolicy is what is secret for a target: its API key, configured
// header values (redact.HeaderSecret), its URL's password,
// http_client_config's inline secrets, and the query parameters named as
// secret.
func targetPolicy(opts TargetOptions) *redact.Policy {
	secrets := httpClientSecrets(opts)
	if opts.BearerToken != "" {
		secrets = append(secrets, opts.BearerToken)
	}
	for k, v := range opts.Headers {
		if redact.HeaderSecret(k, v) {
			secrets = append(secrets, v)
		}
	}
	if u, err := url.Parse(opts.URL); err == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			secrets = append(secrets, p)
		}
	}
	return redact.New(opts.SecretQueryParams, secrets...)
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
// follow_redirects, at most DefaultMaxRedirects, only to http(s). A
// redirect to another origin (scheme, host or port) than the target's is
// sent without any credential the target adds (Authorization, whether
// from the API key or http_client_config, every configured header, and
// any header named like a credential) unless opts trust that origin.
// net/http alone would keep them for a subdomain or another port, and
// custom headers everywhere. net/http re-sends the body on 307 and 308.
func checkRedirect(opts TargetOptions) func(*http.Request, []*http.Request) error {
	if !opts.FollowRedirects {
		return func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	trusted := make([]string, 0, len(opts.TrustedRedirectOrigins))
	for _, o := range opts.TrustedRedirectOrigins {
		if u, err := url.Parse(o); err == nil {
			trusted = append(trusted, Origin(u))
		}
	}
	configured := make([]string, 0, len(opts.Headers))
	for k := range opts.Headers {
		configured = append(configured, http.CanonicalHeaderKey(k))
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > DefaultMaxRedirects {
			return fmt.Errorf("%w: stopped after %d redirects", errRedirect, DefaultMaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w: redirect to scheme %q", errRedirect, req.URL.Scheme)
		}
		o := Origin(req.URL)
		if o == Origin(via[0].URL) || slices.Contains(trusted, o) {
			return nil
		}
		for k := range req.Header {
			ck := http.CanonicalHeaderKey(k)
			if ck == "Authorization" || ck == "Cookie" || slices.Contains(configured, ck) || redact.SensitiveHeader(ck) {
				delete(req.Header, k)
			}
		}
		return nil
	}
}

// Origin is u's scheme://host:port, lower case, with the scheme's
// default port written out, so that two spellings of one origin compare
// equal.
func Origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
