package probe

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocatedDuring reports how many bytes the whole process allocated while
// f ran (TotalAlloc is monotonic, so it bounds heap growth from above and
// does not depend on GC timing). The test servers run in-process and are
// written not to allocate per write.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// repeatHandler writes head, then body repeated until total bytes were
// sent or the client went away, flushing each write.
func repeatHandler(head string, body []byte, total int64, pause time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		for sent := int64(0); total < 0 || sent < total; sent += int64(len(body)) {
			if _, err := w.Write(body); err != nil {
				return
			}
			fl.Flush()
			if pause > 0 && !sleepCtx(r.Context(), pause) {
				return
			}
		}
	}
}

func TestHostileInputs(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		handler  http.Handler
		mod      func(*TargetOptions)
		timeout  time.Duration
		want     Outcome
		contains string
		maxAlloc uint64
	}{
		{name: "100 MB line", handler: repeatHandler("data: ", []byte(strings.Repeat("x", 32<<10)), 100*mib, 0),
			want: OutcomeProtocolError, contains: "maximum line size", maxAlloc: 16 * mib},
		{name: "100 MB of data lines in one event", handler: repeatHandler("", []byte(strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 32)), 100*mib, 0),
			want: OutcomeProtocolError, contains: "event data exceeds", maxAlloc: 16 * mib},
		{name: "endless comments hit the default body limit", handler: repeatHandler("", []byte(strings.Repeat(": "+strings.Repeat("z", 1021)+"\n", 32)), -1, 0),
			want: OutcomeProtocolError, contains: "maximum response size", maxAlloc: 16 * mib},
		{name: "endless content stream", handler: repeatHandler("", []byte(strings.Repeat("data: "+chatDelta("tok")+"\n\n", 64)), -1, 0),
			mod: func(o *TargetOptions) { o.MaxResponseBytes = 4 * mib }, want: OutcomeProtocolError, contains: "maximum response size", maxAlloc: 64 * mib},
		{name: "endless slow keep-alives", handler: repeatHandler(": hi\n\n", []byte(": ping\n\n"), -1, 20*time.Millisecond),
			timeout: 500 * time.Millisecond, want: OutcomeTimeout, contains: "deadline", maxAlloc: 4 * mib},
		{name: "non-UTF-8 in a chunk", handler: sseHandler(ev(`{"choices":[{"delta":{"content":"`+"\xff\xfe"+`"}}]}`), ev("[DONE]")),
			want: OutcomeProtocolError, contains: "not valid UTF-8"},
		{name: "non-UTF-8 outside JSON", handler: sseHandler(raw("data: \xc3\x28\n\n"), ev("[DONE]")),
			want: OutcomeProtocolError, contains: "not valid UTF-8"},
		{name: "JSON bomb in a chunk", handler: sseHandler(ev(strings.Repeat("[", 500000)+strings.Repeat("]", 500000)), ev("[DONE]")),
			want: OutcomeProtocolError, contains: "nested deeper than 64", maxAlloc: 16 * mib},
		{name: "JSON bomb of objects", handler: sseHandler(ev(`{"choices":[{"delta":`+strings.Repeat(`{"a":`, 100)+`1`+strings.Repeat("}", 100)+`}]}`), ev("[DONE]")),
			want: OutcomeProtocolError, contains: "nested deeper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.handler)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, tt.mod)
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 60 * time.Second
			}
			var r *Result
			alloc := allocatedDuring(func() { r = probeOnce(t, d, streamReq(), timeout) })
			wantOutcome(t, r, tt.want, tt.contains)
			t.Logf("allocated %.1f MiB", float64(alloc)/(1<<20))
			if tt.maxAlloc > 0 && alloc > tt.maxAlloc {
				t.Errorf("allocated %d MiB, want ≤ %d MiB", alloc>>20, tt.maxAlloc>>20)
			}
		})
	}
}

func TestHostileNonStreamBomb(t *testing.T) {
	ts := startServer(t, statusHandler(200, "application/json", strings.Repeat("[", 1<<20)+strings.Repeat("]", 1<<20)))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "x"}, 30*time.Second)
	wantOutcome(t, r, OutcomeProtocolError, "nested deeper")
}

// FuzzChunk feeds arbitrary event payloads to the OpenAI chunk handling:
// it must never panic, and whatever it records must stay sane.
func FuzzChunk(f *testing.F) {
	for _, s := range []string{
		chatDelta("hi"), roleChunk(), chatFinish("stop"), usageChunk(3, 4), "[DONE]",
		`{"choices":[{"text":"a","finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
		`{"error":{"code":500,"message":"x"}}`, `{"object":"error","code":"404"}`, `{"error":"x","error_type":"y"}`,
		`{"choices":[{"delta":{"reasoning_content":"r"}}],"usage":{"completion_tokens":99999999999}}`,
		// llama.cpp's timings object, and what a broken one could hold.
		`{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"usage":{"completion_tokens":12,"prompt_tokens":34},"timings":{"prompt_n":34,"prompt_ms":31.989,"prompt_per_token_ms":0.94,"predicted_n":12,"predicted_ms":80.5,"predicted_per_token_ms":6.7}}`,
		`{"choices":[],"timings":{"prompt_ms":null,"prompt_per_token_ms":-1,"predicted_ms":1e400,"predicted_per_token_ms":"x"}}`,
		`{"choices":[],"timings":{"prompt_ms":3600000.5,"predicted_ms":{"a":[[[]]]}}}`, `{"timings":[{"prompt_ms":1}]}`,
		// TGI's OpenAI-route error event, and older llama.cpp usage whose
		// cached part is prompt_tokens - timings.prompt_n.
		`{"error":{"message":"Model is overloaded","http_status_code":422}}`,
		`{"error":{"message":"Input validation error: x","http_status_code":"4e9"}}`,
		`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1},"timings":{"prompt_n":4.5e18}}`,
		"[[[[", "\xff",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, errorLine bool) {
		d := &openAIDriver{}
		start := time.Now()
		r := &Result{Start: start, Streamed: true}
		var st streamState
		var chunk oaiChunk
		ev := &sseEvent{At: start.Add(time.Millisecond)}
		if errorLine {
			ev.ErrorData = data
		} else {
			ev.Data = data
		}
		for i := 0; i < 3; i++ { // the same payload several times, as a stream would
			if d.onEvent(ev, r, &st, &chunk) {
				break
			}
			ev.At = ev.At.Add(time.Millisecond)
		}
		st.finish(r)
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
		for _, c := range r.Chunks {
			if c.Tokens < 0 || c.Tokens > maxTokensPerChunk {
				t.Fatalf("chunk tokens %d", c.Tokens)
			}
		}
		if len(r.ServerTimings)+r.ServerTimingsInvalid > 4 || r.ServerTimingsInvalid < 0 {
			t.Fatalf("%d server timings, %d invalid", len(r.ServerTimings), r.ServerTimingsInvalid)
		}
		for _, st := range r.ServerTimings {
			if st.Duration < 0 || st.Duration > time.Hour {
				t.Fatalf("server timing %v", st)
			}
		}
	})
}

// TestHostileChoices: a 1 MiB line whose choices (or their deltas) are not
// objects ends the probe as a protocol error after one error, not one
// error value per element (encoding/json's way, about 100× the line).
func TestHostileChoices(t *testing.T) {
	const mib = 1 << 20
	for _, elem := range []string{`1`, `"x"`, `[]`, `{"delta":1}`, `{"message":"x"}`, `{"delta":[1]}`} {
		t.Run(elem, func(t *testing.T) {
			n := (DefaultMaxLineBytes - 400) / (len(elem) + 1)
			chunk := `{"id":"x","object":"chat.completion.chunk","choices":[` + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`
			ts := startServer(t, sseHandler(ev(vllmRole()), ev(chunk), ev(vllmFinish("stop")), ev("[DONE]")))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			var r *Result
			alloc := allocatedDuring(func() { r = probeOnce(t, d, streamReq(), 30*time.Second) })
			wantOutcome(t, r, OutcomeProtocolError, "not an object")
			if alloc > 6*mib {
				t.Errorf("allocated %.1f MiB for a 1 MiB line, want ≤ 6 MiB", float64(alloc)/mib)
			}
		})
	}
}
