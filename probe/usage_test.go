package probe

import (
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// A server's token counts are checked against what arrived (usage.go):
// one absurd count must not reach a counter, where it would freeze it.
func TestHostileUsageCounts(t *testing.T) {
	huge := math.MaxInt64
	chat := func(steps ...step) http.Handler { return sseHandler(steps...) }
	body := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, s)
		})
	}
	ndjson := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, s)
		})
	}
	for _, tc := range []struct {
		name      string
		protocol  string
		h         http.Handler
		req       *Request
		out, in   int
		outSource TokenSource
		invalid   []string
	}{
		{
			name: "2^63-1 after two chunks", protocol: ProtocolOpenAIChat,
			h:   chat(ev(chatDelta("a")), ev(chatDelta("b")), ev(chatFinish("stop")), ev(usageChunk(huge, huge)), ev("[DONE]")),
			req: streamReq(), out: 2, outSource: TokenSourceCounted,
			invalid: []string{UsageInputTokens, UsageOutputTokens},
		},
		{
			name: "more than max_tokens allows", protocol: ProtocolOpenAIChat,
			h:   chat(ev(chatDelta("a")), ev(chatDelta("b")), ev(usageChunk(5, 1000)), ev("[DONE]")),
			req: streamReq(), out: 2, in: 5, outSource: TokenSourceCounted,
			invalid: []string{UsageOutputTokens},
		},
		{
			name: "plausible count kept", protocol: ProtocolOpenAIChat,
			h:   chat(ev(chatDelta("a")), ev(chatDelta("b")), ev(usageChunk(5, 8)), ev("[DONE]")),
			req: streamReq(), out: 8, in: 5, outSource: TokenSourceServer,
		},
		{
			name: "cached over prompt", protocol: ProtocolOpenAIChat,
			h: chat(ev(chatDelta("a")),
				ev(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":9000000000000}}}`),
				ev("[DONE]")),
			req: streamReq(), out: 1, in: 5, outSource: TokenSourceServer,
			invalid: []string{UsageCachedInputTokens},
		},
		{
			name: "reasoning over the output bound", protocol: ProtocolOpenAIChat,
			h: chat(ev(chatDelta("a")),
				ev(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":9000000000000}}}`),
				ev("[DONE]")),
			req: streamReq(), out: 1, in: 5, outSource: TokenSourceServer,
			invalid: []string{UsageReasoningTokens},
		},
		{
			name: "non-streamed 2^63-1", protocol: ProtocolOpenAIChat,
			h:   body(`{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":` + strconv.Itoa(huge) + `}}`),
			req: &Request{Prompt: "hello", MaxTokens: 8}, out: 0, in: 3, outSource: TokenSourceNone,
			invalid: []string{UsageOutputTokens},
		},
		{
			name: "ollama eval_count", protocol: ProtocolOllama,
			h: ndjson(`{"message":{"content":"a"},"done":false}` + "\n" + `{"message":{"content":"b"},"done":false}` + "\n" +
				`{"done":true,"done_reason":"stop","eval_count":` + strconv.Itoa(huge) + `,"prompt_eval_count":` + strconv.Itoa(huge) + "}\n"),
			req: streamReq(), out: 2, outSource: TokenSourceCounted,
			invalid: []string{UsageInputTokens, UsageOutputTokens},
		},
		{
			name: "tgi generated_tokens", protocol: ProtocolTGI,
			h: chat(ev(`{"index":1,"token":{"id":1,"text":"a","logprob":0,"special":false},"generated_text":null,"details":null}`),
				ev(`{"index":2,"token":{"id":2,"text":"b","logprob":0,"special":false},"generated_text":"ab","details":{"finish_reason":"length","generated_tokens":`+strconv.Itoa(huge)+`,"seed":null,"input_length":3}}`)),
			req: streamReq(), out: 2, in: 3, outSource: TokenSourceCounted,
			invalid: []string{UsageOutputTokens},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.h)
			d, _ := newDriver(t, tc.protocol, ts.URL, nil)
			r := probeOnce(t, d, tc.req, 5*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if r.OutputTokens != tc.out || r.OutputTokensSource != tc.outSource || r.InputTokens != tc.in {
				t.Errorf("output %d (%q), input %d; want output %d (%q), input %d",
					r.OutputTokens, r.OutputTokensSource, r.InputTokens, tc.out, tc.outSource, tc.in)
			}
			if !slices.Equal(r.UsageInvalid, tc.invalid) {
				t.Errorf("UsageInvalid = %q, want %q", r.UsageInvalid, tc.invalid)
			}
			n := 0
			for _, c := range r.Chunks {
				n += c.Tokens
			}
			if r.OutputTokensSource == TokenSourceCounted && n != r.OutputTokens {
				t.Errorf("chunks carry %d tokens, output %d", n, r.OutputTokens)
			}
			if slices.Contains(r.UsageInvalid, UsageCachedInputTokens) && (r.HasCachedInputTokens || r.CachedInputTokens != 0) {
				t.Errorf("invalid cached count kept: %d", r.CachedInputTokens)
			}
			if slices.Contains(r.UsageInvalid, UsageReasoningTokens) && (r.Reasoning.HasTokens || r.Reasoning.Tokens != 0) {
				t.Errorf("invalid reasoning count kept: %d", r.Reasoning.Tokens)
			}
		})
	}
}

func TestOutputBound(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want int
	}{
		{Request{}, maxReportedTokens},
		{Request{MaxTokens: 8}, 32},
		{Request{MaxTokens: 8, Extra: map[string]any{"n": 3}}, 96},
		{Request{MaxTokens: 8, Extra: map[string]any{"best_of": 2.0, "n": "x"}}, 64},
		{Request{MaxTokens: 8, Extra: map[string]any{"n": 1e9}}, 8 * outputTokensSlack * maxChoices},
		{Request{MaxTokens: 1 << 30}, maxReportedTokens},
	} {
		if got := outputBound(&tc.req); got != tc.want {
			t.Errorf("outputBound(max_tokens %d, extra %v) = %d, want %d", tc.req.MaxTokens, tc.req.Extra, got, tc.want)
		}
	}
}

func TestCheckCountsRate(t *testing.T) {
	// 1000 tokens in a microsecond: 10^9 tokens/s.
	r := &Result{OutputTokens: 1000, OutputTokensSource: TokenSourceServer, EndToEnd: time.Microsecond, outputBound: 4000}
	r.checkCounts()
	if r.OutputTokens != 0 || !slices.Equal(r.UsageInvalid, []string{UsageOutputTokens}) {
		t.Errorf("output %d, invalid %q", r.OutputTokens, r.UsageInvalid)
	}
	if _, ok := r.OutputTokensPerSecond(); ok {
		t.Error("tokens/s defined without output tokens")
	}
	// The same count over a second is kept.
	r = &Result{OutputTokens: 1000, OutputTokensSource: TokenSourceServer, EndToEnd: time.Second, outputBound: 4000}
	r.checkCounts()
	if r.OutputTokens != 1000 || r.UsageInvalid != nil {
		t.Errorf("output %d, invalid %q", r.OutputTokens, r.UsageInvalid)
	}
}

// Continuous usage stats whose per-chunk steps are each allowed but whose
// total is not: the chunks count one token each.
func TestCheckCountsContinuousTotal(t *testing.T) {
	r := &Result{Streamed: true, EndToEnd: time.Second, outputBound: 32}
	for i := range 3 {
		r.Chunks = append(r.Chunks, Chunk{At: time.Duration(i) * time.Millisecond, Tokens: 1000})
	}
	r.countChunkTokens()
	r.checkCounts()
	if r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceCounted {
		t.Errorf("output %d (%s), want 3 counted", r.OutputTokens, r.OutputTokensSource)
	}
	obs := 0
	r.InterTokenLatencies(func(time.Duration) { obs++ })
	if obs != 2 {
		t.Errorf("%d ITL observations, want 2", obs)
	}
}

// FuzzCheckCounts: whatever counts a server reports, what is kept is
// bounded, and so is everything derived from it.
func FuzzCheckCounts(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(5), int64(0), uint16(2), int64(time.Second), 8, true)
	f.Add(int64(-1), int64(3), int64(-7), int64(1<<40), uint16(0), int64(0), 0, false)
	f.Add(int64(100), int64(5), int64(2), int64(1), uint16(3), int64(time.Microsecond), 1<<20, true)
	f.Fuzz(func(t *testing.T, out, in, cached, reasoning int64, chunks uint16, e2e int64, maxTokens int, streamed bool) {
		r := &Result{
			Streamed: streamed, EndToEnd: time.Duration(e2e),
			OutputTokens: int(out), OutputTokensSource: TokenSourceServer,
			InputTokens: int(in), InputTokensSource: TokenSourceServer,
			CachedInputTokens: int(cached), HasCachedInputTokens: true,
			outputBound: outputBound(&Request{MaxTokens: maxTokens}),
		}
		r.Reasoning.Tokens, r.Reasoning.HasTokens = int(reasoning), true
		for i := range int(chunks) {
			r.Chunks = append(r.Chunks, Chunk{At: time.Duration(i), Tokens: int(out) % 7})
		}
		r.checkCounts()
		for name, v := range map[string]int{"output": r.OutputTokens, "input": r.InputTokens, "cached": r.CachedInputTokens, "reasoning": r.Reasoning.Tokens} {
			if v < 0 || v > max(maxReportedTokens, len(r.Chunks)) {
				t.Fatalf("%s tokens %d kept", name, v)
			}
		}
		if tps, ok := r.OutputTokensPerSecond(); ok && (tps > maxTokensPerSecond || math.IsNaN(tps)) {
			t.Fatalf("tokens/s %g", tps)
		}
		if slices.Contains(r.UsageInvalid, UsageOutputTokens) {
			for _, c := range r.Chunks {
				if c.Tokens != 1 {
					t.Fatalf("chunk of %d tokens after an invalid output count", c.Tokens)
				}
			}
		}
		if len(r.UsageInvalid) > len(UsageFields()) {
			t.Fatalf("UsageInvalid %q", r.UsageInvalid)
		}
	})
}
