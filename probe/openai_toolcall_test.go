package probe

import (
	"strings"
	"testing"
	"time"
)

// vLLM's streamed tool call (hermes-style parser): the role chunk, the
// call's id/type/name, the arguments in fragments, a finish chunk with
// finish_reason "tool_calls", the usage chunk, [DONE].
const vllmChunkHead = `{"id":"chatcmpl-7d1e","object":"chat.completion.chunk","created":1735000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":`

func vllmDelta(delta string) string {
	return vllmChunkHead + delta + `,"logprobs":null,"finish_reason":null}]}`
}

func vllmToolName(name string) string {
	return vllmDelta(`{"tool_calls":[{"id":"chatcmpl-tool-5b0c4e","type":"function","index":0,"function":{"name":` + quote(name) + `}}]}`)
}

func vllmToolArgs(index int, args string) string {
	return vllmDelta(`{"tool_calls":[{"index":` + itoa(index) + `,"function":{"arguments":` + quote(args) + `}}]}`)
}

func vllmFinish(reason string) string {
	return vllmChunkHead + `{"content":""},"logprobs":null,"finish_reason":"` + reason + `","stop_reason":null}]}`
}

func vllmRole() string { return vllmDelta(`{"role":"assistant","content":""}`) }

func TestToolCallStreamVLLM(t *testing.T) {
	for _, withUsage := range []bool{true, false} {
		name := "usage"
		if !withUsage {
			name = "counted"
		}
		t.Run(name, func(t *testing.T) {
			steps := []step{
				ev(vllmRole()),
				evAfter(150*time.Millisecond, vllmToolName("get_weather")),
				evAfter(100*time.Millisecond, vllmToolArgs(0, `{"city": "`)),
				evAfter(10*time.Millisecond, vllmToolArgs(0, "")), // carries nothing
				evAfter(10*time.Millisecond, vllmToolArgs(0, "Paris")),
				evAfter(10*time.Millisecond, vllmToolArgs(0, `"}`)),
				ev(vllmFinish("tool_calls")),
			}
			if withUsage {
				steps = append(steps, ev(`{"id":"chatcmpl-7d1e","object":"chat.completion.chunk","created":1735000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{"prompt_tokens":181,"total_tokens":199,"completion_tokens":18}}`))
			}
			steps = append(steps, ev("[DONE]"))
			ts := startServer(t, sseHandler(steps...))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if len(r.Chunks) != 4 {
				t.Fatalf("chunks = %+v, want 4 (name + 3 non-empty argument fragments)", r.Chunks)
			}
			// TTFT is the name fragment's arrival. Only lower bounds are
			// certain (the server cannot send a fragment before its pauses
			// are over; a busy machine may read any of them late): the
			// name at 150 ms, the arguments at 250, 270 and 280 ms, the
			// empty fragment at 260 ms being no chunk.
			if r.TTFT != r.Chunks[0].At {
				t.Errorf("TTFT %v, first chunk at %v", r.TTFT, r.Chunks[0].At)
			}
			for i, earliest := range []time.Duration{150, 250, 270, 280} {
				if r.Chunks[i].At < earliest*time.Millisecond {
					t.Errorf("chunk %d at %v, before the server sent it (%d ms): chunks %+v", i, r.Chunks[i].At, earliest, r.Chunks)
				}
			}
			if r.FinishReason != "tool_calls" {
				t.Errorf("finish reason %q", r.FinishReason)
			}
			wantOut, wantSrc := 18, TokenSourceServer
			if !withUsage {
				wantOut, wantSrc = 4, TokenSourceCounted
			}
			if r.OutputTokens != wantOut || r.OutputTokensSource != wantSrc {
				t.Errorf("output tokens %d (%s), want %d (%s)", r.OutputTokens, r.OutputTokensSource, wantOut, wantSrc)
			}
			if tpot, ok := r.TPOT(); !ok || tpot <= 0 {
				t.Errorf("TPOT = %v, %v", tpot, ok)
			}
		})
	}
}

// Content first, then a tool call (OpenAI's "Let me check that." then the
// call; also reasoning models): one chunk sequence, TTFT at the content.
func TestToolCallStreamMixedWithContent(t *testing.T) {
	ts := startServer(t, sseHandler(
		ev(vllmRole()),
		evAfter(100*time.Millisecond, vllmDelta(`{"reasoning_content":"The user wants weather."}`)),
		evAfter(10*time.Millisecond, vllmDelta(`{"content":"Let me check."}`)),
		evAfter(10*time.Millisecond, vllmToolName("get_weather")),
		evAfter(10*time.Millisecond, vllmToolArgs(0, `{"city":"Paris"}`)),
		// A second, parallel call.
		evAfter(10*time.Millisecond, vllmDelta(`{"tool_calls":[{"id":"chatcmpl-tool-2","type":"function","index":1,"function":{"name":"get_time","arguments":""}}]}`)),
		evAfter(10*time.Millisecond, vllmToolArgs(1, `{"tz":"CET"}`)),
		ev(vllmFinish("tool_calls")),
		ev("[DONE]"),
	))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 6 || r.TTFT < 100*time.Millisecond || r.TTFT != r.Chunks[0].At {
		t.Fatalf("TTFT %v chunks %+v, want 6 chunks from the reasoning one", r.TTFT, r.Chunks)
	}
	// The last fragment leaves the server 150 ms in (a lower bound: it
	// may be read late, never early).
	if r.Chunks[5].At < 150*time.Millisecond {
		t.Errorf("chunks %+v: the last tool-call fragment was read before it was sent", r.Chunks)
	}
	if r.OutputTokens != 6 || r.OutputTokensSource != TokenSourceCounted || r.FinishReason != "tool_calls" {
		t.Errorf("output tokens %d (%s) finish %q", r.OutputTokens, r.OutputTokensSource, r.FinishReason)
	}
}

// Chunks that mention a tool call but carry no fragment of it do not
// count: the role chunk, a call's id and type alone, empty arguments,
// null and empty tool_calls.
func TestToolCallEmptyFragmentsDoNotCount(t *testing.T) {
	ts := startServer(t, sseHandler(
		ev(vllmRole()),
		ev(vllmDelta(`{"role":"assistant","content":null,"tool_calls":null}`)),
		ev(vllmDelta(`{"tool_calls":[]}`)),
		ev(vllmDelta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function"}]}`)),
		ev(vllmDelta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"","arguments":""}}]}`)),
		ev(vllmDelta(`{"tool_calls":[{"index":0,"function":{"arguments":null}}],"function_call":null}`)),
		evAfter(150*time.Millisecond, vllmToolArgs(0, "{}")),
		ev(vllmFinish("tool_calls")),
		ev("[DONE]"),
	))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 1 || r.TTFT < 150*time.Millisecond {
		t.Errorf("TTFT %v chunks %+v: only the arguments fragment carries output", r.TTFT, r.Chunks)
	}
}

// The legacy functions API streams delta.function_call; TGI before 3.2
// sent tool_calls as one object. Both count.
func TestToolCallLegacyShapes(t *testing.T) {
	for name, steps := range map[string][]step{
		"function_call": {
			ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":""}},"finish_reason":null}]}`),
			ev(`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\n"}},"finish_reason":null}]}`),
			ev(`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"}"}},"finish_reason":null}]}`),
			ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}`),
			ev("[DONE]"),
		},
		"TGI tool_calls object": {
			ev(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":null,"arguments":"{\""}}},"logprobs":null,"finish_reason":null}],"usage":null}`),
			ev(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":null,"arguments":"function"}}},"logprobs":null,"finish_reason":null}],"usage":null}`),
			ev(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":null,"arguments":"\"}"}}},"logprobs":null,"finish_reason":"eos_token"}],"usage":null}`),
			ev("[DONE]"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, sseHandler(steps...))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			if len(r.Chunks) != 3 || r.OutputTokens != 3 || r.TTFT != r.Chunks[0].At {
				t.Errorf("TTFT %v chunks %+v out %d", r.TTFT, r.Chunks, r.OutputTokens)
			}
		})
	}
}

// With continuous usage stats a tool-call chunk gets its token count from
// the cumulative completion_tokens, like a content chunk.
func TestToolCallContinuousUsage(t *testing.T) {
	ts := startServer(t, sseHandler(
		ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":9,"completion_tokens":0}}`),
		ev(`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"t","type":"function","index":0,"function":{"name":"get_weather"}}]}}],"usage":{"prompt_tokens":9,"completion_tokens":6}}`),
		ev(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]}}],"usage":{"prompt_tokens":9,"completion_tokens":13}}`),
		ev(`{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":14}}`),
		ev(usageChunk(9, 14)),
		ev("[DONE]"),
	))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if len(r.Chunks) != 2 || r.Chunks[0].Tokens != 6 || r.Chunks[1].Tokens != 7 || r.OutputTokens != 14 {
		t.Errorf("chunks %+v out %d", r.Chunks, r.OutputTokens)
	}
}

// What each tool-call seed decodes to, on whichever path decode takes.
func TestToolCallSeedsOutput(t *testing.T) {
	want := map[string]bool{}
	noOutput := map[int]bool{2: true, 9: true, 10: true, 11: true, 12: true, 13: true}
	for i, s := range toolCallSeeds {
		want[s] = !noOutput[i]
	}
	// A null element is no call; an odd one spoils the whole value; a
	// case variant is the same key, and a later duplicate wins.
	output := map[int]bool{0: true, 6: true, 7: true, 8: true, 9: true, 11: true}
	for i, s := range toolCallCorners {
		want[s] = output[i]
	}
	for s, w := range want {
		var c oaiChunk
		if err := c.decode([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if c.hasOutput() != w {
			t.Errorf("%s: output %v, want %v", s, c.hasOutput(), w)
		}
	}
}

// Hostile tool_calls: a line-sized array of calls is read in time linear
// in its bytes, on the fast path without allocating per call and on the
// slow path with two bools per call; nesting stops at the depth guard.
func TestToolCallHostile(t *testing.T) {
	const mib = 1 << 20
	arr := func(elem string) string {
		n := (DefaultMaxLineBytes - 400) / (len(elem) + 1)
		return vllmDelta(`{"tool_calls":[` + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`)
	}
	tests := []struct {
		name       string
		chunk      string
		want       Outcome
		contains   string
		wantChunks int
		maxAlloc   uint64
	}{
		{"1 MiB of empty calls (fast path)", arr(`{"index":0,"function":{"arguments":""}}`), OutcomeSuccess, "", 0, 4 * mib},
		{"1 MiB of calls, the last one carrying", vllmDelta(`{"tool_calls":[` + strings.Repeat(`{},`, (DefaultMaxLineBytes-400)/3) + `{"function":{"name":"f"}}]}`), OutcomeSuccess, "", 1, 4 * mib},
		{"1 MiB of null calls (slow path)", arr(`null`), OutcomeSuccess, "", 0, 8 * mib},
		{"1 MiB of numbers (slow path)", arr(`1`), OutcomeSuccess, "", 0, 8 * mib},
		{"1 MiB of odd functions (slow path)", arr(`{"function":1}`), OutcomeSuccess, "", 0, 16 * mib},
		{"1 MiB of calls with a case variant (slow path)", arr(`{"Function":{"name":""}}`), OutcomeSuccess, "", 0, 16 * mib},
		{"nested arguments", vllmDelta(`{"tool_calls":[{"function":{"arguments":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}]}`),
			OutcomeProtocolError, "nested deeper than 64", 0, 4 * mib},
		{"nested calls", vllmDelta(`{"tool_calls":` + strings.Repeat(`[{"function":`, 40) + `null` + strings.Repeat("}]", 40) + `}`),
			OutcomeProtocolError, "nested deeper than 64", 0, 4 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.chunk) > DefaultMaxLineBytes {
				t.Fatalf("test chunk of %d bytes is over the line limit", len(tt.chunk))
			}
			ts := startServer(t, sseHandler(ev(vllmRole()), ev(tt.chunk), ev(vllmFinish("tool_calls")), ev("[DONE]")))
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
			var r *Result
			start := time.Now()
			alloc := allocatedDuring(func() { r = probeOnce(t, d, streamReq(), 30*time.Second) })
			t.Logf("%.1f MiB allocated, %v", float64(alloc)/mib, time.Since(start))
			wantOutcome(t, r, tt.want, tt.contains)
			if len(r.Chunks) != tt.wantChunks {
				t.Errorf("chunks %+v, want %d", r.Chunks, tt.wantChunks)
			}
			if alloc > tt.maxAlloc {
				t.Errorf("allocated %.1f MiB, want ≤ %d MiB", float64(alloc)/mib, tt.maxAlloc/mib)
			}
		})
	}
}
