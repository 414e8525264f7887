package integration

import (
	"context"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

// nativeTarget is one driver configuration of the TGI and Ollama tests.
type nativeTarget struct {
	name, protocol, ollamaAPI string
}

var nativeTargets = []nativeTarget{
	{"tgi", probe.ProtocolTGI, ""},
	{"ollama_chat", probe.ProtocolOllama, probe.OllamaAPIChat},
	{"ollama_generate", probe.ProtocolOllama, probe.OllamaAPIGenerate},
}

func (nt nativeTarget) driver(t *testing.T, s *sim, mod func(*probe.TargetOptions)) probe.Driver {
	opts := probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm", OllamaAPI: nt.ollamaAPI}
	if mod != nil {
		mod(&opts)
	}
	return newDriver(t, nt.protocol, opts)
}

// probeNative sends one probe. TGI and Ollama have no ignore_eos: answers
// have their natural length, capped by maxTokens.
func probeNative(d probe.Driver, maxTokens int, stream bool, timeout time.Duration) *probe.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Probe(ctx, &probe.Request{
		Messages:  []probe.Message{{Role: "user", Content: "tell me about lighthouses"}},
		MaxTokens: maxTokens,
		Stream:    stream,
	})
}

// TestNativeAccuracyAgainstGroundTruth is TestAccuracyAgainstGroundTruth
// for TGI and Ollama: every output chunk's read time against the
// simulator's flush, token counts against what was sent, and Ollama's
// reported durations against the simulator's own clock.
func TestNativeAccuracyAgainstGroundTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("150 requests per protocol against the simulator")
	}
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 20 * time.Millisecond
	cfg.Latency.DecodeBase = 4 * time.Millisecond
	// Natural lengths 17..31 under a cap of 28: answers end by EOS (TGI
	// then streams a special EOS token) as well as by length.
	cfg.Output.MeanTokens = 24
	cfg.Output.LengthSpread = 0.3
	s := startSimulator(t, cfg)
	for _, nt := range nativeTargets {
		t.Run(nt.name, func(t *testing.T) {
			d := nt.driver(t, s, nil)
			const requests, concurrency = 150, 8
			eoss := 0
			run := s.compareWithGroundTruth(t, requests, concurrency,
				func() *probe.Result { return probeNative(d, 28, true, 20*time.Second) },
				func(res *probe.Result, rec simulator.RequestRecord, flushes []int64) {
					if rec.OutputTokens > len(flushes) {
						eoss++ // a token without text: TGI's special EOS
					}
					if res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != probe.TokenSourceServer {
						t.Errorf("%s: output tokens %d (%s), simulator sent %d", res.RequestID, res.OutputTokens, res.OutputTokensSource, rec.OutputTokens)
					}
					if res.InputTokens != rec.PromptTokens || res.InputTokensSource != probe.TokenSourceServer {
						t.Errorf("%s: input tokens %d (%s), simulator counted %d", res.RequestID, res.InputTokens, res.InputTokensSource, rec.PromptTokens)
					}
					if nt.protocol == probe.ProtocolOllama {
						checkOllamaTimings(t, res, rec)
					}
				})
			if run.failures > 0 {
				t.Fatalf("%d of %d probes failed", run.failures, requests)
			}
			medianWithin(t, "ttft", run.ttft, -0.002, 0.002)
			medianWithin(t, "every token read vs flush", run.token, -0.002, 0.002)
			if run.tokens < requests*15 {
				t.Errorf("compared %d tokens, want at least %d", run.tokens, requests*15)
			}
			if nt.protocol == probe.ProtocolTGI && eoss == 0 {
				t.Errorf("no answer ended with a special EOS token; the test does not cover it")
			}
		})
	}
}

// checkOllamaTimings compares the durations Ollama's done object reported
// with the simulator's clock: load is the model load (the slot wait is in
// total only, as in Ollama), prompt_eval the
// prefill up to the first token, and their sum is the server-side TTFT.
func checkOllamaTimings(t *testing.T, res *probe.Result, rec simulator.RequestRecord) {
	t.Helper()
	got := map[string]time.Duration{}
	for _, st := range res.ServerTimings {
		got[st.Name] = st.Duration
	}
	if len(got) < 3 {
		t.Errorf("%s: server timings %v", res.RequestID, res.ServerTimings)
		return
	}
	load := time.Duration(rec.AdmittedUnixNano - rec.ReceivedUnixNano)
	prefill := time.Duration(rec.FirstTokenUnixNano - rec.AdmittedUnixNano)
	// Ollama's durations come from the monotonic clock, ground truth is
	// wall-clock Unix time: they agree to well under 100µs.
	near := func(a, b time.Duration) bool { return (a - b).Abs() < 100*time.Microsecond }
	if !near(got["load"], load) || !near(got["prompt_eval"], prefill) {
		t.Errorf("%s: load %v prompt_eval %v, simulator %v and %v", res.RequestID, got["load"], got["prompt_eval"], load, prefill)
	}
	if got["total"] > res.EndToEnd || got["total"] < res.TTFT {
		t.Errorf("%s: server total %v outside [client TTFT %v, client end-to-end %v]", res.RequestID, got["total"], res.TTFT, res.EndToEnd)
	}
}

// TestNativeNonStreaming checks /generate and stream:false answers: no
// TTFT, server token counts, and TGI's and Ollama's own timings.
func TestNativeNonStreaming(t *testing.T) {
	s := startSimulator(t, fastSimulator())
	for _, nt := range nativeTargets {
		t.Run(nt.name, func(t *testing.T) {
			d := nt.driver(t, s, nil)
			res := probeNative(d, 10, false, 10*time.Second)
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("%s %v", res.Outcome, res.Err)
			}
			rec := s.groundTruth(t, res.RequestID)
			if res.Streamed || res.TTFT != 0 || res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != probe.TokenSourceServer {
				t.Errorf("result %+v, simulator sent %d tokens", res, rec.OutputTokens)
			}
			if res.InputTokens != rec.PromptTokens || len(res.ServerTimings) < 4 {
				t.Errorf("input tokens %d (simulator %d), server timings %v", res.InputTokens, rec.PromptTokens, res.ServerTimings)
			}
			if res.ServerTimings[0].Name != "total" || res.ServerTimings[0].Duration > res.EndToEnd {
				t.Errorf("server total %v, client end-to-end %v", res.ServerTimings[0], res.EndToEnd)
			}
		})
	}
}

// TestNativeFaultsHaveTheirOutcome is TestEveryFaultHasItsOutcome for TGI
// and Ollama, streamed and (where the fault applies) not.
func TestNativeFaultsHaveTheirOutcome(t *testing.T) {
	s := startSimulator(t, fastSimulator())
	cases := []struct {
		fault string
		// want per protocol family; ollama differs for error events,
		// which carry no status in Ollama's stream.
		tgi, ollama probe.Outcome
		timeout     time.Duration
		unary       bool
	}{
		{"error=503", probe.OutcomeHTTP5xx, probe.OutcomeHTTP5xx, 0, true},
		{"error=500", probe.OutcomeHTTP5xx, probe.OutcomeHTTP5xx, 0, true},
		{"error=429", probe.OutcomeHTTP4xx, probe.OutcomeHTTP4xx, 0, true},
		{"error=422", probe.OutcomeHTTP4xx, probe.OutcomeHTTP4xx, 0, true},
		{"error=424", probe.OutcomeHTTP4xx, probe.OutcomeHTTP4xx, 0, true},
		{"reset:after=3", probe.OutcomeIncomplete, probe.OutcomeIncomplete, 0, true},
		{"truncate:after=4", probe.OutcomeIncomplete, probe.OutcomeIncomplete, 0, true},
		{"malformed:after=2", probe.OutcomeProtocolError, probe.OutcomeProtocolError, 0, true},
		{"error_event:after=2", probe.OutcomeHTTP5xx, probe.OutcomeHTTP5xx, 0, true},
		{"error_event:after=2,status=424", probe.OutcomeHTTP4xx, probe.OutcomeHTTP5xx, 0, false},
		{"error_event:after=0,status=429", probe.OutcomeHTTP4xx, probe.OutcomeHTTP5xx, 0, false},
		{"stall:after=2,for=3s", probe.OutcomeStreamStalled, probe.OutcomeStreamStalled, 0, false},
		{"slow_first_token:delay=2s", probe.OutcomeStreamStalled, probe.OutcomeStreamStalled, 0, false},
		{"slow_first_token:delay=3s", probe.OutcomeTimeout, probe.OutcomeTimeout, 300 * time.Millisecond, false},
		{"slow_first_token:delay=100ms", probe.OutcomeSuccess, probe.OutcomeSuccess, 0, true},
	}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			for _, nt := range nativeTargets {
				want := c.tgi
				if nt.protocol == probe.ProtocolOllama {
					want = c.ollama
				}
				d := nt.driver(t, s, func(o *probe.TargetOptions) {
					o.Headers = map[string]string{simulator.HeaderFault: c.fault}
					o.StreamIdleTimeout = 500 * time.Millisecond
				})
				timeout := c.timeout
				if timeout == 0 {
					timeout = 10 * time.Second
				}
				for _, stream := range []bool{true, false} {
					if !stream && !c.unary {
						continue
					}
					w := want
					if !stream && c.fault == "error_event:after=2" {
						// Non-streamed, the simulator answers the error
						// with its status (500) before any body.
						w = probe.OutcomeHTTP5xx
					}
					res := probeNative(d, 12, stream, timeout)
					if res.Outcome != w {
						t.Errorf("%s stream=%v %s: outcome %s (%v), want %s", nt.name, stream, c.fault, res.Outcome, res.Err, w)
					}
					if w != probe.OutcomeSuccess && res.Err == nil {
						t.Errorf("%s %s: failure without an error message", nt.name, c.fault)
					}
				}
			}
		})
	}
}

// TestNativeKeepsProbingThroughFaults: random faults never poison the
// pooled transport of the TGI and Ollama drivers.
func TestNativeKeepsProbingThroughFaults(t *testing.T) {
	s := startSimulator(t, faultySimulator())
	for _, nt := range nativeTargets {
		t.Run(nt.name, func(t *testing.T) {
			d := nt.driver(t, s, func(o *probe.TargetOptions) { o.StreamIdleTimeout = 300 * time.Millisecond })
			counts, successAfterFailure := probeThroughFaults(80, func() *probe.Result { return probeNative(d, 8, true, 10*time.Second) })
			t.Logf("outcomes over 80 probes: %v", counts)
			if counts[probe.OutcomeSuccess] < 25 || !successAfterFailure {
				t.Errorf("probing did not recover from faults: %v", counts)
			}
			if counts[probe.OutcomeIncomplete] == 0 || counts[probe.OutcomeHTTP5xx]+counts[probe.OutcomeHTTP4xx] == 0 {
				t.Errorf("fault injection or classification is off: %v", counts)
			}
		})
	}
}
