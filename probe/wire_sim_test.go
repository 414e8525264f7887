package probe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func probeSim(t *testing.T, protocol, url, model string, headers map[string]string, req probe.Request) *probe.Result {
	t.Helper()
	d, err := probe.NewDriver(protocol, probe.TargetOptions{Name: "sim", URL: url, Model: model, Headers: headers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.Probe(ctx, &req)
}

// TestLlamaCppLayoutAgainstSimulator: llama.cpp ends a stream with a
// chunk of its own, delta {}, carrying finish_reason, usage and timings.
// That chunk is no token: the probe's chunks, TTFT and token counts are
// the ground truth's content chunks, whatever model name was asked for.
func TestLlamaCppLayoutAgainstSimulator(t *testing.T) {
	sim, _ := fastSim(t, func(c *simulator.Config) {
		c.OpenAIServer = simulator.OpenAIServerLlamaCpp
		c.Output.RoleChunk = simulator.RoleChunkOff
		c.PrefixCache.Enabled = true
	})
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		for i := range 3 {
			res := probeSim(t, protocol, sim.URL, "any-model", nil, probe.Request{Prompt: strings.Repeat("shared prefix words ", 12), MaxTokens: 5 + i, Stream: true, IgnoreEOS: true})
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("%s: %s %v", protocol, res.Outcome, res.Err)
			}
			rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
			content := 0
			var last int64
			for _, c := range rec.Chunks {
				if c.Content {
					content++
					last = c.UnixNano
				}
			}
			if len(res.Chunks) != content || res.OutputTokens != rec.OutputTokens || res.OutputTokens != 5+i ||
				res.OutputTokensSource != probe.TokenSourceServer || res.FinishReason != "length" {
				t.Errorf("%s: %d chunks, %d tokens (%s), finish %q; ground truth %d content chunks, %d tokens",
					protocol, len(res.Chunks), res.OutputTokens, res.OutputTokensSource, res.FinishReason, content, rec.OutputTokens)
			}
			// TTFT is the first content chunk's, and the last chunk the
			// probe counts is the last content chunk, not the final one.
			serverTTFT := time.Duration(rec.FirstTokenWriteUnixNano - res.Start.UnixNano())
			if res.TTFT <= 0 || res.TTFT < serverTTFT {
				t.Errorf("%s: TTFT %v before the server wrote the first token (%v)", protocol, res.TTFT, serverTTFT)
			}
			if lastAt := res.Chunks[len(res.Chunks)-1].At; res.Start.Add(lastAt).UnixNano() < last-int64(time.Second) || lastAt > res.EndToEnd {
				t.Errorf("%s: last chunk at %v, end %v", protocol, lastAt, res.EndToEnd)
			}
			if !res.HasCachedInputTokens || res.CachedInputTokens != rec.CachedPromptTokens {
				t.Errorf("%s: cached %d (%v), ground truth %d", protocol, res.CachedInputTokens, res.HasCachedInputTokens, rec.CachedPromptTokens)
			}
		}
	}
}

// TestTGIAndOllamaOpenAIRoutesAgainstSimulator: TGI's in-stream errors
// on its OpenAI routes get the outcome of the same error on /generate_stream
// (overloaded 429, validation 422, incomplete 500), and Ollama's /v1
// stream that ends without [DONE] after a swallowed error is incomplete.
func TestTGIAndOllamaOpenAIRoutesAgainstSimulator(t *testing.T) {
	tgi, _ := fastSim(t, func(c *simulator.Config) { c.OpenAIServer = simulator.OpenAIServerTGI })
	ollama, _ := fastSim(t, func(c *simulator.Config) { c.OpenAIServer = simulator.OpenAIServerOllama })
	for _, c := range []struct {
		name, url, fault string
		want             probe.Outcome
		errContains      string
		chunks           int
	}{
		{"TGI overloaded", tgi.URL, "queue_full", probe.OutcomeHTTP4xx, "(code 429, type overloaded): Model is overloaded", 0},
		{"TGI validation", tgi.URL, "error_event:after=2,status=400", probe.OutcomeHTTP4xx, "(code 422, type validation)", 2},
		{"TGI incomplete", tgi.URL, "error_event:after=2,status=500", probe.OutcomeHTTP5xx, "(code 500, type incomplete_generation_stream)", 2},
		{"Ollama swallowed error", ollama.URL, "error_event:after=2", probe.OutcomeIncomplete, "stream ended without [DONE] after 2 output chunks", 2},
	} {
		for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
			res := probeSim(t, protocol, c.url, "sim-llm", map[string]string{simulator.HeaderFault: c.fault},
				probe.Request{Prompt: "x", MaxTokens: 6, Stream: true, IgnoreEOS: true})
			if res.Outcome != c.want || res.Err == nil || !strings.Contains(res.Err.Error(), c.errContains) || len(res.Chunks) != c.chunks {
				t.Errorf("%s %s: %s (%v) after %d chunks, want %s %q after %d", c.name, protocol, res.Outcome, res.Err, len(res.Chunks), c.want, c.errContains, c.chunks)
			}
		}
	}
	// A whole TGI completions stream, finish_reason "" on all but the last.
	res := probeSim(t, probe.ProtocolOpenAICompletions, tgi.URL, "any-model", nil, probe.Request{Prompt: "x", MaxTokens: 4, Stream: true, IgnoreEOS: true})
	if res.Outcome != probe.OutcomeSuccess || len(res.Chunks) != 4 || res.FinishReason != "length" {
		t.Errorf("TGI completions: %s %v, %d chunks, finish %q", res.Outcome, res.Err, len(res.Chunks), res.FinishReason)
	}
}

// TestOllamaToolCallsAgainstSimulator: a native /api/chat answer that is a
// tool call has its output in message.tool_calls: the probe counts that
// line as its output chunk, with the TTFT it arrived at, and takes the
// token count from eval_count (the ground truth's).
func TestOllamaToolCallsAgainstSimulator(t *testing.T) {
	sim, _ := fastSim(t, nil)
	d, err := probe.NewDriver(probe.ProtocolOllama, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: "sim-llm"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := d.Probe(ctx, &probe.Request{Prompt: "weather in Paris?", MaxTokens: 6, Stream: true, Extra: map[string]any{"tools": tools}})
	if res.Outcome != probe.OutcomeSuccess {
		t.Fatalf("%s %v", res.Outcome, res.Err)
	}
	rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
	serverTTFT := time.Duration(rec.FirstTokenWriteUnixNano - res.Start.UnixNano())
	if len(res.Chunks) != 1 || res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != probe.TokenSourceServer ||
		res.TTFT <= 0 || res.TTFT < serverTTFT {
		t.Errorf("%d chunks, %d tokens (%s), TTFT %v; ground truth %d tokens, first token written at %v",
			len(res.Chunks), res.OutputTokens, res.OutputTokensSource, res.TTFT, rec.OutputTokens, serverTTFT)
	}
}
