package probe

import (
	"strings"
	"testing"
	"time"
)

// TestTGIOpenAIRouteErrors: TGI's OpenAI routes send every InferError in a
// stream as {"error":{"message":e.to_string(),"http_status_code":422}}
// then [DONE] (router/src/infer/mod.rs into_openai_event, server.rs:890,
// 1241 @db931fc). The bytes are TGI's (axum's `data:` without a space).
// The message says which error it was; it gets the outcome of the same
// error on TGI's native routes.
func TestTGIOpenAIRouteErrors(t *testing.T) {
	tgiEv := func(s string) step { return raw("data:" + s + "\n\n") }
	tests := []struct {
		name, msg string
		want      Outcome
		contains  string
	}{
		{"overloaded", "Model is overloaded", OutcomeHTTP4xx, "(code 429, type overloaded): Model is overloaded"},
		{"validation", "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`",
			OutcomeHTTP4xx, "(code 422, type validation): Input validation error"},
		{"generation", "Request failed during generation: Server error: CUDA out of memory", OutcomeHTTP4xx, "(code 424, type generation)"},
		{"incomplete", "Incomplete generation stream", OutcomeHTTP5xx, "(code 500, type incomplete_generation_stream)"},
		{"template", "Template error: syntax error", OutcomeHTTP4xx, "(code 422, type template_error)"},
		{"unknown message keeps the status", "something new", OutcomeHTTP4xx, "(code 422): something new"},
	}
	for _, tt := range tests {
		for _, proto := range []string{ProtocolOpenAIChat, ProtocolOpenAICompletions} {
			t.Run(tt.name+"/"+proto, func(t *testing.T) {
				h := sseHandler(tgiEv(chatDelta("a")),
					tgiEv(`{"error":{"message":`+quote(tt.msg)+`,"http_status_code":422}}`), tgiEv("[DONE]"))
				if proto == ProtocolOpenAICompletions {
					h = sseHandler(tgiEv(`{"id":"","object":"text_completion","created":1,"choices":[{"finish_reason":"","index":0,"logprobs":null,"text":"a"}],"model":"m","system_fingerprint":"3.3.7-native"}`),
						tgiEv(`{"error":{"message":`+quote(tt.msg)+`,"http_status_code":422}}`), tgiEv("[DONE]"))
				}
				ts := startServer(t, h)
				d, _ := newDriver(t, proto, ts.URL, nil)
				r := probeOnce(t, d, streamReq(), 10*time.Second)
				wantOutcome(t, r, tt.want, "mid-stream server error "+tt.contains)
				if len(r.Chunks) != 1 {
					t.Errorf("chunks = %d, want 1", len(r.Chunks))
				}
			})
		}
	}
}

// TestTGICompletionsEmptyFinishReason: TGI's /v1/completions puts
// finish_reason "" on every chunk but the last (server.rs
// CompletionComplete{finish_reason: String::new()}); "" is no finish.
func TestTGICompletionsEmptyFinishReason(t *testing.T) {
	chunk := func(text, fr string) step {
		return raw(`data:{"id":"","object":"text_completion","created":1,"choices":[{"finish_reason":` + quote(fr) + `,"index":0,"logprobs":null,"text":` + quote(text) + `}],"model":"m","system_fingerprint":"3.3.7-native"}` + "\n\n")
	}
	for _, tt := range []struct {
		name  string
		steps []step
		want  Outcome
		fr    string
	}{
		{"finished", []step{chunk("a", ""), chunk("b", ""), chunk("c", "length"), raw("data:[DONE]\n\n")}, OutcomeSuccess, "length"},
		{"cut before the last", []step{chunk("a", ""), chunk("b", "")}, OutcomeIncomplete, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(tt.steps...))
			d, _ := newDriver(t, ProtocolOpenAICompletions, ts.URL, nil)
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			wantOutcome(t, r, tt.want, "")
			if r.FinishReason != tt.fr {
				t.Errorf("FinishReason = %q, want %q", r.FinishReason, tt.fr)
			}
			if tt.want == OutcomeIncomplete && r.Err != nil && strings.Contains(r.Err.Error(), "finish_reason") {
				t.Errorf("error %q names a finish reason; none arrived", r.Err)
			}
		})
	}
}

// TestSGLangQueueFullStreamError: SGLang with --max-queued-requests
// answers a stream it cannot queue with 200, an error object with code
// 503, then [DONE] (model-servers.md §8): a 5xx, not a protocol error.
func TestSGLangQueueFullStreamError(t *testing.T) {
	ts := startServer(t, sseHandler(
		ev(`{"error":{"object":"error","message":"The request queue is full.","type":"Service Unavailable","param":null,"code":503}}`),
		ev("[DONE]")))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeHTTP5xx, "(code 503, type Service Unavailable): The request queue is full.")
}

// TestRepetitionFinishIsSuccess: vLLM's repetition detector ends a choice
// with finish_reason "repetition" (vllm/v1 finished_reason values). The
// answer is complete and well-formed, so the outcome stays success (its
// latency is real); the reason is kept for llm_probe_finish_reasons_total.
func TestRepetitionFinishIsSuccess(t *testing.T) {
	ts := startServer(t, sseHandler(ev(chatDelta("a")), ev(chatDelta("a")), ev(chatFinish("repetition")), ev("[DONE]")))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	r := probeOnce(t, d, streamReq(), 10*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.FinishReason != "repetition" || len(r.Chunks) != 2 {
		t.Errorf("finish %q, %d chunks", r.FinishReason, len(r.Chunks))
	}
}
