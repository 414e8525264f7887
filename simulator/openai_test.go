package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestChatStreamFormat(t *testing.T) {
	ts := startServer(t, fastConfig())
	for _, tc := range []struct {
		name      string
		opts      any
		wantUsage bool
	}{
		{"no stream_options", nil, false},
		{"include_usage true", map[string]any{"include_usage": true}, true},
		{"include_usage false", map[string]any{"include_usage": false}, false},
		{"stream_options without key defaults to true", map[string]any{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"ignore_eos": true}
			if tc.opts != nil {
				extra["stream_options"] = tc.opts
			}
			resp := ts.post(t, "/v1/chat/completions", chatBody(6, extra), "X-Request-Id", "chat-"+strings.ReplaceAll(tc.name, " ", "_"))
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			evs, err := readSSE(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if evs[len(evs)-1].data != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1].data)
			}
			evs = evs[:len(evs)-1]
			role := parseChunk(t, evs[0].data)
			if d := role.Choices[0].Delta; d == nil || d.Role == nil || *d.Role != "assistant" || d.Content == nil || *d.Content != "" {
				t.Fatalf("first chunk is not vLLM's role chunk: %s", evs[0].data)
			}
			var usage *openAIUsage
			content, words := 0, 0
			var finish string
			for _, e := range evs[1:] {
				c := parseChunk(t, e.data)
				if c.Object != "chat.completion.chunk" || c.ID != "chatcmpl-"+resp.Header.Get("X-Request-Id") || c.Model != "sim-llm" {
					t.Fatalf("bad chunk header: %s", e.data)
				}
				if c.Usage != nil {
					if len(c.Choices) != 0 {
						t.Fatalf("usage chunk with choices: %s", e.data)
					}
					usage = c.Usage
					continue
				}
				if usage != nil {
					t.Fatalf("chunk after usage: %s", e.data)
				}
				ch := c.Choices[0]
				if ch.Delta.Content != nil && *ch.Delta.Content != "" {
					content++
					words += len(strings.Fields(*ch.Delta.Content))
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
			if content != 6 || words != 6 || finish != "length" {
				t.Fatalf("content chunks %d, words %d, finish %q; want 6, 6, length", content, words, finish)
			}
			if tc.wantUsage != (usage != nil) {
				t.Fatalf("usage present = %v, want %v", usage != nil, tc.wantUsage)
			}
			if usage != nil && (usage.CompletionTokens != 6 || usage.PromptTokens != 5 || usage.TotalTokens != 11) {
				t.Fatalf("usage %+v", *usage)
			}
		})
	}
}

func TestChatStreamOptions(t *testing.T) {
	ts := startServer(t, fastConfig())
	t.Run("role chunk off, reasoning, multi-token chunks, separate finish", func(t *testing.T) {
		resp := ts.post(t, "/v1/chat/completions", chatBody(10, map[string]any{"ignore_eos": true}),
			HeaderOptions, "role_chunk=off; reasoning_tokens=4; tokens_per_chunk=3; separate_finish_chunk=true")
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range evs[:len(evs)-1] {
			c := parseChunk(t, e.data)
			d := c.Choices[0].Delta
			switch {
			case d.Role != nil:
				kinds = append(kinds, "role")
			case d.ReasoningContent != nil:
				kinds = append(kinds, fmt.Sprintf("r%d", len(strings.Fields(*d.ReasoningContent))))
			case d.Content != nil:
				kinds = append(kinds, fmt.Sprintf("c%d", len(strings.Fields(*d.Content))))
			case c.Choices[0].FinishReason != nil:
				kinds = append(kinds, "finish")
			}
		}
		// 4 reasoning tokens in chunks of 3, then 6 content tokens.
		if got, want := strings.Join(kinds, " "), "r3 r1 c3 c3 finish"; got != want {
			t.Fatalf("chunks %q, want %q", got, want)
		}
	})
	t.Run("role chunk with first token", func(t *testing.T) {
		resp := ts.post(t, "/v1/chat/completions", chatBody(3, nil), HeaderOptions, "role_chunk=with_first_token", "X-Request-Id", "role-late")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r := ts.truth(t, "role-late")
		if r.Chunks[0].Kind != kindRole || r.Chunks[1].Kind != kindContent || r.Chunks[1].UnixNano-r.Chunks[0].UnixNano > 50e6 {
			t.Fatalf("role chunk not right before first token: %+v", r.Chunks[:2])
		}
	})
}

func TestCompletionsStreamFormat(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/v1/completions", completionBody(5, map[string]any{"ignore_eos": true, "stream_options": map[string]any{"include_usage": true}}))
	defer resp.Body.Close()
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5+2 || evs[6].data != "[DONE]" {
		t.Fatalf("got %d events, want 5 text chunks, usage, [DONE]: %+v", len(evs), evs)
	}
	for i, e := range evs[:5] {
		c := parseChunk(t, e.data)
		if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || c.Choices[0].Text == nil || len(strings.Fields(*c.Choices[0].Text)) != 1 {
			t.Fatalf("chunk %d: %s", i, e.data)
		}
		if (c.Choices[0].FinishReason != nil) != (i == 4) {
			t.Fatalf("finish_reason on chunk %d: %s", i, e.data)
		}
	}
	u := parseChunk(t, evs[5].data)
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 5 || u.Usage.PromptTokens != 4 {
		t.Fatalf("usage chunk: %s", evs[5].data)
	}
}

func TestNonStreaming(t *testing.T) {
	ts := startServer(t, fastConfig())
	t.Run("chat", func(t *testing.T) {
		resp := ts.post(t, "/v1/chat/completions", chatBody(7, map[string]any{"stream": false, "ignore_eos": true}))
		defer resp.Body.Close()
		var body struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage openAIUsage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || body.Object != "chat.completion" || body.Choices[0].Message.Role != "assistant" ||
			len(strings.Fields(body.Choices[0].Message.Content)) != 7 || body.Choices[0].FinishReason != "length" ||
			body.Usage.CompletionTokens != 7 || body.Usage.TotalTokens != 7+5 {
			t.Fatalf("bad answer: %+v", body)
		}
	})
	t.Run("completions", func(t *testing.T) {
		resp := ts.post(t, "/v1/completions", completionBody(3, map[string]any{"stream": false, "ignore_eos": true}))
		defer resp.Body.Close()
		var body struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage openAIUsage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if body.Object != "text_completion" || len(strings.Fields(body.Choices[0].Text)) != 3 || body.Usage.CompletionTokens != 3 {
			t.Fatalf("bad answer: %+v", body)
		}
	})
}

func TestOutputLength(t *testing.T) {
	cfg := fastConfig()
	cfg.Output.MeanTokens = 10
	cfg.Output.LengthSpread = 0
	ts := startServer(t, cfg)
	tokens := func(body map[string]any) (int, string) {
		t.Helper()
		body["stream"] = false
		resp := ts.post(t, "/v1/chat/completions", body)
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage openAIUsage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Usage.CompletionTokens, out.Choices[0].FinishReason
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		want   int
		reason string
	}{
		{"natural length", chatBody(100, nil), 10, "stop"},
		{"capped by max_tokens", chatBody(4, nil), 4, "length"},
		{"ignore_eos", chatBody(30, map[string]any{"ignore_eos": true}), 30, "length"},
		{"min_tokens", chatBody(100, map[string]any{"min_tokens": 20}), 20, "stop"},
		{"max_completion_tokens wins", chatBody(100, map[string]any{"max_completion_tokens": 3}), 3, "length"},
	} {
		if n, r := tokens(tc.body); n != tc.want || r != tc.reason {
			t.Errorf("%s: %d tokens (%s), want %d (%s)", tc.name, n, r, tc.want, tc.reason)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxRequestBodyBytes = 2048
	ts := startServer(t, cfg)
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		header []string
		status int
		msg    string
	}{
		{"bad json", "/v1/chat/completions", `{"model":`, nil, 400, "invalid JSON"},
		{"unknown model", "/v1/chat/completions", map[string]any{"model": "nope", "messages": []any{map[string]string{"role": "user", "content": "x"}}}, nil, 404, "The model `nope` does not exist."},
		{"stream_options without stream", "/v1/completions", completionBody(4, map[string]any{"stream": false, "stream_options": map[string]any{"include_usage": true}}), nil, 400, "Stream options"},
		{"too long", "/v1/completions", completionBody(9000, nil), nil, 400, "maximum context length"},
		{"zero max_tokens", "/v1/completions", completionBody(0, nil), nil, 400, "max_tokens"},
		{"min above max", "/v1/completions", completionBody(2, map[string]any{"min_tokens": 3}), nil, 400, "min_tokens"},
		{"no messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, nil, 400, "messages"},
		{"body too large", "/v1/completions", completionBody(2, map[string]any{"prompt": strings.Repeat("word ", 1000)}), nil, 413, "larger than"},
		{"bad fault header", "/v1/completions", completionBody(2, nil), []string{HeaderFault, "explode"}, 400, "unknown fault"},
		{"bad options header", "/v1/completions", completionBody(2, nil), []string{HeaderOptions, "tokens_per_chunk=0"}, 400, "tokens_per_chunk"},
		{"bad request id", "/v1/completions", completionBody(2, nil), []string{"X-Request-Id", "a b"}, 400, "X-Request-Id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ts.post(t, tc.path, tc.body, tc.header...)
			defer resp.Body.Close()
			var e openAIErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.status || !strings.Contains(e.Error.Message, tc.msg) || e.Error.Type == "" {
				t.Fatalf("status %d, error %+v; want %d containing %q", resp.StatusCode, e.Error, tc.status, tc.msg)
			}
		})
	}
	if code, _ := ts.get(t, "/v1/chat/completions"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET on a POST endpoint: %d", code)
	}
}

func TestModelsAndHealth(t *testing.T) {
	cfg := fastConfig()
	cfg.ServedModelNames = []string{"a", "b"}
	ts := startServer(t, cfg)
	code, b := ts.get(t, "/health")
	if code != 200 || len(b) != 0 {
		t.Fatalf("/health: %d %q", code, b)
	}
	code, b = ts.get(t, "/v1/models")
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil || code != 200 || list.Object != "list" || len(list.Data) != 2 || list.Data[1].ID != "b" {
		t.Fatalf("/v1/models: %d %s (%v)", code, b, err)
	}
	// Both names are served; omitting the model uses the first.
	for _, m := range []string{"b", ""} {
		resp := ts.post(t, "/v1/completions", map[string]any{"model": m, "prompt": "x", "max_tokens": 1})
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("model %q: %d", m, resp.StatusCode)
		}
	}
}
