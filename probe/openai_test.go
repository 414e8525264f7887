package probe

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChatStreamRoleChunkDoesNotCountForTTFT(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(sseHandler(
		ev(roleChunk()),
		evAfter(200*time.Millisecond, chatDelta("Hello")),
		evAfter(20*time.Millisecond, chatDelta(" world")),
		ev(chatFinish("stop")),
		ev(usageChunk(11, 2)),
		ev("[DONE]"),
	)))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) {
		o.BearerToken = "tok-123"
		o.Headers = map[string]string{"X-Custom": "yes"}
	})
	temp := 0.0
	req := &Request{ID: "req-1", Prompt: "hi", MaxTokens: 8, Stream: true, Temperature: &temp}
	r := probeOnce(t, d, req, 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.TTFT < 200*time.Millisecond {
		t.Errorf("TTFT = %v, want ≥ 200ms (the role-only chunk must not count)", r.TTFT)
	}
	if len(r.Chunks) != 2 || r.Chunks[0].At != r.TTFT || r.Chunks[1].At < r.Chunks[0].At+20*time.Millisecond {
		t.Errorf("chunks = %+v", r.Chunks)
	}
	if r.EndToEnd < r.Chunks[1].At {
		t.Errorf("EndToEnd %v before last chunk %v", r.EndToEnd, r.Chunks[1].At)
	}
	if r.OutputTokens != 2 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 11 || r.InputTokensSource != TokenSourceServer {
		t.Errorf("tokens = in %d (%s) out %d (%s)", r.InputTokens, r.InputTokensSource, r.OutputTokens, r.OutputTokensSource)
	}
	if r.FinishReason != "stop" || !r.Streamed || r.StatusCode != 200 || r.RequestID != "req-1" {
		t.Errorf("finish %q streamed %v status %d id %q", r.FinishReason, r.Streamed, r.StatusCode, r.RequestID)
	}
	if !r.Phases.HasConnect || !r.Phases.HasWrite || !r.Phases.HasFirstByte || r.Phases.ConnectionReused {
		t.Errorf("phases = %+v", r.Phases)
	}

	h, body, path := rec.get()
	if path != "/v1/chat/completions" {
		t.Errorf("path = %q", path)
	}
	for k, v := range map[string]string{
		"X-Request-Id": "req-1", "Authorization": "Bearer tok-123", "X-Custom": "yes",
		"Accept": "text/event-stream", "Accept-Encoding": "identity", "Content-Type": "application/json",
	} {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	so, _ := body["stream_options"].(map[string]any)
	if body["stream"] != true || so["include_usage"] != true || body["max_tokens"] != 8.0 || body["model"] != "small" || body["temperature"] != 0.0 {
		t.Errorf("body = %v", body)
	}
	if _, ok := body["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent; TGI rejects it next to max_tokens")
	}
	for _, k := range []string{"ignore_eos", "min_tokens", "seed", "top_p", "stop"} {
		if _, ok := body[k]; ok {
			t.Errorf("unset field %s sent", k)
		}
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "hi" || msgs[0].(map[string]any)["role"] != "user" {
		t.Errorf("messages = %v", body["messages"])
	}
}

func TestReasoningCountsAsOutput(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			ts := startServer(t, sseHandler(
				ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}`),
				evAfter(100*time.Millisecond, `{"choices":[{"index":0,"delta":{"`+field+`":"Let me think","content":null}}]}`),
				evAfter(100*time.Millisecond, chatDelta("42")),
				ev(chatFinish("stop")),
				ev("[DONE]"),
			))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if len(r.Chunks) != 2 || r.TTFT < 100*time.Millisecond || r.Chunks[1].At-r.TTFT < 100*time.Millisecond {
				t.Errorf("TTFT %v chunks %+v: the reasoning delta should be the first token", r.TTFT, r.Chunks)
			}
			if r.OutputTokens != 2 || r.OutputTokensSource != TokenSourceCounted {
				t.Errorf("output tokens %d (%s), want 2 counted", r.OutputTokens, r.OutputTokensSource)
			}
		})
	}
}

func TestTokenCounting(t *testing.T) {
	tests := []struct {
		name       string
		steps      []step
		wantOut    int
		wantSource TokenSource
		wantIn     int
		wantTokens []int
	}{
		{"no usage: counted", []step{ev(chatDelta("a")), ev(chatDelta("b")), ev(chatDelta("c")), ev(chatFinish("length")), ev("[DONE]")},
			3, TokenSourceCounted, 0, []int{1, 1, 1}},
		{"vLLM separate usage chunk", []step{ev(roleChunk()), ev(chatDelta("a")), ev(chatDelta("b")), ev(chatFinish("length")), ev(usageChunk(7, 5)), ev("[DONE]")},
			5, TokenSourceServer, 7, []int{1, 1}},
		{"usage on finish chunk (llama.cpp)", []step{ev(chatDelta("a")), ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`), ev("[DONE]")},
			1, TokenSourceServer, 3, []int{1}},
		{"continuous usage stats", []step{
			ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":4,"completion_tokens":0}}`),
			ev(`{"choices":[{"index":0,"delta":{"content":"ab"}}],"usage":{"prompt_tokens":4,"completion_tokens":2}}`),
			ev(`{"choices":[{"index":0,"delta":{"content":"c"}}],"usage":{"prompt_tokens":4,"completion_tokens":3}}`),
			ev(`{"choices":[{"index":0,"delta":{"content":"de"}}],"usage":{"prompt_tokens":4,"completion_tokens":5}}`),
			ev(usageChunk(4, 5)), ev("[DONE]")},
			5, TokenSourceServer, 4, []int{2, 1, 2}},
		{"ollama zero placeholders stay one per chunk", []step{
			ev(`{"choices":[{"index":0,"text":"a"}],"usage":{"prompt_tokens":0,"completion_tokens":0}}`),
			ev(`{"choices":[{"index":0,"text":"b"}],"usage":{"prompt_tokens":0,"completion_tokens":0}}`),
			ev(`{"choices":[{"index":0,"text":"c","finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}`),
			ev("[DONE]")},
			3, TokenSourceServer, 2, []int{1, 1, 1}},
		{"choices absent and empty chunks ignored", []step{ev(`{"id":"x"}`), ev(`{"choices":null}`), ev(chatDelta("")), ev(chatDelta("a")), ev("[DONE]")},
			1, TokenSourceCounted, 0, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(tt.steps...))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if r.OutputTokens != tt.wantOut || r.OutputTokensSource != tt.wantSource || r.InputTokens != tt.wantIn {
				t.Errorf("out %d (%s) in %d, want out %d (%s) in %d", r.OutputTokens, r.OutputTokensSource, r.InputTokens, tt.wantOut, tt.wantSource, tt.wantIn)
			}
			var got []int
			for _, c := range r.Chunks {
				got = append(got, c.Tokens)
			}
			if len(got) != len(tt.wantTokens) {
				t.Fatalf("chunk tokens %v, want %v", got, tt.wantTokens)
			}
			for i := range got {
				if got[i] != tt.wantTokens[i] {
					t.Fatalf("chunk tokens %v, want %v", got, tt.wantTokens)
				}
			}
		})
	}
}

// replayFixture serves a recorded SSE file event by event.
func replayFixture(t *testing.T, name string) http.Handler {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "llamacpp", name))
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for _, e := range strings.SplitAfter(string(b), "\n\n") {
		if e != "" {
			steps = append(steps, step{delay: time.Millisecond, data: e})
		}
	}
	return sseHandler(steps...)
}

func TestLlamaCppFixtures(t *testing.T) {
	t.Run("chat stream", func(t *testing.T) {
		ts := startServer(t, replayFixture(t, "chat-stream.sse"))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if len(r.Chunks) != 12 || r.OutputTokens != 12 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 34 || r.FinishReason != "length" {
			t.Errorf("chunks %d out %d (%s) in %d finish %q", len(r.Chunks), r.OutputTokens, r.OutputTokensSource, r.InputTokens, r.FinishReason)
		}
		if tpot, ok := r.TPOT(); !ok || tpot <= 0 {
			t.Errorf("TPOT = %v, %v", tpot, ok)
		}
	})
	t.Run("completions stream", func(t *testing.T) {
		rec := &recorded{}
		ts := startServer(t, rec.wrap(replayFixture(t, "completions-stream.sse")))
		d, _ := newDriver(t, ProtocolOpenAICompletions, ts.URL+"/v1/", nil)
		req := &Request{Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, MaxTokens: 8, Stream: true}
		r := probeOnce(t, d, req, 10*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		// The final chunk has text "" and must not count.
		if len(r.Chunks) != 8 || r.OutputTokens != 8 || r.InputTokens != 5 || r.FinishReason != "length" {
			t.Errorf("chunks %d out %d in %d finish %q", len(r.Chunks), r.OutputTokens, r.InputTokens, r.FinishReason)
		}
		_, body, path := rec.get()
		if path != "/v1/completions" || body["prompt"] != "be brief\n\nhi" {
			t.Errorf("path %q prompt %q", path, body["prompt"])
		}
	})
	t.Run("chat non-stream", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("testdata", "llamacpp", "chat-nonstream.json"))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorded{}
		ts := startServer(t, rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		})))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
		r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 6}, 10*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if r.Streamed || r.TTFT != 0 || len(r.Chunks) != 0 || r.OutputTokens != 6 || r.InputTokens != 29 || r.FinishReason != "length" || r.EndToEnd <= 0 {
			t.Errorf("non-stream result %+v", r)
		}
		h, body, _ := rec.get()
		if _, ok := body["stream_options"]; ok || body["stream"] != false || h.Get("Accept") != "application/json" {
			t.Errorf("non-stream request body %v accept %q", body, h.Get("Accept"))
		}
	})
	t.Run("error body", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("testdata", "llamacpp", "error-bad-json.json"))
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			_, _ = w.Write(b)
		}))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
		r := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeHTTP5xx, "parse error")
		if r.StatusCode != 500 {
			t.Errorf("status %d", r.StatusCode)
		}
	})
}

func TestRequestBody(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(sseHandler(ev("[DONE]"))))
	d, _ := newDriver(t, ProtocolOpenAICompletions, ts.URL, func(o *TargetOptions) { o.Headers = map[string]string{"Host": "api.example"} })
	temp, topP, seed := 0.5, 0.9, int64(42)
	r := probeOnce(t, d, &Request{
		Model: "override", Prompt: "p", MaxTokens: 3, Stream: true, Temperature: &temp, TopP: &topP, Seed: &seed,
		Stop: []string{"\n"}, IgnoreEOS: true, MinTokens: 3,
		Extra: map[string]any{"stream_options": nil, "top_k": 5, "max_tokens": 4},
	}, 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.RequestID) != 32 {
		t.Errorf("generated request id %q", r.RequestID)
	}
	h, body, _ := rec.get()
	if h.Get("X-Request-Id") != r.RequestID || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
	want := map[string]any{"model": "override", "prompt": "p", "max_tokens": 4.0, "stream": true, "temperature": 0.5,
		"top_p": 0.9, "seed": 42.0, "ignore_eos": true, "min_tokens": 3.0, "top_k": 5.0}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body[%s] = %v, want %v", k, body[k], v)
		}
	}
	if _, ok := body["stream_options"]; ok {
		t.Error("Extra nil did not remove stream_options")
	}
}

func TestNewDriver(t *testing.T) {
	_, err := NewDriver("grpc", TargetOptions{URL: "http://x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "openai_chat, openai_completions") {
		t.Errorf("unknown protocol error = %v", err)
	}
	for _, u := range []string{"", "ftp://x", "http://", "://"} {
		if _, err := NewDriver(ProtocolOpenAIChat, TargetOptions{URL: u}, nil); err == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
	if _, err := NewDriver(ProtocolOpenAIChat, TargetOptions{URL: "http://user:hunter2@x:1/"}, nil); err != nil {
		t.Errorf("valid URL: %v", err)
	}
	opts := TargetOptions{URL: "https://x"}
	opts.TLS.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := NewDriver(ProtocolOpenAIChat, opts, nil); err == nil {
		t.Error("missing CA file accepted")
	}
	for base, want := range map[string]string{
		"http://h:1":                        "http://h:1/v1/chat/completions",
		"http://h:1/":                       "http://h:1/v1/chat/completions",
		"http://h:1/v1":                     "http://h:1/v1/chat/completions",
		"http://h:1/proxy/v1/":              "http://h:1/proxy/v1/chat/completions",
		"http://h:1/v1/chat/completions":    "http://h:1/v1/chat/completions",
		"https://api.example/openai/deploy": "https://api.example/openai/deploy/v1/chat/completions",
	} {
		d, err := NewDriver(ProtocolOpenAIChat, TargetOptions{URL: base}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.(*openAIDriver).url; got != want {
			t.Errorf("%s → %s, want %s", base, got, want)
		}
		d.Close()
	}
}

func TestConnectionReuse(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		ts := startServer(t, sseHandler(ev(chatDelta("a")), ev("[DONE]")))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.NewConnectionPerProbe = fresh })
		first := probeOnce(t, d, streamReq(), 10*time.Second)
		second := probeOnce(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, first, OutcomeSuccess, "")
		wantOutcome(t, second, OutcomeSuccess, "")
		if first.Phases.ConnectionReused || !first.Phases.HasConnect {
			t.Errorf("fresh=%v: first probe phases %+v", fresh, first.Phases)
		}
		if second.Phases.ConnectionReused == fresh || second.Phases.HasConnect != fresh {
			t.Errorf("fresh=%v: second probe phases %+v", fresh, second.Phases)
		}
	}
}

func TestSecretNeverLeaks(t *testing.T) {
	const token = "sk-very-secret-token"
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"invalid key ` + r.Header.Get("Authorization") + `, api-key ` + r.Header.Get("Api-Key") + `","code":401}}`))
	}))
	d, logs := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) {
		o.BearerToken = token
		o.Headers = map[string]string{"api-key": "header-secret-value"}
	})
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeHTTP4xx, "invalid key Bearer <secret>")
	for _, s := range []string{token, "header-secret-value"} {
		if strings.Contains(r.Err.Error(), s) {
			t.Errorf("Err leaks %q: %v", s, r.Err)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("logs leak %q: %s", s, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "probe finished") {
		t.Errorf("expected a debug log line, got %q", logs.String())
	}
	// An error that mentions nothing secret keeps its chain.
	d2, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.BearerToken = token })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r2 := d2.Probe(ctx, streamReq())
	if !errors.Is(r2.Err, context.Canceled) {
		t.Errorf("cancelled probe err %v should wrap context.Canceled", r2.Err)
	}
}

// The struct body must be byte for byte the map body, for every
// combination of the fields a request sets.
func TestOpenAIRequestBodyStructMatchesMap(t *testing.T) {
	temp, topP, seed := 0.5, 0.9, int64(-7)
	for mask := range 1 << 10 {
		for _, chat := range []bool{true, false} {
			d := &openAIDriver{chat: chat, t: &httpTarget{}}
			req := &Request{}
			on := func(bit int) bool { return mask&(1<<bit) != 0 }
			if on(0) {
				req.Model = "m<&>"
			} else {
				d.t.opts.Model = "target-model"
			}
			if on(1) {
				req.Prompt = "hello \"world\"\n"
			}
			if on(2) {
				req.Messages = []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
			}
			if on(3) {
				req.MaxTokens = 128
			} else if on(9) {
				req.MaxTokens = -1
			}
			req.Stream = on(4)
			if on(5) {
				req.Temperature, req.TopP = &temp, &topP
			}
			if on(6) {
				req.Seed = &seed
			}
			if on(7) {
				req.Stop = []string{"\n\n", "</s>"}
			} else if on(9) {
				req.Stop = []string{}
			}
			if on(8) {
				req.IgnoreEOS, req.MinTokens = true, 3
			} else if on(9) {
				req.MinTokens = -2
			}
			got, err := d.requestBody(req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := d.requestBodyMap(req)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("mask %b chat %v:\n struct %s\n map    %s", mask, chat, got, want)
			}
		}
	}
}
