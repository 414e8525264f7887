package simulator

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

type ollamaJSON struct {
	Model    string  `json:"model"`
	Response *string `json:"response"`
	Thinking string  `json:"thinking"`
	Message  *struct {
		Role     string `json:"role"`
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	Done               bool   `json:"done"`
	DoneReason         string `json:"done_reason"`
	Context            []int  `json:"context"`
	TotalDuration      int64  `json:"total_duration"`
	LoadDuration       int64  `json:"load_duration"`
	PromptEvalCount    int    `json:"prompt_eval_count"`
	PromptEvalDuration int64  `json:"prompt_eval_duration"`
	EvalCount          int    `json:"eval_count"`
	EvalDuration       int64  `json:"eval_duration"`
	Error              string `json:"error"`
}

func readNDJSON(t *testing.T, resp *http.Response) []ollamaJSON {
	t.Helper()
	defer resp.Body.Close()
	var out []ollamaJSON
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o ollamaJSON
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, o)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOllamaChatStreamShape(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/api/chat", map[string]any{
		"model": "sim-llm:latest", "messages": []map[string]string{{"role": "user", "content": "three word prompt"}},
		"options": map[string]any{"num_predict": 6},
	}, HeaderRequestID, "ol-1", HeaderOptions, "reasoning_tokens=2")
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("content type %q (stream is Ollama's default)", ct)
	}
	lines := readNDJSON(t, resp)
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 6 tokens and a done object", len(lines))
	}
	for i, l := range lines[:6] {
		if l.Done || l.Message == nil || l.Message.Role != "assistant" {
			t.Fatalf("line %d %+v", i, l)
		}
		if (i < 2) != (l.Message.Thinking != "") || (i < 2) == (l.Message.Content != "") {
			t.Errorf("line %d: thinking %q content %q", i, l.Message.Thinking, l.Message.Content)
		}
	}
	done := lines[6]
	if !done.Done || done.DoneReason != "length" || done.EvalCount != 6 || done.PromptEvalCount != 3 ||
		done.TotalDuration <= 0 || done.PromptEvalDuration <= 0 || done.EvalDuration <= 0 ||
		done.TotalDuration < done.LoadDuration+done.PromptEvalDuration+done.EvalDuration || done.Context != nil {
		t.Errorf("done %+v", done)
	}
	rec := ts.truth(t, "ol-1")
	if rec.Protocol != "ollama_chat" || rec.OutputTokens != 6 || rec.ReasoningTokens != 2 || rec.Outcome != outcomeCompleted {
		t.Errorf("truth %+v", rec)
	}
}

func TestOllamaGenerateUnary(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/api/generate", map[string]any{"model": "sim-llm", "prompt": "a b", "system": "c", "stream": false,
		"options": map[string]any{"num_predict": 4}})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var o ollamaJSON
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if resp.StatusCode != 200 || !o.Done || o.Response == nil || *o.Response == "" || o.EvalCount != 4 || o.PromptEvalCount != 3 || len(o.Context) != 7 {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

func TestOllamaErrorsAndInfoEndpoints(t *testing.T) {
	ts := startServer(t, fastConfig())
	for _, c := range []struct {
		body   any
		status int
		msg    string
	}{
		{map[string]any{"model": "other", "prompt": "x"}, http.StatusNotFound, "not found"},
		{map[string]any{"prompt": "x"}, http.StatusBadRequest, "model is required"},
		{`{"model":`, http.StatusBadRequest, ""},
	} {
		resp := ts.post(t, "/api/generate", c.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e ollamaJSON
		if resp.StatusCode != c.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%v: %d %s", c.body, resp.StatusCode, b)
		}
	}
	resp := ts.post(t, "/api/chat", map[string]any{"model": "sim-llm", "messages": []map[string]string{{"role": "user", "content": "x"}},
		"options": map[string]any{"num_predict": 5}}, HeaderFault, "error_event:after=2")
	lines := readNDJSON(t, resp)
	if len(lines) != 3 || lines[2].Error == "" || lines[2].Done {
		t.Errorf("lines %+v", lines)
	}
	code, b := ts.get(t, "/")
	if code != 200 || string(b) != "Ollama is running" {
		t.Errorf("/ %d %q", code, b)
	}
	code, b = ts.get(t, "/api/version")
	if code != 200 || !strings.Contains(string(b), `"version"`) {
		t.Errorf("/api/version %d %s", code, b)
	}
	code, b = ts.get(t, "/api/tags")
	if code != 200 || !strings.Contains(string(b), `"name":"sim-llm:latest"`) {
		t.Errorf("/api/tags %d %s", code, b)
	}
	if code, _ := ts.get(t, "/no-such-path"); code != http.StatusNotFound {
		t.Errorf("GET / must not catch every path: %d", code)
	}
}

// TestOllamaToolCalls: a chat request with tools is answered with a call
// of the first tool, as Ollama's ChatHandler sends a parsed call: one line
// with content "" and message.tool_calls (the call's tokens all in it),
// then the done object; non-streamed, the answer's message carries it.
func TestOllamaToolCalls(t *testing.T) {
	ts := startServer(t, fastConfig())
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
	body := func(stream bool) map[string]any {
		return map[string]any{"model": "sim-llm", "messages": []map[string]string{{"role": "user", "content": "weather in Paris?"}},
			"tools": tools, "stream": stream, "options": map[string]any{"num_predict": 5}}
	}
	resp := ts.post(t, "/api/chat", body(true), "X-Request-Id", "tool-1")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), b)
	}
	var call struct {
		Message struct {
			Role      string `json:"role"`
			Content   *string
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Index     *int              `json:"index"`
					Name      string            `json:"name"`
					Arguments map[string]string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Done bool `json:"done"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &call); err != nil {
		t.Fatal(err)
	}
	tc := call.Message.ToolCalls
	if call.Done || call.Message.Content == nil || *call.Message.Content != "" || len(tc) != 1 || len(tc[0].ID) != 13 || !strings.HasPrefix(tc[0].ID, "call_") ||
		tc[0].Function.Index == nil || *tc[0].Function.Index != 0 || tc[0].Function.Name != "get_weather" || tc[0].Function.Arguments["query"] == "" {
		t.Errorf("tool-call line %s", lines[0])
	}
	if !strings.Contains(lines[1], `"done":true`) || !strings.Contains(lines[1], `"eval_count":`) {
		t.Errorf("done line %s", lines[1])
	}
	rec := ts.truth(t, "tool-1")
	if rec.OutputTokens != rec.PlannedOutputTokens || rec.OutputTokens < 1 {
		t.Errorf("ground truth: %d of %d tokens", rec.OutputTokens, rec.PlannedOutputTokens)
	}
	resp = ts.post(t, "/api/chat", body(false))
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"content":"","tool_calls":[{"id":"call_`) || !strings.Contains(string(b), `"name":"get_weather"`) {
		t.Errorf("non-streamed %s", b)
	}
}
