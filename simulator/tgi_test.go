package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type tgiEventJSON struct {
	Index int `json:"index"`
	Token struct {
		Text    string `json:"text"`
		Special bool   `json:"special"`
	} `json:"token"`
	GeneratedText *string           `json:"generated_text"`
	Details       *tgiStreamDetails `json:"details"`
	Error         string            `json:"error"`
	ErrorType     string            `json:"error_type"`
}

func readTGIStream(t *testing.T, resp *http.Response) []tgiEventJSON {
	t.Helper()
	defer resp.Body.Close()
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	var out []tgiEventJSON
	for _, ev := range evs {
		if !strings.HasPrefix(ev.data, "data:") || strings.HasPrefix(ev.data, "data: ") {
			t.Fatalf("event %q is not framed like axum (data: without a space)", ev.data)
		}
		var e tgiEventJSON
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev.data, "data:")), &e); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		out = append(out, e)
	}
	return out
}

func TestTGIStreamShape(t *testing.T) {
	cfg := fastConfig()
	cfg.Output.TokensPerChunk = 3 // TGI ignores it: one token per event
	ts := startServer(t, cfg)
	resp := ts.post(t, "/generate_stream", map[string]any{"inputs": "four words of prompt", "parameters": map[string]any{"max_new_tokens": 5, "details": true, "seed": 3}},
		HeaderRequestID, "tgi-1")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	evs := readTGIStream(t, resp)
	if len(evs) != 5 {
		t.Fatalf("%d events, want 5 (one per token, no [DONE])", len(evs))
	}
	for i, e := range evs[:4] {
		if e.Index != i+1 || e.Token.Text == "" || e.Token.Special || e.GeneratedText != nil || e.Details != nil {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	last := evs[4]
	if last.GeneratedText == nil || last.Details == nil || last.Details.GeneratedTokens != 5 || last.Details.InputLength != 4 ||
		last.Details.FinishReason != "length" || last.Details.Seed == nil || *last.Details.Seed != 3 {
		t.Fatalf("last event %+v details %+v", last, last.Details)
	}
	rec := ts.truth(t, "tgi-1")
	if rec.Protocol != "tgi" || rec.OutputTokens != 5 || rec.Outcome != outcomeCompleted {
		t.Errorf("truth %+v", rec)
	}
}

// An answer that ends by itself ends with TGI's special EOS token, which
// carries no content in the ground truth.
func TestTGIStreamEOS(t *testing.T) {
	ts := startServer(t, fastConfig()) // natural length ~12 < 50
	resp := ts.post(t, "/generate_stream", map[string]any{"inputs": "hi", "parameters": map[string]any{"max_new_tokens": 50}},
		HeaderRequestID, "tgi-eos")
	evs := readTGIStream(t, resp)
	last := evs[len(evs)-1]
	if !last.Token.Special || last.Token.Text != "</s>" || last.Details != nil || last.GeneratedText == nil {
		t.Fatalf("last event %+v (details not asked for)", last)
	}
	if strings.Contains(*last.GeneratedText, "</s>") {
		t.Errorf("generated_text %q includes the EOS token", *last.GeneratedText)
	}
	rec := ts.truth(t, "tgi-eos")
	content := 0
	for _, c := range rec.Chunks {
		if c.Content {
			content++
		}
	}
	if rec.FinishReason != finishStop || rec.OutputTokens != len(evs) || content != len(evs)-1 {
		t.Errorf("truth %d tokens %d content chunks for %d events (%s)", rec.OutputTokens, content, len(evs), rec.FinishReason)
	}
}

func TestTGIErrors(t *testing.T) {
	ts := startServer(t, fastConfig())
	// Validation errors are events in a 200 stream on /generate_stream...
	resp := ts.post(t, "/generate_stream", map[string]any{"inputs": "hi", "parameters": map[string]any{"temperature": 0}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	evs := readTGIStream(t, resp)
	if len(evs) != 1 || evs[0].ErrorType != "validation" || !strings.Contains(evs[0].Error, "temperature") {
		t.Fatalf("events %+v", evs)
	}
	// ...and 422 on /generate.
	resp = ts.post(t, "/generate", map[string]any{"inputs": "", "parameters": map[string]any{}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), `"error_type":"validation"`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"inputs":`, http.StatusBadRequest},
		{`{"parameters":{}}`, http.StatusUnprocessableEntity},
		{`{"inputs":"a","parameters":{"max_new_tokens":"many"}}`, http.StatusUnprocessableEntity},
	} {
		resp := ts.post(t, "/generate_stream", c.body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.body, resp.StatusCode, c.status)
		}
	}
	// Injected faults use TGI's error shape and types.
	resp = ts.post(t, "/generate", map[string]any{"inputs": "a"}, HeaderFault, "error=429")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(b), `"error_type":"overloaded"`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	resp = ts.post(t, "/generate_stream", map[string]any{"inputs": "a", "parameters": map[string]any{"max_new_tokens": 5}}, HeaderFault, "error_event:after=2,status=424")
	evs = readTGIStream(t, resp)
	if len(evs) != 3 || evs[2].ErrorType != "generation" {
		t.Errorf("events %+v", evs)
	}
}

func TestTGIUnaryHeadersAndInfo(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/generate", map[string]any{"inputs": "a b c", "parameters": map[string]any{"max_new_tokens": 4, "details": true}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body struct {
		GeneratedText string `json:"generated_text"`
		Details       struct {
			GeneratedTokens int `json:"generated_tokens"`
		} `json:"details"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Details.GeneratedTokens != 4 || body.GeneratedText == "" {
		t.Fatalf("%s (%v)", b, err)
	}
	for _, h := range []string{"X-Total-Time", "X-Queue-Time", "X-Inference-Time", "X-Time-Per-Token", "X-Validation-Time"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("missing %s", h)
		}
	}
	if resp.Header.Get("X-Prompt-Tokens") != "3" || resp.Header.Get("X-Generated-Tokens") != "4" {
		t.Errorf("token headers %v", resp.Header)
	}
	code, info := ts.get(t, "/info")
	if code != 200 || !strings.Contains(string(info), `"max_total_tokens"`) || !strings.Contains(string(info), `"model_id":"sim-llm"`) {
		t.Errorf("/info %d %s", code, info)
	}
}

// TestTGIQueueFull checks the overload answer real TGI gives when
// max_concurrent_requests is reached: 429 with error_type "overloaded" on
// /generate, the same error as an event in a 200 stream on
// /generate_stream, where the OpenAI front end (vLLM) answers 503.
func TestTGIQueueFull(t *testing.T) {
	cfg := fastConfig()
	cfg.Scheduler.MaxRunning = 1
	cfg.Scheduler.MaxQueue = 0
	ts := startServer(t, cfg)
	busy := ts.post(t, "/generate_stream", map[string]any{"inputs": "a", "parameters": map[string]any{"max_new_tokens": 200}})
	defer busy.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.engine.state().running == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	resp := ts.post(t, "/generate", map[string]any{"inputs": "a", "parameters": map[string]any{"max_new_tokens": 2}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `"error_type":"overloaded"`) {
		t.Fatalf("%d %s, want 429 overloaded", resp.StatusCode, b)
	}
	evs := readTGIStream(t, ts.post(t, "/generate_stream", map[string]any{"inputs": "a", "parameters": map[string]any{"max_new_tokens": 2}}))
	if len(evs) != 1 || evs[0].ErrorType != "overloaded" || evs[0].Error != "Model is overloaded" {
		t.Fatalf("/generate_stream events %+v, want one overloaded error", evs)
	}
}
