package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// step is one write of a scripted SSE server, after an optional delay.
type step struct {
	delay time.Duration
	data  string
}

func ev(data string) step { return step{data: "data: " + data + "\n\n"} }
func evAfter(d time.Duration, data string) step {
	return step{delay: d, data: "data: " + data + "\n\n"}
}
func raw(s string) step { return step{data: s} }
func chatDelta(content string) string {
	return `{"choices":[{"index":0,"delta":{"content":` + quote(content) + `},"finish_reason":null}]}`
}
func chatFinish(reason string) string {
	return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}
func usageChunk(prompt, completion int) string {
	return `{"choices":[],"usage":{"prompt_tokens":` + itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `}}`
}
func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
func itoa(n int) string     { b, _ := json.Marshal(n); return string(b) }
func roleChunk() string {
	return `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
}
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sseHandler streams the steps, flushing after each.
func sseHandler(steps ...step) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		for _, s := range steps {
			if s.delay > 0 && !sleepCtx(r.Context(), s.delay) {
				return
			}
			if _, err := io.WriteString(w, s.data); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// recorded is what a test server saw of the last request.
type recorded struct {
	mu     sync.Mutex
	header http.Header
	body   map[string]any
	path   string
}

func (rec *recorded) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		rec.mu.Lock()
		rec.header, rec.body, rec.path = r.Header.Clone(), m, r.URL.Path
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	})
}

func (rec *recorded) get() (http.Header, map[string]any, string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.header, rec.body, rec.path
}

func startServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func newDriver(t *testing.T, protocol, url string, mod func(*TargetOptions)) (Driver, *testutil.SyncBuffer) {
	t.Helper()
	opts := TargetOptions{Name: "test", URL: url, Model: "small"}
	if mod != nil {
		mod(&opts)
	}
	logs := &testutil.SyncBuffer{}
	d, err := NewDriver(protocol, opts, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	t.Cleanup(d.Close)
	return d, logs
}

func probeOnce(t *testing.T, d Driver, req *Request, timeout time.Duration) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := d.Probe(ctx, req)
	if r == nil {
		t.Fatal("Probe returned nil")
	}
	return r
}

func streamReq() *Request {
	return &Request{Prompt: "hello", MaxTokens: 8, Stream: true}
}

func wantOutcome(t *testing.T, r *Result, want Outcome, errContains string) {
	t.Helper()
	if r.Outcome != want {
		t.Fatalf("outcome = %s (err %v), want %s", r.Outcome, r.Err, want)
	}
	if want == OutcomeSuccess {
		if r.Err != nil {
			t.Fatalf("success with err %v", r.Err)
		}
		return
	}
	if r.Err == nil {
		t.Fatalf("outcome %s without Err", r.Outcome)
	}
	if errContains != "" && !strings.Contains(r.Err.Error(), errContains) {
		t.Fatalf("err = %q, want it to contain %q", r.Err, errContains)
	}
}
