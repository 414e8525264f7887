package probe

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Scripted Responses API events, in the shapes of the API's reference
// client (openai-go ResponseStreamEventUnion).
func respEv(typ string, seq int, fields string) step {
	data := `{"type":"` + typ + `","sequence_number":` + itoa(seq)
	if fields != "" {
		data += "," + fields
	}
	return raw("event: " + typ + "\ndata: " + data + "}\n\n")
}

func respObj(status, extra string) string {
	s := `"response":{"id":"resp_1","object":"response","status":"` + status + `","output":[]`
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

const usageJSON = `"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":8}`

func respDelta(typ string, seq int, text string) step {
	return respEv(typ, seq, `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+quote(text))
}

// respHead is created, in_progress, an output item and its part.
func respHead() []step {
	return []step{
		respEv("response.created", 0, respObj("in_progress", "")),
		respEv("response.in_progress", 1, respObj("in_progress", "")),
		respEv("response.output_item.added", 2, `"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}`),
		respEv("response.content_part.added", 3, `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`),
	}
}

func respScript(steps ...step) []step { return append(respHead(), steps...) }

func TestResponsesStream(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(sseHandler(respScript(
		respDelta("response.reasoning_text.delta", 4, "think"),
		respDelta("response.output_text.delta", 5, "Hel"),
		respEv("response.some_future_event", 6, `"whatever":{"a":[1]}`),
		respDelta("response.output_text.delta", 7, "lo"),
		respDelta("response.output_text.delta", 8, ""),               // carries nothing
		respEv("response.output_text.delta", 9, `"item_id":"msg_1"`), // no delta at all
		respEv("response.function_call_arguments.delta", 9, `"delta":null`),
		respEv("response.output_text.done", 10, `"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello"`),
		respEv("response.completed", 11, respObj("completed", usageJSON)),
	)...)))
	d, _ := newDriver(t, ProtocolOpenAIResponses, ts.URL, nil)
	req := &Request{Messages: []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}},
		MaxTokens: 8, Stream: true, CaptureAnswer: true, Seed: new(int64)}
	r := probeOnce(t, d, req, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 3 || r.TTFT != r.Chunks[0].At || r.TTFT <= 0 {
		t.Errorf("chunks %+v, TTFT %v", r.Chunks, r.TTFT)
	}
	if r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 5 ||
		!r.HasCachedInputTokens || r.CachedInputTokens != 2 || !r.Reasoning.HasTokens || r.Reasoning.Tokens != 1 {
		t.Errorf("counts: %+v", r)
	}
	if !r.Reasoning.Seen || r.Reasoning.FirstReasoning != r.TTFT || r.Reasoning.FirstAnswer != r.Chunks[1].At {
		t.Errorf("reasoning %+v", r.Reasoning)
	}
	if r.Answer != "Hello" || r.FinishReason != "stop" || r.ResponseID != "resp_1" {
		t.Errorf("answer %q, finish %q, response id %q", r.Answer, r.FinishReason, r.ResponseID)
	}
	_, body, path := rec.get()
	if path != "/v1/responses" {
		t.Errorf("path %s", path)
	}
	want := map[string]any{"model": "small", "instructions": "Be brief.", "max_output_tokens": float64(8), "stream": true,
		"input": []any{map[string]any{"role": "user", "content": "hi"}}, "seed": float64(0)}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Errorf("body %v, want %v", body, want)
	}
}

func TestResponseIDKeptOnlyWhenPlain(t *testing.T) {
	for id, want := range map[string]string{"resp_abc-1": "resp_abc-1", "": "", "a b": "", "é": "", "x\n": "",
		strings.Repeat("r", maxResponseID): strings.Repeat("r", maxResponseID), strings.Repeat("r", maxResponseID+1): ""} {
		if got := responseID(id); got != want {
			t.Errorf("responseID(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestResponsesBodyWithExtra(t *testing.T) {
	d := &responsesDriver{t: &httpTarget{opts: TargetOptions{Model: "m"}}}
	b, err := d.encodeBody(&Request{Prompt: "p", MaxTokens: 4, Stream: true,
		Extra: map[string]any{"stream": nil, "previous_response_id": "resp_9"}}, "")
	if err != nil || string(b) != `{"input":"p","max_output_tokens":4,"model":"m","previous_response_id":"resp_9"}` {
		t.Errorf("%s, %v", b, err)
	}
	plain, _ := d.encodeBody(&Request{Prompt: "p", MaxTokens: 4, Stream: true}, "")
	viaMap, _ := d.encodeBody(&Request{Prompt: "p", MaxTokens: 4, Stream: true, Extra: map[string]any{"model": "m"}}, "")
	if string(plain) != string(viaMap) {
		t.Errorf("struct %s and map %s differ", plain, viaMap)
	}
}

// TestResponsesOutcomes: how each way a response can end maps to an
// outcome, with an error naming what happened.
func TestResponsesOutcomes(t *testing.T) {
	delta := respDelta("response.output_text.delta", 4, "x")
	big := strings.Repeat("y", 2<<20)
	for _, c := range []struct {
		name    string
		steps   []step
		want    Outcome
		errWant string
		finish  string
		tokens  int
	}{
		{"max_output_tokens is a normal end", respScript(delta,
			respEv("response.incomplete", 5, respObj("incomplete", `"incomplete_details":{"reason":"max_output_tokens"},`+usageJSON))),
			OutcomeSuccess, "", "length", 3},
		{"content filter", respScript(delta,
			respEv("response.incomplete", 5, respObj("incomplete", `"incomplete_details":{"reason":"content_filter"}`))),
			OutcomeIncomplete, "response incomplete: content_filter", "content_filter", 1},
		{"failed with server_error", respScript(delta,
			respEv("response.failed", 5, respObj("failed", `"error":{"code":"server_error","message":"boom"}`))),
			OutcomeHTTP5xx, "response failed: server error (code 500, type server_error): boom", "", 1},
		{"failed rate limited", respScript(
			respEv("response.failed", 4, respObj("failed", `"error":{"code":"rate_limit_exceeded","message":"slow down"}`))),
			OutcomeHTTP4xx, "code 429, type rate_limit_exceeded", "", 0},
		{"failed with an unknown code", respScript(
			respEv("response.failed", 4, respObj("failed", `"error":{"code":"mystery","message":"?"}`))),
			OutcomeProtocolError, "type mystery", "", 0},
		{"error event", respScript(delta, respEv("error", 5, `"code":"invalid_prompt","message":"no","param":null`)),
			OutcomeHTTP4xx, "error event: server error (code 400, type invalid_prompt): no", "", 1},
		{"error event with a status", respScript(respEv("error", 4, `"code":"503","message":"busy"`)),
			OutcomeHTTP5xx, "code 503", "", 0},
		{"chat-style error event", []step{raw("event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"code\":503}}\n\n")},
			OutcomeHTTP5xx, "overloaded", "", 0},
		{"no completed", respScript(delta),
			OutcomeIncomplete, "stream ended without response.completed after 1 output deltas (last event response.output_text.delta)", "", 1},
		{"nothing at all", nil, OutcomeIncomplete, "stream ended before response.created", "", 0},
		{"[DONE] instead of completed", respScript(delta, ev("[DONE]")), OutcomeIncomplete, "[DONE] after 1 output deltas without response.completed", "", 1},
		{"delta before created", []step{delta}, OutcomeProtocolError, "response.output_text.delta before response.created", "", 0},
		{"completed before created", []step{respEv("response.completed", 0, respObj("completed", usageJSON))},
			OutcomeProtocolError, "response.completed before response.created", "", 0},
		{"second created", respScript(respEv("response.created", 4, respObj("in_progress", ""))),
			OutcomeProtocolError, "a second response.created", "", 0},
		{"deltas after completed", respScript(delta, respEv("response.completed", 5, respObj("completed", usageJSON)),
			respDelta("response.output_text.delta", 6, "late")),
			OutcomeProtocolError, "1 events after response.completed", "stop", 3},
		{"second completed", respScript(delta, respEv("response.completed", 5, respObj("completed", usageJSON)),
			respEv("response.completed", 6, respObj("completed", usageJSON))),
			OutcomeProtocolError, "events after response.completed", "stop", 3},
		{"[DONE] after completed is fine", respScript(delta, respEv("response.completed", 5, respObj("completed", usageJSON)), ev("[DONE]")),
			OutcomeSuccess, "", "stop", 3},
		{"sequence goes back", respScript(respDelta("response.output_text.delta", 2, "x")),
			OutcomeProtocolError, "sequence_number 2 after 3: events out of order", "", 0},
		{"event line and type disagree", respScript(raw("event: response.output_text.delta\ndata: {\"type\":\"response.completed\"}\n\n")),
			OutcomeProtocolError, "event: line says response.output_text.delta but its data says response.completed", "", 0},
		{"not JSON", respScript(raw("event: response.output_text.delta\ndata: {\"type\":\n\n")),
			OutcomeProtocolError, "is not valid JSON", "", 0},
		{"delta not a string", respScript(respEv("response.output_text.delta", 4, `"delta":{"content":"x"}`)),
			OutcomeProtocolError, "delta is not a string", "", 0},
		{"completed without its response", respScript(delta, respEv("response.completed", 5, "")),
			OutcomeProtocolError, "response.completed without its response object", "", 1},
		{"completed without usage counts deltas", respScript(delta, delta, respEv("response.completed", 5, respObj("completed", ""))),
			OutcomeSuccess, "", "stop", 2},
		{"huge event", respScript(respDelta("response.output_text.delta", 4, big)),
			OutcomeProtocolError, "maximum line size", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(c.steps...))
			d, _ := newDriver(t, ProtocolOpenAIResponses, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 5*time.Second)
			wantOutcome(t, r, c.want, c.errWant)
			if r.FinishReason != c.finish || r.OutputTokens != c.tokens {
				t.Errorf("finish %q, %d output tokens; want %q, %d", r.FinishReason, r.OutputTokens, c.finish, c.tokens)
			}
		})
	}
}

func TestResponsesUnary(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		want       Outcome
		errWant    string
		answer     string
	}{
		{"completed", `{"id":"resp_1","object":"response","status":"completed","output":[` +
			`{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Par"},{"type":"refusal","refusal":"x"},{"type":"output_text","text":"is"}]}],` +
			usageJSON + `}`, 200, OutcomeSuccess, "", "Paris"},
		{"failed", `{"status":"failed","error":{"code":"server_error","message":"oops"}}`, 200, OutcomeHTTP5xx, "oops", ""},
		{"background", `{"status":"queued"}`, 200, OutcomeProtocolError, `response status "queued" is not an end`, ""},
		{"no status", `{"output":[]}`, 200, OutcomeProtocolError, "answer has no status", ""},
		{"error body", `{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_prompt"}}`, 200, OutcomeHTTP4xx, "bad", ""},
		{"not JSON", `{"status":`, 200, OutcomeProtocolError, "answer is not a JSON Response object", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			d, _ := newDriver(t, ProtocolOpenAIResponses, ts.URL, nil)
			r := probeOnce(t, d, &Request{Prompt: "x", MaxTokens: 8, CaptureAnswer: true}, 5*time.Second)
			wantOutcome(t, r, c.want, c.errWant)
			if r.Answer != c.answer {
				t.Errorf("answer %q, want %q", r.Answer, c.answer)
			}
			if c.want == OutcomeSuccess && (r.OutputTokens != 3 || !r.Reasoning.Seen || r.CachedInputTokens != 2) {
				t.Errorf("result %+v", r)
			}
		})
	}
}

// FuzzResponsesStream feeds arbitrary event data, with and without an
// event: name, to the event handler: it never panics, ends with an
// outcome or keeps reading, and records at most one chunk per event.
func FuzzResponsesStream(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.created","sequence_number":0,"response":{"status":"in_progress"}}`,
		`{"type":"response.output_text.delta","sequence_number":4,"delta":"hi"}`,
		`{"type":"response.reasoning_text.delta","delta":"r"}`,
		`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":99999999999}}}`,
		`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}`,
		`{"type":"response.failed","response":{"error":{"code":429,"message":"x"}}}`,
		`{"type":"error","code":"server_error","message":"m"}`, `{"error":{"code":500}}`,
		`{"type":"response.function_call_arguments.delta","delta":{"a":1}}`, `{"type":"response.output_text.delta"}`,
		`{"type":"response.refusal.delta","delta":" "}`, "[DONE]", "[[[[", "\xff", "",
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "error")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		d := &responsesDriver{}
		start := time.Now()
		r := &Result{Start: start, Streamed: true, answer: &answerText{}}
		st := &respStream{}
		var ev respEvent
		created := &sseEvent{Data: []byte(`{"type":"response.created"}`), At: start}
		e := &sseEvent{Type: []byte(name), Data: data, At: start.Add(time.Millisecond)}
		for _, pre := range []bool{false, true} {
			if pre && d.onEvent(created, r, st, &ev) {
				t.Fatal("response.created ended the stream")
			}
			for i := 0; i < 3; i++ {
				n := len(r.Chunks)
				if d.onEvent(e, r, st, &ev) {
					if r.Outcome == "" || (r.Outcome != OutcomeSuccess && r.Err == nil) {
						t.Fatalf("ended with outcome %q, err %v", r.Outcome, r.Err)
					}
					break
				}
				if len(r.Chunks) > n+1 {
					t.Fatalf("one event recorded %d chunks", len(r.Chunks)-n)
				}
				e.At = e.At.Add(time.Millisecond)
			}
			st.finish(r)
			r.checkCounts()
			if r.OutputTokens < 0 || r.InputTokens < 0 {
				t.Fatalf("negative counts %+v", r)
			}
			r, st = &Result{Start: start, Streamed: true}, &respStream{}
		}
	})
}
