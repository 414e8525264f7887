package simulator

import (
	"io"
	"strings"
	"testing"
)

// TestTGIOpenAIRoutes: with openai_server: tgi the OpenAI routes send
// every in-stream error as TGI's into_openai_event does, the error's
// Display text with http_status_code 422, then [DONE], framed `data:`
// without a space (router/src/infer/mod.rs, server.rs @db931fc).
func TestTGIOpenAIRoutes(t *testing.T) {
	cfg := fastConfig()
	cfg.OpenAIServer = OpenAIServerTGI
	ts := startServer(t, cfg)
	for _, c := range []struct{ fault, want string }{
		{"error_event:after=2,status=500", `data:{"error":{"message":"Incomplete generation stream","http_status_code":422}}`},
		{"error_event:after=2,status=424", `data:{"error":{"message":"Request failed during generation: Injected fault: error during generation","http_status_code":422}}`},
		{"error_event:after=2,status=400", `data:{"error":{"message":"Input validation error: Injected fault: invalid request found during generation","http_status_code":422}}`},
		{"queue_full", `data:{"error":{"message":"Model is overloaded","http_status_code":422}}`},
	} {
		code, body := rawStream(t, ts, chatBody(4, map[string]any{"ignore_eos": true}), HeaderFault, c.fault)
		if code != 200 || !strings.HasSuffix(body, c.want+"\n\ndata:[DONE]\n\n") {
			t.Errorf("%s: %d %q", c.fault, code, body)
		}
		if strings.Contains(body, "data: ") {
			t.Errorf("%s: a `data: ` line; axum writes `data:`: %q", c.fault, body)
		}
	}
	// Non-streamed, a full queue is TGI's 429 in its own error shape.
	resp := ts.post(t, "/v1/chat/completions", chatBody(2, map[string]any{"stream": false}), HeaderFault, "queue_full")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || string(b) != `{"error":"Model is overloaded","error_type":"overloaded"}` {
		t.Errorf("non-stream queue full: %d %s", resp.StatusCode, b)
	}
	// /v1/completions: finish_reason "" on every chunk but the last.
	resp = ts.post(t, "/v1/completions", map[string]any{"model": "any-name", "prompt": "a b", "max_tokens": 3, "stream": true, "ignore_eos": true})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	evs := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
	if resp.StatusCode != 200 || len(evs) != 4 || evs[3] != "data:[DONE]" {
		t.Fatalf("completions stream %d %q", resp.StatusCode, evs)
	}
	for i, e := range evs[:2] {
		if !strings.Contains(e, `"finish_reason":""`) {
			t.Errorf("chunk %d %s: want finish_reason \"\"", i, e)
		}
	}
	if !strings.Contains(evs[2], `"finish_reason":"length"`) {
		t.Errorf("last chunk %s", evs[2])
	}
}

// TestOllamaOpenAIRoutes: Ollama's /v1 middleware turns an error inside
// the native stream into a chunk with empty content; the SSE stream then
// ends, without [DONE].
func TestOllamaOpenAIRoutes(t *testing.T) {
	cfg := fastConfig()
	cfg.OpenAIServer = OpenAIServerOllama
	ts := startServer(t, cfg)
	code, body := rawStream(t, ts, chatBody(4, map[string]any{"ignore_eos": true}), HeaderFault, "error_event:after=2")
	if code != 200 || strings.Contains(body, "error") || strings.Contains(body, "[DONE]") ||
		!strings.HasSuffix(body, `"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n") {
		t.Errorf("%d %q", code, body)
	}
	resp := ts.post(t, "/v1/chat/completions", chatBody(2, nil), HeaderFault, "queue_full")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "server busy, please try again.") {
		t.Errorf("queue full: %d %s", resp.StatusCode, b)
	}
}
