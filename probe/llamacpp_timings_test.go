package probe

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// near compares durations parsed from milliseconds, which round to the
// nanosecond.
func nearTimings(got, want []ServerTiming) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Name != want[i].Name || (got[i].Duration-want[i].Duration).Abs() > time.Nanosecond {
			return false
		}
	}
	return true
}

// TestLlamaCppTimingsFixtures: the timings object of the captured
// llama.cpp answers (shared/fixtures/llamacpp) becomes ServerTimings
// under llama.cpp's names, streamed or not.
func TestLlamaCppTimingsFixtures(t *testing.T) {
	for _, c := range []struct {
		name, protocol string
		want           []ServerTiming
	}{
		{"chat-stream.sse", ProtocolOpenAIChat, []ServerTiming{{"prompt", msDur(31.989)}, {"prompt_per_token", msDur(0.9408529411764706)},
			{"predicted", msDur(80.5)}, {"predicted_per_token", msDur(6.708333333333333)}}},
		{"completions-stream.sse", ProtocolOpenAICompletions, []ServerTiming{{"prompt", msDur(11.929)}, {"prompt_per_token", msDur(2.3858)},
			{"predicted", msDur(51.469)}, {"predicted_per_token", msDur(6.433625)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, replayFixture(t, c.name))
			d, _ := newDriver(t, c.protocol, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if !nearTimings(r.ServerTimings, c.want) || r.ServerTimingsInvalid != 0 {
				t.Errorf("server timings %v (%d invalid), want %v", r.ServerTimings, r.ServerTimingsInvalid, c.want)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join("testdata", "llamacpp", "chat-nonstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 6}, 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	want := []ServerTiming{{"prompt", msDur(8.409)}, {"prompt_per_token", msDur(8.409)}, {"predicted", msDur(39.014)}, {"predicted_per_token", msDur(6.5023333333333335)}}
	if !nearTimings(r.ServerTimings, want) {
		t.Errorf("non-streamed server timings %v, want %v", r.ServerTimings, want)
	}
}

// TestLlamaCppTimingsPlacementAndBadValues: the timings object is read
// wherever it comes (the usage chunk of newer builds, every chunk with
// timings_per_token, the last one winning), and a value that cannot be a
// duration is counted, never used and never a failure of the probe.
func TestLlamaCppTimingsPlacementAndBadValues(t *testing.T) {
	final := func(timings string) string {
		return `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk","timings":` + timings + `}`
	}
	good := `{"prompt_n":3,"prompt_ms":12.5,"prompt_per_token_ms":4.166,"predicted_n":2,"predicted_ms":20,"predicted_per_token_ms":10}`
	for _, c := range []struct {
		name    string
		events  []step
		want    []string // names of the timings kept
		invalid int
	}{
		{"on the usage chunk", []step{ev(chatDelta("a")), ev(chatDelta("b")), ev(chatFinish("stop")),
			ev(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2},"timings":` + good + `}`), ev("[DONE]")},
			[]string{"prompt", "prompt_per_token", "predicted", "predicted_per_token"}, 0},
		{"on every chunk, the last wins", []step{
			ev(`{"choices":[{"delta":{"content":"a"}}],"timings":{"prompt_ms":null,"predicted_ms":-1}}`),
			ev(`{"choices":[{"delta":{"content":"b"}}],"timings":` + good + `}`), ev(final(good)), ev("[DONE]")},
			[]string{"prompt", "prompt_per_token", "predicted", "predicted_per_token"}, 0},
		{"null (NaN, Inf) and missing", []step{ev(chatDelta("a")),
			ev(final(`{"prompt_n":0,"prompt_ms":0.0,"prompt_per_token_ms":null,"predicted_ms":7}`)), ev("[DONE]")},
			[]string{"prompt", "predicted"}, 2},
		{"not numbers, negative, over an hour, overflow", []step{ev(chatDelta("a")),
			ev(final(`{"prompt_ms":"12","prompt_per_token_ms":-0.5,"predicted_ms":3600000.001,"predicted_per_token_ms":1e400}`)), ev("[DONE]")},
			nil, 4},
		{"an hour is still valid; odd keys are unknown", []step{ev(chatDelta("a")),
			ev(final(`{"Prompt_ms":1,"prompt_m\u0073":2,"prompt_ms":3600000,"prompt_ms":1.5,"predicted_ms":{"a":[1]},"predicted_per_token_ms":[],"extra":{"prompt_ms":9}}`)), ev("[DONE]")},
			[]string{"prompt"}, 3},
		{"not an object", []step{ev(chatDelta("a")), ev(final(`[1,2]`)), ev("[DONE]")}, nil, 4},
		{"null timings are no timings", []step{ev(chatDelta("a")), ev(final(`null`)), ev("[DONE]")}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(c.events...))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			var names []string
			for _, st := range r.ServerTimings {
				names = append(names, st.Name)
				if st.Duration < 0 || st.Duration > time.Hour {
					t.Errorf("timing %v kept", st)
				}
			}
			if !reflect.DeepEqual(names, c.want) || r.ServerTimingsInvalid != c.invalid {
				t.Errorf("kept %v with %d invalid, want %v with %d", names, r.ServerTimingsInvalid, c.want, c.invalid)
			}
		})
	}
}

// TestLlamaCppTimingsReport: `llm-prober probe` shows the server's clock
// beside the client's.
func TestLlamaCppTimingsReport(t *testing.T) {
	r := &Result{
		RequestID: "x", StatusCode: 200, Streamed: true, Outcome: OutcomeSuccess,
		TTFT: 40 * time.Millisecond, Chunks: chunks(40, 1, 50, 1, 60, 1), EndToEnd: 70 * time.Millisecond,
		OutputTokens: 3, OutputTokensSource: TokenSourceServer,
		ServerTimings: []ServerTiming{{"prompt", 31 * time.Millisecond}, {"prompt_per_token", time.Millisecond},
			{"predicted", 20 * time.Millisecond}, {"predicted_per_token", 20 * time.Millisecond / 3}},
		ServerTimingsInvalid: 1,
	}
	var b strings.Builder
	if err := WriteReport(&b, "llama", "", r); err != nil {
		t.Fatal(err)
	}
	// Columns widen with the longest label; compare words.
	words := strings.Join(strings.Fields(b.String()), " ")
	for _, s := range []string{
		"server timings as reported by the server, beside the client's view",
		"prompt 31.00 ms (client TTFT 40.00 ms, 9.00 ms outside the server's prompt clock)",
		"prompt_per_token 1.00 ms predicted",
		"predicted 20.00 ms (client end-to-end − TTFT 30.00 ms)",
		"predicted_per_token 6.67 ms (client TPOT 15.00 ms; the server divides by 3 tokens, TPOT by 2)",
		"invalid 1 more the server sent could not be used",
	} {
		if !strings.Contains(words, s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

// BenchmarkStreamEventLlamaCppFinal: llama.cpp's final chunk, with usage
// and the timings object (the fixture's). Its 4 allocations are the usage
// and finish reason's, as on the same chunk without timings; reading the
// timings allocates nothing.
func BenchmarkStreamEventLlamaCppFinal(b *testing.B) {
	benchEvent(b, llamaCppSeeds[0])
}

// TestLlamaCppCachedPromptTokens: current llama.cpp sends
// usage.prompt_tokens_details.cached_tokens; older builds (c392e50,
// 2025-02) none, and then the cache's part is usage.prompt_tokens −
// timings.prompt_n (the tokens the slot evaluated). A prompt_n that cannot
// be such a count gives no cached figure.
func TestLlamaCppCachedPromptTokens(t *testing.T) {
	final := func(usage, promptN string) string {
		return `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk","usage":` + usage +
			`,"timings":{"prompt_n":` + promptN + `,"prompt_ms":12.5,"prompt_per_token_ms":3.1,"predicted_n":1,"predicted_ms":5,"predicted_per_token_ms":5}}`
	}
	old := `{"completion_tokens":1,"prompt_tokens":20,"total_tokens":21}`
	current := `{"completion_tokens":1,"prompt_tokens":20,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":10}}`
	for _, c := range []struct {
		name, usage, promptN string
		cached               int
		has                  bool
	}{
		{"older build", old, "4", 16, true},
		{"nothing cached", old, "20", 0, true},
		{"current build", current, "4", 10, true},
		{"prompt_n above the prompt", old, "25", 0, false},
		{"fractional prompt_n", old, "2.5", 0, false},
		{"prompt_n null", old, "null", 0, false},
		{"negative prompt_n", old, "-1", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(ev(chatDelta("a")), ev(final(c.usage, c.promptN)), ev("[DONE]")))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if r.HasCachedInputTokens != c.has || r.CachedInputTokens != c.cached {
				t.Errorf("cached %d (%v), want %d (%v)", r.CachedInputTokens, r.HasCachedInputTokens, c.cached, c.has)
			}
		})
	}
	body := `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"hi"}}],"object":"chat.completion","usage":` + old +
		`,"timings":{"prompt_n":5,"prompt_ms":1,"prompt_per_token_ms":0.2,"predicted_n":1,"predicted_ms":1,"predicted_per_token_ms":1}}`
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 6}, 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if !r.HasCachedInputTokens || r.CachedInputTokens != 15 {
		t.Errorf("non-streamed: cached %d (%v), want 15", r.CachedInputTokens, r.HasCachedInputTokens)
	}
}
