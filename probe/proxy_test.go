package probe

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
)

// forwardProxy is a small HTTP forward proxy on loopback: CONNECT tunnels
// for https targets, absolute-URI forwarding for http ones. It counts what
// it carried and records the headers it was sent, and refuses (407) a
// CONNECT without the expected X-Proxy-Token, as an authenticating egress
// proxy does.
type forwardProxy struct {
	url                *url.URL
	connects, forwards atomic.Int64
	wantToken          string

	mu             sync.Mutex
	connectHeaders []http.Header
	forwardHeaders []http.Header
}

func startProxy(t *testing.T, wantToken string) *forwardProxy {
	t.Helper()
	p := &forwardProxy{wantToken: wantToken}
	fwd := &http.Transport{DialContext: dialMapped}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.URL.Host },
		Transport:     fwd,
		FlushInterval: -1,
	}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		connsMu.Lock()
		conns = append(conns, c)
		connsMu.Unlock()
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.connects.Add(1)
			p.mu.Lock()
			p.connectHeaders = append(p.connectHeaders, r.Header.Clone())
			p.mu.Unlock()
			if r.Header.Get("X-Proxy-Token") != p.wantToken {
				http.Error(w, "proxy token "+r.Header.Get("X-Proxy-Token")+" refused", http.StatusProxyAuthRequired)
				return
			}
			dst, err := dialMapped(r.Context(), "tcp", r.Host)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				dst.Close()
				return
			}
			track(c)
			track(dst)
			_, _ = c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
			wg.Go(func() {
				defer dst.Close()
				_, _ = io.Copy(dst, brw)
			})
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, dst)
			})
			return
		}
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		p.forwards.Add(1)
		p.mu.Lock()
		p.forwardHeaders = append(p.forwardHeaders, r.Header.Clone())
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		fwd.CloseIdleConnections()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	p.url, _ = url.Parse(ts.URL)
	return p
}

func (p *forwardProxy) headers() (connect, forward []http.Header) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]http.Header(nil), p.connectHeaders...), append([]http.Header(nil), p.forwardHeaders...)
}

// proxyConfig routes through p, with user:password in the URL and the
// token as a CONNECT header.
func proxyConfig(p *forwardProxy, user, password, token string) promconfig.ProxyConfig {
	u := *p.url
	if user != "" {
		u.User = url.UserPassword(user, password)
	}
	return promconfig.ProxyConfig{
		ProxyURL:           promconfig.URL{URL: &u},
		ProxyConnectHeader: promconfig.ProxyHeader{"X-Proxy-Token": {promconfig.Secret(token)}},
	}
}

func chatStream() http.Handler {
	return sseHandler(ev(roleChunk()), ev(chatDelta("Hi")), ev(chatDelta(" there")), ev(chatFinish("stop")), ev(usageChunk(3, 2)), ev("[DONE]"))
}

// caPEM is the PEM of a TLS test server's certificate, for tls_config.ca.
func caPEM(ts *httptest.Server) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}))
}

// TestProxyHTTPTarget: an http:// target is reached through the proxy by
// absolute-URI forwarding (no CONNECT), with the proxy URL's credentials
// as Proxy-Authorization, and the connection to the proxy is reused.
func TestProxyHTTPTarget(t *testing.T) {
	var hits atomic.Int64
	target := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		chatStream().ServeHTTP(w, r)
	}))
	p := startProxy(t, "connect-token-1234")
	d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) {
		o.Proxy = proxyConfig(p, "prober", "proxy-pass-5678", "connect-token-1234")
	})
	for i := range 2 {
		r := probeOnce(t, d, streamReq(), 5*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if i == 1 && !r.Phases.ConnectionReused {
			t.Errorf("second probe did not reuse the connection to the proxy: %+v", r.Phases)
		}
	}
	if n := p.forwards.Load(); n != 2 || hits.Load() != 2 {
		t.Fatalf("proxy forwarded %d requests, target saw %d; want 2 and 2", n, hits.Load())
	}
	if n := p.connects.Load(); n != 0 {
		t.Errorf("%d CONNECTs for an http target; want none", n)
	}
	_, fwd := p.headers()
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("prober:proxy-pass-5678"))
	if got := fwd[0].Get("Proxy-Authorization"); got != want {
		t.Errorf("Proxy-Authorization = %q, want %q", got, want)
	}
}

// TestProxyHTTPSTarget: an https:// target is reached through a CONNECT
// tunnel carrying proxy_connect_header; TLS is end to end with the target
// and the tunnel is reused by the next probe.
func TestProxyHTTPSTarget(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		chatStream().ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)
	p := startProxy(t, "connect-token-1234")
	d, logs := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) {
		o.Proxy = proxyConfig(p, "", "", "connect-token-1234")
		o.TLS = promconfig.TLSConfig{CA: caPEM(target)}
	})
	first := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, first, OutcomeSuccess, "")
	if !first.Phases.HasConnect || !first.Phases.HasTLS || first.TLSCertExpiry.IsZero() {
		t.Errorf("first probe: want connect (to the proxy) and TLS (with the target) phases: %+v", first.Phases)
	}
	second := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, second, OutcomeSuccess, "")
	if !second.Phases.ConnectionReused {
		t.Errorf("second probe opened a new tunnel: %+v", second.Phases)
	}
	if n := p.connects.Load(); n != 1 || hits.Load() != 2 {
		t.Fatalf("%d CONNECTs, target saw %d requests; want 1 tunnel carrying 2", n, hits.Load())
	}
	if n := p.forwards.Load(); n != 0 {
		t.Errorf("%d plain forwards for an https target", n)
	}
	connect, _ := p.headers()
	if got := connect[0].Get("X-Proxy-Token"); got != "connect-token-1234" {
		t.Errorf("CONNECT carried X-Proxy-Token %q, want the proxy_connect_header value", got)
	}
	if s := logs.String(); containsAny(s, "connect-token-1234") {
		t.Errorf("logs carry the proxy token:\n%s", s)
	}
}

// TestProxyRefusesConnect: a proxy that refuses the tunnel is a
// connect_error, and the CONNECT header value it echoes is redacted.
func TestProxyRefusesConnect(t *testing.T) {
	target := httptest.NewTLSServer(chatStream())
	t.Cleanup(target.Close)
	p := startProxy(t, "the-right-token")
	d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) {
		o.Proxy = proxyConfig(p, "", "", "wrong-token-0000")
		o.TLS = promconfig.TLSConfig{CA: caPEM(target)}
	})
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeConnectError, "")
	if p.connects.Load() != 1 {
		t.Errorf("the proxy was not asked: %d CONNECTs", p.connects.Load())
	}
	if containsAny(r.Err.Error(), "wrong-token-0000") {
		t.Errorf("error carries the CONNECT header: %v", r.Err)
	}
}

// TestProxyFromEnvironment: the environment's HTTP_PROXY is ignored
// unless proxy_from_environment is set. The target is named by a TEST-NET
// address that only the proxy can reach (it maps it to loopback): loopback
// targets are never proxied by the environment's settings.
func TestProxyFromEnvironment(t *testing.T) {
	target := startServer(t, chatStream())
	p := startProxy(t, "")
	t.Setenv("HTTP_PROXY", p.url.String())
	t.Setenv("NO_PROXY", "")
	unreachable := "http://" + testNetAddr(target.Listener.Addr())

	direct, _ := newDriver(t, ProtocolOpenAIChat, unreachable, func(o *TargetOptions) { o.ConnectTimeout = 200 * time.Millisecond })
	wantOutcome(t, probeOnce(t, direct, streamReq(), 5*time.Second), OutcomeConnectError, "")
	if n := p.forwards.Load() + p.connects.Load(); n != 0 {
		t.Errorf("HTTP_PROXY used without proxy_from_environment: %d proxied", n)
	}

	viaEnv, _ := newDriver(t, ProtocolOpenAIChat, unreachable, func(o *TargetOptions) {
		o.Proxy = promconfig.ProxyConfig{ProxyFromEnvironment: true}
	})
	wantOutcome(t, probeOnce(t, viaEnv, streamReq(), 5*time.Second), OutcomeSuccess, "")
	if n := p.forwards.Load(); n != 1 {
		t.Errorf("proxy_from_environment: %d forwarded, want 1", n)
	}
}

// testNetAddr is addr's port on 192.0.2.1 (TEST-NET-1, RFC 5737), which the
// test proxy maps back to loopback.
func testNetAddr(addr net.Addr) string {
	_, port, _ := net.SplitHostPort(addr.String())
	return net.JoinHostPort(testNetIP, port)
}

const testNetIP = "192.0.2.1"

// dialMapped dials addr, with TEST-NET-1 mapped to loopback.
func dialMapped(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == testNetIP {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestHTTP2Setting: HTTP/2 is negotiated over TLS by default and kept off
// with enable_http2: false.
func TestHTTP2Setting(t *testing.T) {
	var proto atomic.Int64
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int64(r.ProtoMajor))
		chatStream().ServeHTTP(w, r)
	}))
	target.EnableHTTP2 = true
	target.StartTLS()
	t.Cleanup(target.Close)
	for _, disable := range []bool{false, true} {
		d, _ := newDriver(t, ProtocolOpenAIChat, target.URL, func(o *TargetOptions) {
			o.TLS = promconfig.TLSConfig{CA: caPEM(target)}
			o.DisableHTTP2 = disable
		})
		wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
		want := int64(2)
		if disable {
			want = 1
		}
		if got := proto.Load(); got != want {
			t.Errorf("DisableHTTP2 %v: HTTP/%d, want HTTP/%d", disable, got, want)
		}
	}
}

// bufferedConnServer helper: the requests' Authorization headers, as a
// connServer script sees them.
type authLog struct {
	mu    sync.Mutex
	auths []string
}

func (l *authLog) serveAll(c net.Conn, br *bufio.Reader) {
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		l.mu.Lock()
		l.auths = append(l.auths, req.Header.Get("Authorization"))
		l.mu.Unlock()
		answer(c, false)
	}
}

func (l *authLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.auths...)
}

// A probe every minute with a minute's jitter comes back to its target
// after up to 2 minutes; its connection must still be pooled then, or
// every such gap pays a new connection (and TLS handshake) per request.
func TestIdleConnectionsOutlastAJitteredMinute(t *testing.T) {
	d, _ := newDriver(t, ProtocolOpenAIChat, "http://127.0.0.1:1", nil)
	tr := d.(*openAIDriver).t.tr
	if longest := 2 * time.Minute; tr.IdleConnTimeout < longest {
		t.Errorf("idle connections are closed after %s, before a probe every 60s with 60s of jitter comes back (up to %s)", tr.IdleConnTimeout, longest)
	}
}
