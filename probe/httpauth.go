package probe

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	promconfig "github.com/prometheus/common/config"
	"golang.org/x/oauth2"

	"github.com/llm-prober/llm-prober/internal/redact"
)

// This file is the HTTP drivers' part of Prometheus' http_client_config:
// the forward proxy on the probe's own transport, and authentication by
// prometheus/common's round trippers, run before the probe's clock starts.
//
// The probe keeps its own transport (phase timings, connection reuse and
// the stale-connection retry, size limits, no transparent gzip), so the
// library's round trippers are not put in front of it. They run instead
// over capture, an inner round tripper that sends nothing and only records
// the request as the chain passed it on: the headers the chain added are
// then set on the probe's request. An OAuth2 token fetch (the one step
// that goes to the network) thus happens while the request is built, never
// between the start of the probe and its first token.

const (
	// tokenIOTimeout bounds each read and write on a connection to the
	// OAuth2 token endpoint: the library's token client has no timeout
	// of its own, and a hung endpoint would otherwise hold every later
	// probe of the target.
	tokenIOTimeout = 30 * time.Second
	// maxSeenSecrets bounds the credentials remembered for redaction
	// (tokens rotate; the newest are kept).
	maxSeenSecrets = 32
)

// setProxy routes the transport through opts.Proxy; without one it stays
// direct (HTTP_PROXY and friends apply only with proxy_from_environment).
func setProxy(tr *http.Transport, opts TargetOptions) {
	pc := opts.Proxy
	tr.Proxy = pc.Proxy()
	tr.ProxyConnectHeader = pc.GetProxyConnectHeader()
	if opts.DisableHTTP2 {
		var p http.Protocols
		p.SetHTTP1(true)
		tr.Protocols = &p
		tr.ForceAttemptHTTP2 = false
	}
}

// httpClientSecrets are the secrets of opts' http_client_config known when
// the target is built: inline credentials, proxy CONNECT headers and a
// proxy URL's password. Those read from files are remembered by the
// authorizer when read.
func httpClientSecrets(opts TargetOptions) []string {
	var out []string
	add := func(s string) {
		if len(s) >= redact.MinSecretLen {
			out = append(out, s)
		}
	}
	if b := opts.BasicAuth; b != nil {
		add(string(b.Password))
	}
	if a := opts.Authorization; a != nil {
		add(string(a.Credentials))
	}
	if o := opts.OAuth2; o != nil {
		add(string(o.ClientSecret))
		add(string(o.ClientCertificateKey))
	}
	for _, pc := range []*promconfig.ProxyConfig{&opts.Proxy, oauth2Proxy(opts.OAuth2)} {
		if pc == nil {
			continue
		}
		for _, vs := range pc.ProxyConnectHeader {
			for _, v := range vs {
				out = append(out, redact.CredentialParts(string(v))...)
			}
		}
		if u := pc.ProxyURL.URL; u != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				// Sent as Proxy-Authorization: Basic base64(user:password).
				basic := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p))
				out = append(out, redact.CredentialParts("Basic "+basic)...)
				add(p)
			}
		}
	}
	return out
}

func oauth2Proxy(o *promconfig.OAuth2) *promconfig.ProxyConfig {
	if o == nil {
		return nil
	}
	return &o.ProxyConfig
}

// authorizer computes a request's credentials with prometheus/common's
// round trippers.
type authorizer struct {
	rt http.RoundTripper
	// network is set when the chain may fetch an OAuth2 token. It then
	// runs in its own goroutine, one at a time (sem), so that a probe
	// whose deadline passes during a fetch returns, and a hung token
	// endpoint holds one goroutine rather than one per probe.
	network   bool
	sem       chan struct{}
	tokenHost string

	mu   sync.Mutex
	seen []string
}

// newAuthorizer builds the chain for opts; nil when opts authenticate by
// none of basic_auth, authorization or oauth2.
func newAuthorizer(opts TargetOptions, dialer *net.Dialer) *authorizer {
	if opts.BasicAuth == nil && opts.Authorization == nil && opts.OAuth2 == nil {
		return nil
	}
	a := &authorizer{}
	var rt http.RoundTripper = capture{}
	if c := opts.Authorization; c != nil {
		typ := strings.TrimSpace(c.Type)
		if typ == "" {
			typ = "Bearer"
		}
		rt = promconfig.NewAuthorizationCredentialsRoundTripper(typ, a.secret(c.Credentials, c.CredentialsFile), rt)
	}
	if b := opts.BasicAuth; b != nil {
		var user promconfig.SecretReader
		switch {
		case b.Username != "":
			user = promconfig.NewInlineSecret(b.Username)
		case b.UsernameFile != "":
			user = promconfig.NewFileSecret(b.UsernameFile)
		}
		rt = promconfig.NewBasicAuthRoundTripper(user, a.secret(b.Password, b.PasswordFile), rt)
	}
	if o := opts.OAuth2; o != nil {
		cred := a.secret(o.ClientSecret, o.ClientSecretFile)
		if o.GrantType == "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			cred = a.secret(o.ClientCertificateKey, o.ClientCertificateKeyFile)
		}
		if u, err := url.Parse(o.TokenURL); err == nil {
			a.tokenHost = u.Host
		}
		cfg := *o
		rt = promconfig.NewOAuth2RoundTripper(cred, &cfg, rt, promconfig.WithDialContextFunc(deadlineDial(dialer, tokenIOTimeout)))
		a.network = true
		a.sem = make(chan struct{}, 1)
	}
	a.rt = rt
	return a
}

// secret reads an inline or file secret and remembers each value read.
func (a *authorizer) secret(inline promconfig.Secret, file string) promconfig.SecretReader {
	switch {
	case inline != "":
		return &rememberedSecret{SecretReader: promconfig.NewInlineSecret(string(inline)), a: a}
	case file != "":
		return &rememberedSecret{SecretReader: promconfig.NewFileSecret(file), a: a}
	}
	return nil
}

type rememberedSecret struct {
	promconfig.SecretReader
	a *authorizer
}

func (s *rememberedSecret) Fetch(ctx context.Context) (string, error) {
	v, err := s.SecretReader.Fetch(ctx)
	if err == nil {
		s.a.remember(v)
	}
	return v, err
}

// remember adds credentials to the redaction list, newest last.
func (a *authorizer) remember(secrets ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range secrets {
		if len(s) < redact.MinSecretLen {
			continue
		}
		if i := slices.Index(a.seen, s); i >= 0 {
			if i == len(a.seen)-1 {
				continue
			}
			a.seen = slices.Delete(a.seen, i, i+1)
		}
		a.seen = append(a.seen, s)
		if len(a.seen) > maxSeenSecrets {
			a.seen = slices.Delete(a.seen, 0, len(a.seen)-maxSeenSecrets)
		}
	}
}

// secrets are the credentials read or produced so far.
func (a *authorizer) secrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// authorize returns the headers the chain sets on a POST to endpoint whose
// headers setHeaders fills (Authorization, in practice). It returns when
// ctx is done even if a token fetch is still under way.
func (a *authorizer) authorize(ctx context.Context, endpoint string, setHeaders func(*http.Request)) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, nil)
	if err != nil {
		return nil, errBuildRequest
	}
	setHeaders(req)
	if !a.network {
		return a.run(req)
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	type result struct {
		h   http.Header
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-a.sem }()
		h, err := a.run(req)
		done <- result{h, err}
	}()
	select {
	case res := <-done:
		return res.h, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// captureKey carries where capture stores the request it was handed.
type captureKey struct{}

// capture is the end of the auth chain: it records the headers of the
// request as the chain passes it on and answers an empty 200, sending
// nothing.
type capture struct{}

func (capture) RoundTrip(req *http.Request) (*http.Response, error) {
	if slot, ok := req.Context().Value(captureKey{}).(*http.Header); ok {
		*slot = req.Header.Clone()
	}
	return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func (a *authorizer) run(req *http.Request) (http.Header, error) {
	var got http.Header
	creq := req.WithContext(context.WithValue(req.Context(), captureKey{}, &got))
	resp, err := a.rt.RoundTrip(creq)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if got == nil {
		return nil, errors.New("the authentication chain did not pass the request on")
	}
	added := http.Header{}
	for k, v := range got {
		if !slices.Equal(req.Header[k], v) {
			added[k] = v
		}
	}
	for _, v := range added.Values("Authorization") {
		a.remember(redact.CredentialParts(v)...)
	}
	return added, nil
}

// failed settles a probe whose credentials could not be had; the request
// was not sent. A request that cannot be built is a protocol_error, as
// without authentication. A token endpoint's HTTP error is http_4xx or http_5xx, as
// the same rejection by the target itself would be; the probe's deadline
// passing is timeout; anything else (token endpoint unreachable, an
// unusable token answer, an unreadable credentials file) is connect_error.
func (a *authorizer) failed(parent context.Context, r *Result, began time.Time, err error) {
	r.Start = time.Now()
	if errors.Is(err, errBuildRequest) {
		r.Outcome, r.Err = OutcomeProtocolError, err
		return
	}
	if perr := parent.Err(); perr != nil {
		r.Outcome = cancelOutcome(perr)
		what := "deadline exceeded"
		if r.Outcome == OutcomeCancelled {
			what = "cancelled"
		}
		r.Err = fmt.Errorf("probe %s after %v while authenticating (fetching the OAuth2 token from %s); the request was not sent: %w",
			what, time.Since(began).Round(time.Millisecond), a.tokenHost, perr)
		return
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		switch {
		case code >= 400 && code < 500:
			r.Outcome = OutcomeHTTP4xx
		case code >= 500 && code < 600:
			r.Outcome = OutcomeHTTP5xx
		default:
			r.Outcome = OutcomeProtocolError
		}
		detail := sanitize(re.Body)
		if re.ErrorCode != "" {
			detail = sanitize([]byte(strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription)))
		}
		if detail != "" {
			detail = ": " + detail
		}
		r.Err = fmt.Errorf("OAuth2 token endpoint %s answered HTTP %d %s%s; the request was not sent", a.tokenHost, code, http.StatusText(code), detail)
		return
	}
	r.Outcome = OutcomeConnectError
	r.Err = fmt.Errorf("authenticating, the request was not sent: %w", unwrapURLError(err))
}

func (a *authorizer) close() {
	ci, ok := a.rt.(interface{ CloseIdleConnections() })
	if !ok {
		return
	}
	if !a.network {
		ci.CloseIdleConnections()
		return
	}
	// Not while a token fetch runs: its client is being replaced. Its
	// connection then closes after the token client's idle timeout.
	select {
	case a.sem <- struct{}{}:
		ci.CloseIdleConnections()
		<-a.sem
	default:
	}
}

// deadlineDial dials with d and bounds every read and write on the
// connection by timeout.
func deadlineDial(d *net.Dialer, timeout time.Duration) promconfig.DialContextFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: c, timeout: timeout}, nil
	}
}

type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(p)
}
