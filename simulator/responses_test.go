package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestResponsesRequestErrors: every bad request is a 4xx naming the field
// and what to send instead, with ground truth recording it.
func TestResponsesRequestErrors(t *testing.T) {
	ts := startServer(t, fastConfig())
	for i, c := range []struct {
		body   any
		status int
		want   string
	}{
		{`{"input":`, 400, "invalid JSON body"},
		{map[string]any{"max_output_tokens": 4}, 400, "input is required"},
		{map[string]any{"input": 7}, 400, "input must be a string or a list of input items"},
		{map[string]any{"input": []any{}}, 400, "input must not be empty"},
		{map[string]any{"input": []any{map[string]any{"type": "function_call_output", "output": "x"}}}, 400, `input[0]: the simulator takes message items only, not \"function_call_output\"`},
		{map[string]any{"input": []any{map[string]any{"content": "x"}}}, 400, "input[0].role is required"},
		{map[string]any{"input": []any{map[string]any{"role": "user", "content": 3}}}, 400, "input[0].content must be a string or a list of content parts"},
		{map[string]any{"input": "x", "previous_response_id": "resp_gone"}, 404, "Response with id 'resp_gone' not found."},
		{map[string]any{"input": "x", "model": "other"}, 404, "does not exist"},
		{map[string]any{"input": "x", "max_output_tokens": 0}, 400, "max_tokens must be at least 1"},
	} {
		id := fmt.Sprintf("resp-err-%d", i)
		resp := ts.post(t, "/v1/responses", c.body, "X-Request-Id", id)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%v: status %d, body %s; want %d with %q", c.body, resp.StatusCode, b, c.status, c.want)
		}
		if rec := ts.truth(t, id); rec.Protocol != "openai_responses" || rec.Status != c.status {
			t.Errorf("%v: ground truth %s %d", c.body, rec.Protocol, rec.Status)
		}
	}
}

// TestResponsesStreamShape: the event: line and the data's type agree,
// sequence numbers count from 0, and the stream ends with the terminal
// event, no [DONE].
func TestResponsesStreamShape(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/v1/responses", map[string]any{
		"input":        []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hello there"}}}},
		"instructions": "Be brief.", "max_output_tokens": 5, "stream": true, "ignore_eos": true,
	}, "X-Request-Id", "resp-shape", HeaderOptions, "reasoning_tokens=2")
	defer resp.Body.Close()
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, ev := range evs {
		name, data, ok := strings.Cut(ev.data, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		var v struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if !ok || json.Unmarshal([]byte(data), &v) != nil || v.Type != name || v.Seq != i {
			t.Fatalf("event %d: %q", i, ev.data)
		}
		types = append(types, v.Type)
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.incomplete" {
		t.Errorf("events %v", types)
	}
	count := func(typ string) int {
		n := 0
		for _, x := range types {
			if x == typ {
				n++
			}
		}
		return n
	}
	if count("response.reasoning_text.delta") != 2 || count("response.output_text.delta") != 3 || count("response.output_item.done") != 2 {
		t.Errorf("events %v", types)
	}
	rec := ts.truth(t, "resp-shape")
	if rec.Protocol != "openai_responses" || rec.OutputTokens != 5 || rec.ReasoningTokens != 2 || rec.FinishReason != "length" {
		t.Errorf("ground truth %+v", rec)
	}
}

func TestResponseStoreBounded(t *testing.T) {
	s := newResponseStore()
	for i := range maxStoredResponses + 10 {
		s.put(fmt.Sprint(i), "t")
	}
	s.put("5000", "again")
	if _, ok := s.get("0"); ok {
		t.Error("the oldest response was kept")
	}
	if v, ok := s.get(fmt.Sprint(maxStoredResponses + 9)); !ok || v != "t" {
		t.Error("the newest response was dropped")
	}
	if len(s.text) != maxStoredResponses || len(s.order) != maxStoredResponses {
		t.Errorf("%d stored, %d in order", len(s.text), len(s.order))
	}
}
