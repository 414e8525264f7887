package probe

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ndjsonHandler streams NDJSON lines (each step's data verbatim).
func ndjsonHandler(steps ...step) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
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

func olChat(d time.Duration, content string) step {
	return step{delay: d, data: `{"model":"small","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":` + quote(content) + `},"done":false}` + "\n"}
}

func olGen(d time.Duration, field, text string) step {
	return step{delay: d, data: `{"model":"small","created_at":"2026-01-01T00:00:00Z","response":"","` + field + `":` + quote(text) + `,"done":false}` + "\n"}
}

const olDoneFields = `"done":true,"done_reason":"stop","total_duration":5000000000,"load_duration":2000000,"prompt_eval_count":26,"prompt_eval_duration":130000000,"eval_count":3,"eval_duration":260000000`

func olDone(d time.Duration, chat bool) step {
	if chat {
		return step{delay: d, data: `{"model":"small","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},` + olDoneFields + "}\n"}
	}
	return step{delay: d, data: `{"model":"small","created_at":"2026-01-01T00:00:00Z","response":"","context":[1,2,3],` + olDoneFields + "}\n"}
}

func TestOllamaChatStream(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(ndjsonHandler(
		olChat(25*time.Millisecond, ""), // nothing yet: not the first token
		olChat(10*time.Millisecond, "Hello"),
		olChat(10*time.Millisecond, " there"),
		olChat(10*time.Millisecond, "!"),
		olDone(5*time.Millisecond, true),
	)))
	d, _ := newDriver(t, ProtocolOllama, ts.URL, nil)
	temp, seed := 0.0, int64(7)
	req := &Request{Prompt: "hi", MaxTokens: 16, Stream: true, Temperature: &temp, Seed: &seed, IgnoreEOS: true,
		Extra: map[string]any{"keep_alive": "5m", "options": map[string]any{"num_ctx": 4096}}}
	r := probeOnce(t, d, req, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 3 || r.TTFT < 30*time.Millisecond || r.TTFT != r.Chunks[0].At {
		t.Errorf("chunks %+v ttft %v", r.Chunks, r.TTFT)
	}
	if r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 26 || r.InputTokensSource != TokenSourceServer || r.FinishReason != "stop" {
		t.Errorf("result %+v", r)
	}
	want := []ServerTiming{{"total", 5 * time.Second}, {"load", 2 * time.Millisecond}, {"prompt_eval", 130 * time.Millisecond}, {"eval", 260 * time.Millisecond}}
	if len(r.ServerTimings) != len(want) {
		t.Fatalf("timings %v", r.ServerTimings)
	}
	for i := range want {
		if r.ServerTimings[i] != want[i] {
			t.Errorf("timing %d %v, want %v", i, r.ServerTimings[i], want[i])
		}
	}
	_, body, path := rec.get()
	opts, _ := body["options"].(map[string]any)
	msgs, _ := body["messages"].([]any)
	if path != "/api/chat" || body["stream"] != true || body["keep_alive"] != "5m" || len(msgs) != 1 ||
		opts["num_predict"] != 16.0 || opts["temperature"] != 0.0 || opts["seed"] != 7.0 || opts["num_ctx"] != 4096.0 {
		t.Errorf("path %s body %v", path, body)
	}
	if _, ok := body["ignore_eos"]; ok {
		t.Errorf("ignore_eos sent to Ollama: %v", body)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, "ollama", "p", r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"server timings", "prompt_eval", "130.0 ms", "client end-to-end"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

func TestOllamaGenerateThinkingAndCountedTokens(t *testing.T) {
	rec := &recorded{}
	done := `{"model":"small","response":"","done":true,"done_reason":"length"}` + "\n"
	ts := startServer(t, rec.wrap(ndjsonHandler(
		olGen(20*time.Millisecond, "thinking", "hmm"),
		olGen(5*time.Millisecond, "response", "yes"),
		step{data: done},
	)))
	d, _ := newDriver(t, ProtocolOllama, ts.URL+"/api/chat", func(o *TargetOptions) { o.OllamaAPI = OllamaAPIGenerate })
	r := probeOnce(t, d, &Request{Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, Stream: true}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 2 || r.TTFT < 15*time.Millisecond {
		t.Errorf("thinking counts as output for TTFT: chunks %+v ttft %v", r.Chunks, r.TTFT)
	}
	if r.OutputTokens != 2 || r.OutputTokensSource != TokenSourceCounted || r.InputTokensSource != TokenSourceNone || r.ServerTimings != nil {
		t.Errorf("without eval_count: %d %s input %q timings %v", r.OutputTokens, r.OutputTokensSource, r.InputTokensSource, r.ServerTimings)
	}
	if _, body, path := rec.get(); path != "/api/generate" || body["prompt"] != "be brief\n\nhi" {
		t.Errorf("path %s body %v", path, body)
	}
}

func TestOllamaStreamOutcomes(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
		want  Outcome
		msg   string
	}{
		{"ends without done", []step{olChat(0, "a")}, OutcomeIncomplete, "without the final done"},
		{"error line", []step{olChat(0, "a"), {data: `{"error":"model runner has unexpectedly stopped"}` + "\n"}}, OutcomeHTTP5xx, "unexpectedly stopped"},
		{"malformed line", []step{olChat(0, "a"), {data: `{"model":"x","response":"unterm` + "\n"}}, OutcomeProtocolError, "line 2"},
		{"cut inside the last line", []step{olChat(0, "a"), {data: `{"model":"x","resp`}}, OutcomeIncomplete, "inside line 2"},
		{"line too long", []step{{data: `{"response":"` + strings.Repeat("x", 200) + `"}` + "\n"}}, OutcomeProtocolError, "NDJSON line"},
		{"negative durations dropped", []step{{data: `{"done":true,"total_duration":-5,"eval_duration":99999999999999999}` + "\n"}}, OutcomeSuccess, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, ndjsonHandler(c.steps...))
			d, _ := newDriver(t, ProtocolOllama, ts.URL, func(o *TargetOptions) { o.MaxLineBytes = 128 })
			r := probeOnce(t, d, streamReq(), 5*time.Second)
			wantOutcome(t, r, c.want, c.msg)
			if len(r.ServerTimings) != 0 {
				t.Errorf("untrusted durations kept: %v", r.ServerTimings)
			}
		})
	}
}

func TestOllamaHTTPErrorsAndUnary(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch {
		case bytes.Contains(b, []byte(`"missing"`)):
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"model 'missing' not found"}`))
		case bytes.Contains(b, []byte(`"busy"`)):
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"server busy, please try again.  maximum pending requests exceeded"}`))
		default:
			_, _ = w.Write([]byte(`{"model":"m","message":{"role":"assistant","content":"hi"},` + olDoneFields + `}`))
		}
	}))
	d, _ := newDriver(t, ProtocolOllama, ts.URL, nil)
	r := probeOnce(t, d, &Request{Model: "missing", Prompt: "x", Stream: true}, 5*time.Second)
	wantOutcome(t, r, OutcomeHTTP4xx, "not found")
	r = probeOnce(t, d, &Request{Model: "busy", Prompt: "x"}, 5*time.Second)
	wantOutcome(t, r, OutcomeHTTP5xx, "server busy")
	r = probeOnce(t, d, &Request{Prompt: "x"}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.Streamed || r.TTFT != 0 || r.OutputTokens != 3 || r.InputTokens != 26 || len(r.ServerTimings) != 4 {
		t.Errorf("unary result %+v", r)
	}
	r = probeOnce(t, d, &Request{Prompt: "x", Stream: true}, 5*time.Second)
	wantOutcome(t, r, OutcomeProtocolError, "single JSON document")
}

func TestOllamaUnknownAPI(t *testing.T) {
	if _, err := NewDriver(ProtocolOllama, TargetOptions{URL: "http://h", OllamaAPI: "embed"}, nil); err == nil {
		t.Fatal("unknown ollama api accepted")
	}
}

func FuzzOllamaStream(f *testing.F) {
	for _, s := range []string{
		olChat(0, "a").data + olDone(0, true).data,
		olGen(0, "thinking", "x").data + olDone(0, false).data,
		`{"error":{"message":"x"}}` + "\n",
		`{"done":true,"eval_count":-3,"prompt_eval_count":1e3}` + "\n",
		`{"message":{"content":[1]},"done":false}` + "\n" + `{"done":tru`,
		`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}},7]},"done":false}` + "\n",
	} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint8) {
		r := &Result{Start: time.Now(), Streamed: true}
		nr := newNDJSONReader(splitReaderFor(in, seed), 512, 1<<16)
		var st ollamaStream
		for {
			line, at, err := nr.next()
			if err != nil {
				break
			}
			if st.onLine(line, at, nr.unterminated, r) {
				break
			}
		}
		st.finish(r)
		checkFuzzResult(t, r)
	})
}

// TestOllamaBadDurations: a duration that is not a usable number is
// counted and left out; the answer and the good durations stay.
func TestOllamaBadDurations(t *testing.T) {
	done := `{"model":"small","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop",` +
		`"total_duration":5000000000,"load_duration":"soon","prompt_eval_duration":-5,"eval_count":1,"eval_duration":1e20}` + "\n"
	ts := startServer(t, ndjsonHandler(olChat(0, "hi"), step{data: done}))
	d, _ := newDriver(t, ProtocolOllama, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 1, Stream: true}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.ServerTimings) != 1 || r.ServerTimings[0] != (ServerTiming{"total", 5 * time.Second}) || r.ServerTimingsInvalid != 3 {
		t.Errorf("timings %v, %d invalid; want total alone and 3 invalid", r.ServerTimings, r.ServerTimingsInvalid)
	}
}

// TestOllamaToolCalls: /api/chat sends a parsed tool call as a line of its
// own, content "" and message.tool_calls (Ollama @fb30760, the bytes
// below as ChatHandler writes them). Such a line is output: it makes the
// TTFT when it comes first and counts as a chunk, as a tool-call delta
// does on the OpenAI routes; an empty tool_calls carries nothing.
func TestOllamaToolCalls(t *testing.T) {
	toolLine := `{"model":"qwen3:0.6b","created_at":"2026-11-01T10:00:00.1Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}` + "\n"
	emptyLine := `{"model":"qwen3:0.6b","created_at":"2026-11-01T10:00:00.1Z","message":{"role":"assistant","content":"","tool_calls":[]},"done":false}` + "\n"
	done := `{"model":"qwen3:0.6b","created_at":"2026-11-01T10:00:00.2Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":1000,"prompt_eval_count":12,"eval_count":9}` + "\n"
	ts := startServer(t, ndjsonHandler(raw(emptyLine), step{delay: 30 * time.Millisecond, data: toolLine}, raw(done)))
	d, _ := newDriver(t, ProtocolOllama, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 1 || r.TTFT < 30*time.Millisecond || r.OutputTokens != 9 || r.FinishReason != "stop" || r.Reasoning.FirstAnswer != r.TTFT {
		t.Errorf("%d chunks, TTFT %v, %d output tokens, finish %q, first answer %v", len(r.Chunks), r.TTFT, r.OutputTokens, r.FinishReason, r.Reasoning.FirstAnswer)
	}
}
