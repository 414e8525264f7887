package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
)

// tokenServer is an OAuth2 client-credentials token endpoint: it checks
// the client's id and secret, waits delay, and hands out token; status,
// when set, is answered instead, with a body quoting the client's
// credentials back.
type tokenServer struct {
	*httptest.Server
	requests atomic.Int64
	delay    time.Duration
	status   int
	token    atomic.Value // string
}

func startTokenServer(t *testing.T, token string, delay time.Duration, status int) *tokenServer {
	t.Helper()
	s := &tokenServer{delay: delay, status: status}
	s.token.Store(token)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if !sleepCtx(r.Context(), s.delay) {
			return
		}
		if s.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(s.status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "client " + id + " with secret " + secret + " refused"})
			return
		}
		if id != "llm-prober" || secret != "client-secret-1234" {
			http.Error(w, "wrong client", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": s.token.Load(), "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(s.Close)
	return s
}

func oauth2Options(ts *tokenServer) *promconfig.OAuth2 {
	return &promconfig.OAuth2{ClientID: "llm-prober", ClientSecret: "client-secret-1234", TokenURL: ts.URL + "/oauth2/token", Scopes: []string{"inference"}}
}

// authTarget is a fast chat server that records each request's
// Authorization header, and answers 401 quoting it when it is not want.
func authTarget(t *testing.T, want func(string) bool) (*httptest.Server, *authLog) {
	t.Helper()
	var log authLog
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		log.mu.Lock()
		log.auths = append(log.auths, got)
		log.mu.Unlock()
		if !want(got) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":` + quote("bad credentials "+got) + `,"code":401}}`))
			return
		}
		chatStream().ServeHTTP(w, r)
	}))
	return ts, &log
}

// TestOAuth2TokenOutsideTTFT: the token is fetched once, before the
// probe's clock starts (a 200 ms token endpoint does not show in the first
// probe's TTFT), reused by later probes, and sent as a Bearer token.
func TestOAuth2TokenOutsideTTFT(t *testing.T) {
	const delay = 200 * time.Millisecond
	tokens := startTokenServer(t, "access-token-abcd", delay, 0)
	target, log := authTarget(t, func(a string) bool { return a == "Bearer access-token-abcd" })
	d, logs := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
	for i := range 3 {
		began := time.Now()
		r := probeOnce(t, d, streamReq(), 5*time.Second)
		took := time.Since(began)
		wantOutcome(t, r, OutcomeSuccess, "")
		if i == 0 {
			if took < delay {
				t.Fatalf("the first probe took %v; the token endpoint alone takes %v", took, delay)
			}
			// TTFT and the whole measured request stay far below the
			// token fetch, which happened before Start.
			if r.TTFT >= delay/2 || r.EndToEnd >= delay/2 || r.Start.Sub(began) < delay {
				t.Errorf("first probe: ttft %v, end-to-end %v, started %v after the call; the %v token fetch is inside the measured time",
					r.TTFT, r.EndToEnd, r.Start.Sub(began), delay)
			}
		}
	}
	if n := tokens.requests.Load(); n != 1 {
		t.Errorf("%d token requests for 3 probes; want 1 (cached until it expires)", n)
	}
	if got := log.get(); len(got) != 3 || got[2] != "Bearer access-token-abcd" {
		t.Errorf("target saw Authorization %q", got)
	}
	if containsAny(logs.String(), "access-token-abcd", "client-secret-1234") {
		t.Errorf("logs carry a credential:\n%s", logs)
	}
}

// TestOAuth2TokenRedacted: the target quoting the token back in its error
// gets <secret>, and so does a token endpoint quoting the client secret.
func TestOAuth2TokenRedacted(t *testing.T) {
	tokens := startTokenServer(t, "access-token-wxyz", 0, 0)
	target, _ := authTarget(t, func(string) bool { return false })
	d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeHTTP4xx, "bad credentials <secret>")
	if containsAny(r.Err.Error(), "access-token-wxyz", "access-toke") {
		t.Errorf("error carries the token: %v", r.Err)
	}
}

// TestOAuth2TokenFailures: a refusing token endpoint fails the probe as the
// target's own refusal would, with the endpoint named and the secret
// redacted; an unreachable one is a connect_error; a hung one ends at the
// probe's deadline. The target is never asked.
func TestOAuth2TokenFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		want   Outcome
		errHas string
	}{
		{"refused", http.StatusUnauthorized, OutcomeHTTP4xx, "OAuth2 token endpoint 127.0.0.1:"},
		{"server error", http.StatusServiceUnavailable, OutcomeHTTP5xx, "answered HTTP 503 Service Unavailable: invalid_client client llm-prober with secret <secret> refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tokens := startTokenServer(t, "unused", 0, c.status)
			target, log := authTarget(t, func(string) bool { return true })
			d, logs := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
			r := probeOnce(t, d, streamReq(), 5*time.Second)
			wantOutcome(t, r, c.want, c.errHas)
			if containsAny(r.Err.Error()+logs.String(), "client-secret-1234", "client-secr") {
				t.Errorf("the client secret leaks: %v\n%s", r.Err, logs)
			}
			if len(log.get()) != 0 || r.TTFT != 0 || r.Start.IsZero() {
				t.Errorf("target asked %d times, ttft %v, start %v", len(log.get()), r.TTFT, r.Start)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		tokens := startTokenServer(t, "unused", 0, 0)
		tokens.Close()
		target, log := authTarget(t, func(string) bool { return true })
		d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
		r := probeOnce(t, d, streamReq(), 5*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "authenticating, the request was not sent")
		if len(log.get()) != 0 {
			t.Error("the target was asked without a token")
		}
	})
	t.Run("hung", func(t *testing.T) {
		tokens := startTokenServer(t, "late-token-0000", 2*time.Second, 0)
		target, _ := authTarget(t, func(string) bool { return true })
		d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
		began := time.Now()
		r := probeOnce(t, d, streamReq(), 300*time.Millisecond)
		wantOutcome(t, r, OutcomeTimeout, "while authenticating (fetching the OAuth2 token from 127.0.0.1:")
		if took := time.Since(began); took > time.Second {
			t.Errorf("the probe outlived its deadline by far: %v", took)
		}
		// A second probe waits for the same fetch rather than starting
		// another, and succeeds once it has the token.
		r = probeOnce(t, d, streamReq(), 5*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if n := tokens.requests.Load(); n != 1 {
			t.Errorf("%d token requests, want 1", n)
		}
	})
}

// TestBasicAuthAndCredentialsFile: basic_auth with an inline password or a
// password file, and authorization with a credentials file, re-read for
// every request so a rotated file needs no new driver. Echoed credentials
// are redacted.
func TestBasicAuthAndCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	pwFile, credFile := filepath.Join(dir, "pw"), filepath.Join(dir, "cred")
	writeFile := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(pwFile, "file-password-1357")
	writeFile(credFile, "first-credential-2468")

	var mu sync.Mutex
	var basic [][2]string
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		mu.Lock()
		basic = append(basic, [2]string{u, p})
		mu.Unlock()
		chatStream().ServeHTTP(w, r)
	}))
	for _, b := range []*promconfig.BasicAuth{
		{Username: "prober", Password: "inline-password-9753"},
		{Username: "prober", PasswordFile: pwFile},
	} {
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.BasicAuth = b })
		wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
	}
	if want := [][2]string{{"prober", "inline-password-9753"}, {"prober", "file-password-1357"}}; len(basic) != 2 || basic[0] != want[0] || basic[1] != want[1] {
		t.Errorf("target saw basic auth %q, want %q", basic, want)
	}

	target, log := authTarget(t, func(a string) bool { return !strings.Contains(a, "second") })
	d, logs := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) {
		o.Authorization = &promconfig.Authorization{Type: "Token", CredentialsFile: credFile}
	})
	wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
	writeFile(credFile, "second-credential-8642")
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeHTTP4xx, "bad credentials <secret>")
	if got := log.get(); len(got) != 2 || got[0] != "Token first-credential-2468" || got[1] != "Token second-credential-8642" {
		t.Errorf("target saw %q; want the file's content, re-read", got)
	}
	if containsAny(r.Err.Error()+logs.String(), "second-credential", "first-credential") {
		t.Errorf("a credential read from the file leaks: %v\n%s", r.Err, logs)
	}

	os.Remove(credFile)
	r = probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeConnectError, "unable to read authorization credentials")
	if len(log.get()) != 2 {
		t.Error("the target was asked without credentials")
	}
}

// TestAuthOnStaleConnectionRetry: the retry of a request whose pooled
// connection died carries the same credentials, without a second token
// fetch.
func TestAuthOnStaleConnectionRetry(t *testing.T) {
	tokens := startTokenServer(t, "access-token-retry", 0, 0)
	var log authLog
	srv := newConnServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		log.mu.Lock()
		log.auths = append(log.auths, req.Header.Get("Authorization"))
		log.mu.Unlock()
		_, _ = io.Copy(io.Discard, req.Body)
		answer(c, false)
		nextRequest(br)
		reset(c)
	}, log.serveAll)
	d, _ := newDriver(t, ProtocolOpenAIChat, srv.url(), func(o *TargetOptions) { o.OAuth2 = oauth2Options(tokens) })
	wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.Retry == nil {
		t.Fatal("the second probe was not retried")
	}
	if got := log.get(); len(got) != 2 || got[0] != "Bearer access-token-retry" || got[1] != got[0] {
		t.Errorf("Authorization of the first request and of the retry: %q", got)
	}
	if n := tokens.requests.Load(); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}

// TestAuthorizeHonoursContext: authorize returns at the caller's deadline
// while another probe's token fetch holds the chain.
func TestAuthorizeHonoursContext(t *testing.T) {
	tokens := startTokenServer(t, "slow-token-1111", 500*time.Millisecond, 0)
	a := newAuthorizer(TargetOptions{OAuth2: oauth2Options(tokens)}, &net.Dialer{})
	defer a.close()
	first := make(chan error, 1)
	go func() {
		_, err := a.authorize(context.Background(), "http://target/v1/chat/completions", func(*http.Request) {})
		first <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := a.authorize(ctx, "http://target/v1/chat/completions", func(*http.Request) {}); err == nil || time.Since(began) > 400*time.Millisecond {
		t.Errorf("second authorize: %v after %v; want the deadline", err, time.Since(began))
	}
	if err := <-first; err != nil {
		t.Errorf("first authorize: %v", err)
	}
}
