package probe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func statusHandler(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "https://elsewhere.example/v1/chat/completions?key=abc")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// hijackHandler writes a chunked SSE response by hand, then resets the
// connection (SO_LINGER 0 makes Close send RST).
func hijackHandler(events int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, bufrw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if events >= 0 {
			_, _ = bufrw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			for range events {
				chunk := "data: " + chatDelta("a") + "\n\n"
				_, _ = fmt.Fprintf(bufrw, "%x\r\n%s\r\n", len(chunk), chunk)
			}
			_ = bufrw.Flush()
			time.Sleep(50 * time.Millisecond)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// stallHandler sends the given steps, then holds the stream open silently
// until the client goes away.
func stallHandler(steps ...step) http.HandlerFunc {
	inner := sseHandler(steps...)
	return func(w http.ResponseWriter, r *http.Request) {
		inner(w, r)
		<-r.Context().Done()
	}
}

func TestOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.Handler
		mod      func(*TargetOptions)
		timeout  time.Duration
		stream   bool
		want     Outcome
		contains string
	}{
		{name: "400 JSON error", handler: statusHandler(400, "application/json", `{"error":{"message":"max_tokens too large","type":"BadRequestError","code":400}}`),
			stream: true, want: OutcomeHTTP4xx, contains: "HTTP 400 Bad Request: server error (code 400, type BadRequestError): max_tokens too large"},
		{name: "404 flat SGLang error", handler: statusHandler(404, "application/json", `{"object":"error","message":"model not found","type":"NotFoundError","param":null,"code":404}`),
			stream: true, want: OutcomeHTTP4xx, contains: "model not found"},
		{name: "422 FastAPI detail", handler: statusHandler(422, "application/json", `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`),
			stream: true, want: OutcomeHTTP4xx, contains: "field required"},
		{name: "429 plain text", handler: statusHandler(429, "text/plain", "slow down\n\x00please"),
			stream: true, want: OutcomeHTTP4xx, contains: "HTTP 429 Too Many Requests: slow down \ufffdplease"},
		{name: "503 TGI", handler: statusHandler(503, "application/json", `{"error":"overloaded","error_type":"overloaded"}`),
			stream: true, want: OutcomeHTTP5xx, contains: "overloaded"},
		{name: "500 empty body", handler: statusHandler(500, "", ""), stream: false, want: OutcomeHTTP5xx, contains: "HTTP 500 Internal Server Error"},
		{name: "redirect not followed", handler: statusHandler(302, "", ""), stream: true, want: OutcomeProtocolError,
			contains: "redirected with HTTP 302 to https://elsewhere.example/v1/chat/completions;"},
		{name: "204", handler: statusHandler(204, "", ""), stream: true, want: OutcomeProtocolError, contains: "HTTP 204"},
		{name: "reset mid-stream", handler: hijackHandler(2), stream: true, want: OutcomeIncomplete, contains: "reading the stream"},
		{name: "reset before response", handler: hijackHandler(-1), stream: true, want: OutcomeIncomplete, contains: "waiting for the response head"},
		{name: "truncated without DONE", handler: sseHandler(ev(chatDelta("a")), ev(chatFinish("stop"))), stream: true, want: OutcomeIncomplete, contains: "without [DONE] after 1 output chunks"},
		{name: "stall mid-stream", handler: stallHandler(ev(chatDelta("a"))), mod: func(o *TargetOptions) { o.StreamIdleTimeout = 300 * time.Millisecond },
			stream: true, want: OutcomeStreamStalled, contains: "no bytes for 300ms"},
		{name: "stall before first byte of body", handler: stallHandler(), mod: func(o *TargetOptions) { o.StreamIdleTimeout = 300 * time.Millisecond },
			stream: true, want: OutcomeStreamStalled},
		{name: "malformed JSON chunk", handler: sseHandler(ev(chatDelta("a")), ev(`{"choices":[{"delta":`), ev("[DONE]")), stream: true,
			want: OutcomeProtocolError, contains: "chunk after 1 output chunks is not valid JSON"},
		{name: "wrong JSON type", handler: sseHandler(ev(`{"choices":"nope"}`), ev("[DONE]")), stream: true, want: OutcomeProtocolError},
		{name: "mid-stream error vLLM", handler: sseHandler(ev(chatDelta("a")), ev(`{"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}`), ev("[DONE]")),
			stream: true, want: OutcomeHTTP5xx, contains: "mid-stream server error (code 500, type InternalServerError): Internal server error"},
		{name: "mid-stream flat error", handler: sseHandler(ev(`{"object":"error","message":"bad","type":"BadRequestError","code":"400"}`)),
			stream: true, want: OutcomeHTTP4xx, contains: "bad"},
		{name: "mid-stream llama.cpp error line", handler: sseHandler(ev(chatDelta("a")), raw("error: {\"code\":500,\"message\":\"kv cache full\",\"type\":\"server_error\"}\n\n"), ev("[DONE]")),
			stream: true, want: OutcomeHTTP5xx, contains: "kv cache full"},
		{name: "mid-stream error without code", handler: sseHandler(ev(`{"error":"incomplete generation","error_type":"incomplete_generation"}`)),
			stream: true, want: OutcomeProtocolError, contains: "type incomplete_generation): incomplete generation"},
		{name: "event: error", handler: sseHandler(raw("event: error\ndata: boom\n\n")), stream: true, want: OutcomeProtocolError, contains: "boom"},
		{name: "stream answered with JSON", handler: statusHandler(200, "application/json", `{"choices":[{"message":{"content":"hi"}}]}`),
			stream: true, want: OutcomeProtocolError, contains: "single JSON document"},
		{name: "stream answered with JSON error", handler: statusHandler(200, "application/json; charset=utf-8", `{"error":{"message":"nope","code":503}}`),
			stream: true, want: OutcomeHTTP5xx, contains: "nope"},
		{name: "non-stream invalid JSON", handler: statusHandler(200, "application/json", `{"choices":`), want: OutcomeProtocolError, contains: "not valid JSON"},
		{name: "non-stream no choices", handler: statusHandler(200, "application/json", `{"id":"x"}`), want: OutcomeProtocolError, contains: "no choices"},
		{name: "non-stream too large", handler: statusHandler(200, "application/json", `{"choices":[{"message":{"content":"`+strings.Repeat("x", 2000)+`"}}]}`),
			mod: func(o *TargetOptions) { o.MaxResponseBytes = 1000 }, want: OutcomeProtocolError, contains: "maximum response size"},
		{name: "deadline before head", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The server notices the client leaving only once the body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}),
			timeout: 300 * time.Millisecond, stream: true, want: OutcomeTimeout, contains: "waiting for the response head"},
		{name: "deadline mid-stream", handler: stallHandler(ev(chatDelta("a")), evAfter(100*time.Millisecond, chatDelta("b"))),
			timeout: 400 * time.Millisecond, stream: true, want: OutcomeTimeout, contains: "probe deadline exceeded"},
		{name: "deadline in non-stream body", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}), timeout: 300 * time.Millisecond, want: OutcomeTimeout, contains: "reading the body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.handler)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, tt.mod)
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 20 * time.Second
			}
			start := time.Now()
			r := probeOnce(t, d, &Request{Prompt: "x", MaxTokens: 4, Stream: tt.stream}, timeout)
			wantOutcome(t, r, tt.want, tt.contains)
			if r.Start.IsZero() || r.Start.Before(start) || r.RequestID == "" {
				t.Errorf("Start %v RequestID %q", r.Start, r.RequestID)
			}
			if r.EndToEnd <= 0 {
				t.Errorf("EndToEnd = %v on failure", r.EndToEnd)
			}
		})
	}
}

func TestConnectErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		d, _ := newDriver(t, ProtocolOpenAIChat, "http://"+addr, nil)
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "connection refused")
		if r.StatusCode != 0 || !strings.HasPrefix(r.Err.Error(), "connecting: dial tcp") {
			t.Errorf("status %d err %v", r.StatusCode, r.Err)
		}
	})
	t.Run("dns", func(t *testing.T) {
		d, _ := newDriver(t, ProtocolOpenAIChat, "http://no-such-host.invalid:8000", func(o *TargetOptions) { o.ConnectTimeout = 3 * time.Second })
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "no-such-host.invalid")
	})
}

// writeCertPEM writes DER certificates as a PEM file.
func writeCertPEM(t *testing.T, der ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	var b strings.Builder
	for _, d := range der {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: d})
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the server's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestTLS(t *testing.T) {
	var proto atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		sseHandler(ev(chatDelta("a")), ev(chatDelta("b")), ev("[DONE]"))(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)

	t.Run("wrong CA", func(t *testing.T) {
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.TLS.CAFile = writeCertPEM(t, otherCA(t)) })
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "certificate")
	})
	t.Run("right CA, server name, HTTP/2", func(t *testing.T) {
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) {
			o.TLS.CAFile = writeCertPEM(t, ts.Certificate().Raw)
			o.TLS.ServerName = "example.com"
		})
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if !r.Phases.HasTLS || len(r.Chunks) != 2 {
			t.Errorf("phases %+v chunks %+v", r.Phases, r.Chunks)
		}
		if proto.Load() != 2 {
			t.Errorf("server saw HTTP/%d, want 2", proto.Load())
		}
		r2 := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r2, OutcomeSuccess, "")
		if !r2.Phases.ConnectionReused || r2.Phases.HasTLS {
			t.Errorf("second probe over h2 should reuse the connection: %+v", r2.Phases)
		}
	})
	t.Run("insecure skip verify", func(t *testing.T) {
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.TLS.InsecureSkipVerify = true })
		wantOutcome(t, probeOnce(t, d, streamReq(), 10*time.Second), OutcomeSuccess, "")
	})
}

// TestKeepsProbingAfterFaults checks a driver stays usable after every kind
// of failure on the same pool.
func TestKeepsProbingAfterFaults(t *testing.T) {
	var n atomic.Int32
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			hijackHandler(1)(w, r)
		case 2:
			sseHandler(ev(`{`))(w, r)
		case 3:
			statusHandler(500, "", "x")(w, r)
		default:
			sseHandler(ev(chatDelta("ok")), ev("[DONE]"))(w, r)
		}
	}))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	for i, want := range []Outcome{OutcomeIncomplete, OutcomeProtocolError, OutcomeHTTP5xx, OutcomeSuccess, OutcomeSuccess} {
		if r := probeOnce(t, d, streamReq(), 10*time.Second); r.Outcome != want {
			t.Errorf("probe %d: %s (%v), want %s", i, r.Outcome, r.Err, want)
		}
	}
}
