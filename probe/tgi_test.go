package probe

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

func tgiTok(i int, text string, special bool) string {
	sp := "false"
	if special {
		sp = "true"
	}
	return `{"index":` + itoa(i) + `,"token":{"id":` + itoa(100+i) + `,"text":` + quote(text) + `,"logprob":-0.1,"special":` + sp + `},"generated_text":null,"details":null}`
}

func tgiLast(i int, text string, special bool, details string) string {
	s := tgiTok(i, text, special)
	s = strings.Replace(s, `"generated_text":null,"details":null`, `"generated_text":"all of it","details":`+details, 1)
	return s
}

// tgiData frames like axum: "data:" without the space.
func tgiData(d time.Duration, data string) step {
	return step{delay: d, data: "data:" + data + "\n\n"}
}

func TestTGIStreamServerCounts(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(sseHandler(
		tgiData(30*time.Millisecond, tgiTok(1, "Hello", false)),
		tgiData(10*time.Millisecond, tgiTok(2, " world", false)),
		tgiData(10*time.Millisecond, tgiLast(3, "</s>", true, `{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"input_length":7}`)),
	)))
	d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
	temp, topP, seed := 0.0, 1.0, int64(-1)
	req := &Request{Prompt: "hello", MaxTokens: 8, Stream: true, Temperature: &temp, TopP: &topP, Seed: &seed,
		Stop: []string{"\n"}, Extra: map[string]any{"repetition_penalty": 1.1}}
	r := probeOnce(t, d, req, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 7 || r.InputTokensSource != TokenSourceServer {
		t.Errorf("tokens out %d (%s) in %d (%s)", r.OutputTokens, r.OutputTokensSource, r.InputTokens, r.InputTokensSource)
	}
	if len(r.Chunks) != 2 || r.FinishReason != "eos_token" {
		t.Errorf("chunks %d finish %q", len(r.Chunks), r.FinishReason)
	}
	if r.TTFT < 25*time.Millisecond || r.EndToEnd < r.Chunks[1].At+5*time.Millisecond {
		t.Errorf("ttft %v end-to-end %v (second chunk at %v): the special EOS must end the stream after the last output", r.TTFT, r.EndToEnd, r.Chunks[1].At)
	}
	h, body, path := rec.get()
	if path != "/generate_stream" || h.Get("Accept") != "text/event-stream" {
		t.Errorf("path %s accept %s", path, h.Get("Accept"))
	}
	params, _ := body["parameters"].(map[string]any)
	if body["inputs"] != "hello" || params["details"] != true || params["max_new_tokens"] != 8.0 ||
		params["repetition_penalty"] != 1.1 || params["seed"] == nil {
		t.Errorf("body %v", body)
	}
	// TGI answers 422 to temperature 0 and top_p 1: they must not be sent.
	for _, k := range []string{"temperature", "top_p", "ignore_eos", "min_tokens"} {
		if _, ok := params[k]; ok {
			t.Errorf("parameter %s sent: %v", k, params)
		}
	}
	if _, ok := body["model"]; ok {
		t.Errorf("TGI's native API has no model field: %v", body)
	}
}

// A special token first (e.g. BOS echoed) and an empty-text token must not
// end TTFT; their tokens are attributed to the next output chunk.
func TestTGISpecialAndEmptyTokensAreNotOutput(t *testing.T) {
	ts := startServer(t, sseHandler(
		tgiData(5*time.Millisecond, tgiTok(1, "<s>", true)),
		tgiData(20*time.Millisecond, tgiTok(2, "", false)),
		tgiData(20*time.Millisecond, tgiTok(3, "é", false)),
		tgiData(5*time.Millisecond, tgiTok(4, "x", false)),
		tgiData(5*time.Millisecond, tgiTok(5, "", true)),
		tgiData(0, tgiLast(6, "", true, `{"finish_reason":"eos_token","generated_tokens":6,"seed":1}`)),
	))
	d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 2 || r.Chunks[0].Tokens != 3 || r.Chunks[1].Tokens != 1 {
		t.Fatalf("chunks %+v", r.Chunks)
	}
	if r.TTFT < 40*time.Millisecond {
		t.Errorf("TTFT %v ends before the first token with text", r.TTFT)
	}
	if r.OutputTokens != 6 || r.OutputTokensSource != TokenSourceServer || r.InputTokensSource != TokenSourceNone {
		t.Errorf("tokens %d %s input source %q", r.OutputTokens, r.OutputTokensSource, r.InputTokensSource)
	}
}

func TestTGIStreamWithoutDetailsCountsTokenEvents(t *testing.T) {
	last := strings.Replace(tgiTok(3, "</s>", true), `"generated_text":null`, `"generated_text":"a b"`, 1)
	ts := startServer(t, sseHandler(
		tgiData(0, tgiTok(1, "a", false)), tgiData(0, tgiTok(2, " b", false)), tgiData(0, last),
	))
	d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceCounted || r.FinishReason != "" {
		t.Errorf("tokens %d (%s) finish %q", r.OutputTokens, r.OutputTokensSource, r.FinishReason)
	}
}

func TestTGIStreamOutcomes(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
		want  Outcome
		msg   string
	}{
		{"ends without the final event", []step{tgiData(0, tgiTok(1, "a", false))}, OutcomeIncomplete, "without the final event"},
		{"validation error event", []step{tgiData(0, `{"error":"Input validation error: temperature","error_type":"validation"}`)}, OutcomeHTTP4xx, "code 422"},
		{"generation error mid-stream", []step{tgiData(0, tgiTok(1, "a", false)), tgiData(0, `{"error":"CUDA OOM","error_type":"generation"}`)}, OutcomeHTTP4xx, "code 424"},
		{"overloaded", []step{tgiData(0, `{"error":"Model is overloaded","error_type":"overloaded"}`)}, OutcomeHTTP4xx, "code 429"},
		{"incomplete generation", []step{tgiData(0, `{"error":"Incomplete generation stream","error_type":"incomplete_generation_stream"}`)}, OutcomeHTTP5xx, "code 500"},
		{"unknown error type", []step{tgiData(0, `{"error":"?","error_type":"mystery"}`)}, OutcomeProtocolError, "mystery"},
		{"malformed", []step{tgiData(0, `{"index":1,"token":{`)}, OutcomeProtocolError, "not valid JSON"},
		{"[DONE] alone is not an end", []step{tgiData(0, tgiTok(1, "a", false)), tgiData(0, "[DONE]")}, OutcomeIncomplete, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(c.steps...))
			d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
			wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), c.want, c.msg)
		})
	}
}

func TestTGIHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		want   Outcome
	}{{422, OutcomeHTTP4xx}, {424, OutcomeHTTP4xx}, {429, OutcomeHTTP4xx}, {500, OutcomeHTTP5xx}, {503, OutcomeHTTP5xx}} {
		ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(`{"error":"Model is overloaded","error_type":"overloaded"}`))
		}))
		d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
		for _, stream := range []bool{true, false} {
			r := probeOnce(t, d, &Request{Prompt: "x", Stream: stream}, 5*time.Second)
			wantOutcome(t, r, c.want, "Model is overloaded")
			if r.StatusCode != c.status {
				t.Errorf("status %d", r.StatusCode)
			}
		}
	}
}

func TestTGIUnary(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Total-Time", "120")
		h.Set("X-Validation-Time", "1")
		h.Set("X-Queue-Time", "9")
		h.Set("X-Inference-Time", "110")
		h.Set("X-Time-Per-Token", "11")
		h.Set("X-Prompt-Tokens", "12")
		h.Set("X-Generated-Tokens", "10")
		_, _ = w.Write([]byte(`{"generated_text":"ten words","details":{"finish_reason":"length","generated_tokens":10,"seed":null,"prefill":[],"tokens":[]}}`))
	})))
	d, _ := newDriver(t, ProtocolTGI, ts.URL+"/generate_stream", nil)
	r := probeOnce(t, d, &Request{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 10}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.OutputTokens != 10 || r.OutputTokensSource != TokenSourceServer || r.InputTokens != 12 || r.FinishReason != "length" {
		t.Errorf("result %+v", r)
	}
	want := []ServerTiming{{"total", 120 * time.Millisecond}, {"validation", time.Millisecond}, {"queue", 9 * time.Millisecond},
		{"inference", 110 * time.Millisecond}, {"time_per_token", 11 * time.Millisecond}}
	if len(r.ServerTimings) != len(want) {
		t.Fatalf("server timings %v", r.ServerTimings)
	}
	for i := range want {
		if r.ServerTimings[i] != want[i] {
			t.Errorf("timing %d = %v, want %v", i, r.ServerTimings[i], want[i])
		}
	}
	if _, body, path := rec.get(); path != "/generate" || body["inputs"] != "hi" {
		t.Errorf("path %s body %v", path, body)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, "tgi", "p", r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "client end-to-end") || !strings.Contains(out.String(), "time_per_token") {
		t.Errorf("report lacks the server timings:\n%s", out.String())
	}
}

func TestTGIUnaryHeaderCountsAndBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name, body string
		stream     bool
		want       Outcome
	}{
		{"header counts only", `{"generated_text":"x"}`, false, OutcomeSuccess},
		{"no generated_text", `{"details":null}`, false, OutcomeProtocolError},
		{"JSON to a stream request", `{"generated_text":"x"}`, true, OutcomeProtocolError},
		{"error in a 200 body", `{"error":"boom","error_type":"generation"}`, false, OutcomeHTTP4xx},
		{"not JSON", `<html>`, false, OutcomeProtocolError},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Generated-Tokens", "4")
				w.Header().Set("X-Total-Time", "99999999999999999999") // ignored, not trusted
				_, _ = w.Write([]byte(c.body))
			}))
			d, _ := newDriver(t, ProtocolTGI, ts.URL, nil)
			r := probeOnce(t, d, &Request{Prompt: "x", Stream: c.stream}, 5*time.Second)
			wantOutcome(t, r, c.want, "")
			if c.want == OutcomeSuccess && (r.OutputTokens != 4 || r.OutputTokensSource != TokenSourceServer || len(r.ServerTimings) != 0 || r.ServerTimingsInvalid != 1) {
				t.Errorf("tokens %d %s timings %v (%d invalid, want the absurd total counted)", r.OutputTokens, r.OutputTokensSource, r.ServerTimings, r.ServerTimingsInvalid)
			}
		})
	}
}

func TestNativeEndpoint(t *testing.T) {
	for _, c := range []struct{ base, path, want string }{
		{"http://h:3000", tgiStreamPath, "http://h:3000/generate_stream"},
		{"http://h:3000/", tgiUnaryPath, "http://h:3000/generate"},
		{"http://h/tgi/generate_stream", tgiUnaryPath, "http://h/tgi/generate"},
		{"http://h/tgi/generate", tgiStreamPath, "http://h/tgi/generate_stream"},
		{"http://h:11434/api/chat", ollamaGeneratePath, "http://h:11434/api/generate"},
		{"http://h:11434", ollamaChatPath, "http://h:11434/api/chat"},
	} {
		u, err := parseBaseURL(c.base)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if strings.HasPrefix(c.path, "/api") {
			got = nativeEndpoint(u, c.path, ollamaChatPath, ollamaGeneratePath)
		} else {
			got = nativeEndpoint(u, c.path, tgiStreamPath, tgiUnaryPath)
		}
		if got != c.want {
			t.Errorf("%s + %s = %s, want %s", c.base, c.path, got, c.want)
		}
	}
}

// FuzzTGIStream feeds arbitrary bytes through the SSE reader and the TGI
// event handler, split at random read boundaries: nothing may panic, every
// outcome is valid and explained, and counts stay bounded.
func FuzzTGIStream(f *testing.F) {
	for _, s := range []string{
		"data:" + tgiTok(1, "a", false) + "\n\ndata:" + tgiLast(2, "</s>", true, `{"finish_reason":"eos_token","generated_tokens":2,"input_length":3}`) + "\n\n",
		"data:{\"error\":\"x\",\"error_type\":\"validation\"}\n\n",
		"data: {\"token\":{\"text\":\"\",\"special\":false},\"details\":{\"generated_tokens\":-5}}\n\n",
		"data:{\"token\":null,\"generated_text\":\"\"}\n\n",
		"data:[DONE]\n\n:keep-alive\n\n",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint8) {
		start := time.Now()
		r := &Result{Start: start, Streamed: true}
		sr := newSSEReader(splitReaderFor(in, seed), 512, 1<<16)
		var st tgiStream
		for {
			ev, err := sr.next()
			if err != nil {
				break
			}
			if st.onEvent(ev, r) {
				break
			}
		}
		st.finish(r)
		checkFuzzResult(t, r)
		if r.OutputTokensSource == TokenSourceCounted && r.OutputTokens > len(in) {
			t.Fatalf("counted %d tokens from %d bytes", r.OutputTokens, len(in))
		}
	})
}

// checkFuzzResult holds for every Result, whatever the server sent.
func checkFuzzResult(t *testing.T, r *Result) {
	t.Helper()
	if r.Outcome != "" {
		valid := false
		for _, o := range Outcomes() {
			valid = valid || o == r.Outcome
		}
		if !valid || (r.Outcome != OutcomeSuccess) != (r.Err != nil) {
			t.Fatalf("outcome %q err %v", r.Outcome, r.Err)
		}
	}
	if r.OutputTokens < 0 || r.InputTokens < 0 {
		t.Fatalf("negative tokens %d %d", r.OutputTokens, r.InputTokens)
	}
	if len(r.Chunks) > 0 && r.TTFT != r.Chunks[0].At {
		t.Fatalf("TTFT %v is not the first chunk %v", r.TTFT, r.Chunks[0].At)
	}
	for _, st := range r.ServerTimings {
		if st.Duration < 0 {
			t.Fatalf("negative server timing %v", st)
		}
	}
}
