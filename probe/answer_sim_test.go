package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func fastSim(t *testing.T, mod func(*simulator.Config)) (*simtest.Sim, simulator.Config) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase, cfg.Latency.PrefillPerToken = 2*time.Millisecond, 500*time.Microsecond, 0
	cfg.Latency.Jitter = 0
	if mod != nil {
		mod(&cfg)
	}
	return simtest.Start(t, cfg), cfg
}

func mustAssert(t *testing.T, name, kind, expected string) probe.Assertion {
	t.Helper()
	a, err := probe.NewAssertion(name, kind, expected)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAnswerCaptureAgainstSimulator: the answer text a probe keeps is the
// text the server sent (ground truth), streamed or not, chat or
// completions, and assertions judge it: the right answer passes, another
// fails as wrong_answer naming the assertion.
func TestAnswerCaptureAgainstSimulator(t *testing.T) {
	sim, cfg := fastSim(t, nil)
	const answer = `{"capital": "Paris", "country": "France"}`
	schema := `{"type":"object","required":["capital"],"properties":{"capital":{"const":"Paris"}}}`
	right := probe.Assertions{
		mustAssert(t, "contains", probe.AssertContains, "Paris"),
		mustAssert(t, "regex", probe.AssertRegex, `(?i)"capital":\s*"paris"`),
		mustAssert(t, "equals", probe.AssertEquals, answer),
		mustAssert(t, "schema", probe.AssertJSONSchema, schema),
	}
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		for _, stream := range []bool{true, false} {
			for _, sent := range []string{answer, `{"capital": "Lyon"}`} {
				d, err := probe.NewDriver(protocol, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
					Headers: map[string]string{simulator.HeaderAnswer: sent}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res := d.Probe(ctx, &probe.Request{Prompt: "Capital of France as JSON?", MaxTokens: 64, Stream: stream, CaptureAnswer: true})
				cancel()
				d.Close()
				name := protocol + map[bool]string{true: "/stream", false: "/unary"}[stream] + " " + sent
				if res.Outcome != probe.OutcomeSuccess {
					t.Fatalf("%s: outcome %s: %v", name, res.Outcome, res.Err)
				}
				rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
				if res.Answer != rec.Text || strings.TrimSpace(res.Answer) != sent {
					t.Errorf("%s: answer %q, server sent %q", name, res.Answer, rec.Text)
				}
				right.Check(res)
				wrong := sent != answer
				if got := res.Outcome == probe.OutcomeWrongAnswer; got != wrong {
					t.Errorf("%s: outcome %s (%v), want wrong answer %t", name, res.Outcome, res.Err, wrong)
				}
				if wrong && (len(res.AssertionFailures) != 4 || !strings.Contains(res.Err.Error(), "assertion contains (contains) failed") ||
					!strings.Contains(res.Err.Error(), "and 3 more")) {
					t.Errorf("%s: failures %+v, err %v", name, res.AssertionFailures, res.Err)
				}
			}
		}
	}
}

// TestAnswerNotKeptWithoutAssertions: without CaptureAnswer nothing of the
// text is kept.
func TestAnswerNotKeptWithoutAssertions(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) { c.Output.Answer = "Paris" })
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := d.Probe(context.Background(), &probe.Request{Prompt: "Capital?", MaxTokens: 8, Stream: true})
	if res.Outcome != probe.OutcomeSuccess || res.Answer != "" || res.OutputTokens != 1 || res.FinishReason != "stop" {
		t.Fatalf("outcome %s, answer %q, %d tokens, finish %q", res.Outcome, res.Answer, res.OutputTokens, res.FinishReason)
	}
}

// TestReasoningAgainstSimulator: first reasoning token, first answer token
// and second token match the server's chunk times, and the reasoning
// token count its usage.
func TestReasoningAgainstSimulator(t *testing.T) {
	sim, cfg := fastSim(t, nil)
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
		Headers: map[string]string{simulator.HeaderOptions: "reasoning_tokens=6;role_chunk=immediate"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := d.Probe(context.Background(), &probe.Request{Prompt: "Think first.", MaxTokens: 16, IgnoreEOS: true, Stream: true})
	if res.Outcome != probe.OutcomeSuccess {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
	var firstReasoning, firstContent, second int64
	tokens := 0
	for _, c := range rec.Chunks {
		if c.Kind == "reasoning" && firstReasoning == 0 {
			firstReasoning = c.UnixNano
		}
		if c.Kind == "content" && firstContent == 0 {
			firstContent = c.UnixNano
		}
		if c.Content {
			tokens += c.Tokens
			if tokens >= 2 && second == 0 {
				second = c.UnixNano
			}
		}
	}
	r := res.Reasoning
	if !r.Seen || !r.HasTokens || r.Tokens != rec.ReasoningTokens || rec.ReasoningTokens != 6 {
		t.Fatalf("reasoning %+v, server sent %d reasoning tokens", r, rec.ReasoningTokens)
	}
	if r.FirstReasoning != res.TTFT || r.FirstAnswer <= r.FirstReasoning {
		t.Errorf("first reasoning %v, first answer %v, TTFT %v", r.FirstReasoning, r.FirstAnswer, res.TTFT)
	}
	// Which chunk each time belongs to is exact: the first answer token
	// is the chunk after the server's reasoning chunks, the second token
	// the second chunk. When is checked by causality only (a loaded
	// machine reads late, never early): the client cannot read a chunk
	// before the server began writing it (1 ms for the server taking its
	// time after the write returned).
	reasoningChunks := 0
	for _, c := range rec.Chunks {
		if c.Kind == "reasoning" {
			reasoningChunks++
		}
	}
	idx := -1
	for i, c := range res.Chunks {
		if c.At == r.FirstAnswer {
			idx = i
			break
		}
	}
	if idx != reasoningChunks {
		t.Errorf("first answer token is chunk %d, the server sent %d reasoning chunks before it", idx, reasoningChunks)
	}
	abs := func(d time.Duration) int64 { return res.Start.Add(d).UnixNano() }
	if abs(r.FirstReasoning) < rec.FirstTokenWriteUnixNano || abs(r.FirstAnswer) < firstContent-int64(time.Millisecond) {
		t.Errorf("read before written: reasoning %d vs %d, answer %d vs %d", abs(r.FirstReasoning), rec.FirstTokenWriteUnixNano, abs(r.FirstAnswer), firstContent)
	}
	if firstReasoning != rec.FirstTokenUnixNano {
		t.Errorf("the server's first output chunk (%d) was not its first reasoning chunk (%d)", rec.FirstTokenUnixNano, firstReasoning)
	}
	ttst, ok := res.SecondToken()
	if !ok || ttst != res.Chunks[1].At || abs(ttst) < second-int64(time.Millisecond) {
		t.Errorf("second token at %v (chunk 1 at %v); server wrote it at %d, read at %d", ttst, res.Chunks[1].At, second, abs(ttst))
	}
}

// TestRateLimitHeadersAgainstSimulator: the headroom read from the
// headers is what the server said (ground truth), and an enforced limit
// ends in 429 with Retry-After.
func TestRateLimitHeadersAgainstSimulator(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) {
		c.RateLimit = simulator.RateLimitConfig{RequestsPerMinute: 3, TokensPerMinute: 10000, Enforce: true}
	})
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 4 {
		res := d.Probe(context.Background(), &probe.Request{Prompt: "Hello.", MaxTokens: 4, Stream: true})
		rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
		rl := res.RateLimit
		if rl == nil || rec.RateLimit == nil {
			t.Fatalf("request %d: rate limit %+v, server %+v", i, rl, rec.RateLimit)
		}
		if !rl.Requests.HasLimit || rl.Requests.Limit != 3 || !rl.Requests.HasRemaining || int(rl.Requests.Remaining) != rec.RateLimit.RemainingRequests ||
			int(rl.Tokens.Remaining) != rec.RateLimit.RemainingTokens || !rl.Requests.HasReset || rl.Requests.Reset > time.Minute || len(rl.Malformed) != 0 {
			t.Errorf("request %d: %+v, server said %+v", i, rl, rec.RateLimit)
		}
		if limited := i == 3; limited != (res.StatusCode == http.StatusTooManyRequests) || limited != rl.HasRetryAfter ||
			(limited && res.Outcome != probe.OutcomeHTTP4xx) {
			t.Errorf("request %d: status %d, retry-after %t %v", i, res.StatusCode, rl.HasRetryAfter, rl.RetryAfter)
		}
	}
}

// TestNativeAnswersAgainstSimulator: TGI's generated_text and Ollama's
// content are kept like OpenAI's, and Ollama's thinking counts as
// reasoning.
func TestNativeAnswersAgainstSimulator(t *testing.T) {
	sim, cfg := fastSim(t, nil)
	const answer = "The capital of France is Paris."
	for _, protocol := range []string{probe.ProtocolTGI, probe.ProtocolOllama} {
		for _, stream := range []bool{true, false} {
			d, err := probe.NewDriver(protocol, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
				Headers: map[string]string{simulator.HeaderAnswer: answer, simulator.HeaderOptions: "reasoning_tokens=2"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res := d.Probe(context.Background(), &probe.Request{Prompt: "Capital of France?", MaxTokens: 32, Stream: stream, CaptureAnswer: true})
			d.Close()
			name := fmt.Sprintf("%s stream=%t", protocol, stream)
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("%s: outcome %s: %v", name, res.Outcome, res.Err)
			}
			rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
			if strings.TrimSpace(res.Answer) != answer || strings.TrimSpace(rec.Text) != answer {
				t.Errorf("%s: answer %q, server sent %q", name, res.Answer, rec.Text)
			}
			thinks := protocol == probe.ProtocolOllama
			if res.Reasoning.Seen != thinks || (thinks && stream && (res.Reasoning.FirstReasoning != res.TTFT || res.Reasoning.FirstAnswer <= res.TTFT)) {
				t.Errorf("%s: reasoning %+v, TTFT %v", name, res.Reasoning, res.TTFT)
			}
		}
	}
}
