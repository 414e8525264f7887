package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fastConfig keeps tests quick: a few ms per token, no jitter.
func fastConfig() Config {
	c := DefaultConfig()
	c.Latency = LatencyConfig{
		TTFTBase:         5 * time.Millisecond,
		PrefillPerToken:  10 * time.Microsecond,
		DecodeBase:       2 * time.Millisecond,
		DecodePerRunning: 100 * time.Microsecond,
	}
	c.Output.MeanTokens = 12
	return c
}

type testServer struct {
	srv    *Server
	url    string
	client *http.Client
	cancel context.CancelFunc
	done   chan error
}

// startServer serves on a real loopback TCP port.
func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	srv, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l := testutil.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{
		srv:    srv,
		url:    "http://" + l.Addr().String(),
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second},
		cancel: cancel,
		done:   make(chan error, 1),
	}
	go func() { ts.done <- srv.Serve(ctx, l) }()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	<-ts.done
	ts.client.CloseIdleConnections()
}

// post sends a JSON request with optional headers (name, value pairs).
func (ts *testServer) post(t *testing.T, path string, body any, headers ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(http.MethodPost, ts.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func (ts *testServer) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := ts.client.Get(ts.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", path, err)
	}
	return resp.StatusCode, b
}

func (ts *testServer) truth(t *testing.T, id string) RequestRecord {
	t.Helper()
	code, b := ts.get(t, "/debug/requests/"+id+"?wait=5s")
	if code != http.StatusOK {
		t.Fatalf("ground truth %s: status %d: %s", id, code, b)
	}
	var r RequestRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("ground truth %s: %v", id, err)
	}
	return r
}

// sseEvent is one data line with its arrival time.
type sseEvent struct {
	data string
	at   time.Time
}

// readSSE reads a stream event by event; err is the body's read error
// (nil on a clean end).
func readSSE(body io.Reader) ([]sseEvent, error) {
	var evs []sseEvent
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		n, err := body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		now := time.Now()
		for {
			i := bytes.Index(buf, []byte("\n\n"))
			if i < 0 {
				break
			}
			line := string(buf[:i])
			buf = buf[i+2:]
			evs = append(evs, sseEvent{data: strings.TrimPrefix(line, "data: "), at: now})
		}
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
	}
}

type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openAIUsage `json:"usage"`
	Error *openAIError `json:"error"`
}

func parseChunk(t *testing.T, s string) chunkJSON {
	t.Helper()
	var c chunkJSON
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("chunk %q: %v", s, err)
	}
	return c
}

func chatBody(maxTokens int, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":      "sim-llm",
		"messages":   []map[string]string{{"role": "user", "content": "say something nice about latency"}},
		"max_tokens": maxTokens,
		"stream":     true,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func completionBody(maxTokens int, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":      "sim-llm",
		"prompt":     "once upon a time",
		"max_tokens": maxTokens,
		"stream":     true,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}
