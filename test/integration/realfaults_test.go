package integration

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

// The outcome the prober gives each behaviour the simulator takes from a
// real server (docs/simulator.md, "Behaviours taken from real servers").

// realTarget is one protocol spoken to the simulator.
type realTarget struct {
	name, protocol string
	opts           func(s *tritonSim) probe.TargetOptions
}

func openAITarget(protocol string) realTarget {
	return realTarget{protocol, protocol, func(s *tritonSim) probe.TargetOptions {
		return probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm"}
	}}
}

var realTargets = []realTarget{
	openAITarget(probe.ProtocolOpenAIChat),
	openAITarget(probe.ProtocolOpenAICompletions),
	{"tgi", probe.ProtocolTGI, func(s *tritonSim) probe.TargetOptions {
		return probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm"}
	}},
	{"ollama", probe.ProtocolOllama, func(s *tritonSim) probe.TargetOptions {
		return probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm", OllamaAPI: probe.OllamaAPIChat}
	}},
	{"triton_generate", probe.ProtocolTritonGenerate, func(s *tritonSim) probe.TargetOptions {
		return s.options(tritonVariant{protocol: probe.ProtocolTritonGenerate, preset: probe.PresetVLLMBackend})
	}},
	{"triton_grpc", probe.ProtocolTritonGRPC, func(s *tritonSim) probe.TargetOptions {
		return s.options(tritonVariant{protocol: probe.ProtocolTritonGRPC, preset: probe.PresetVLLMBackend})
	}},
}

func probeWith(d probe.Driver, req probe.Request, timeout time.Duration) *probe.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Probe(ctx, &req)
}

func streamedRequest(maxTokens int) probe.Request {
	return probe.Request{Prompt: "tell me about lighthouses", MaxTokens: maxTokens, IgnoreEOS: true, Stream: true}
}

// TestQueueFullOutcomePerProtocol: a request refused for a full waiting
// queue, answered on each route as its server answers it (vLLM 503, TGI
// 429 or its overloaded event in a 200 stream, Ollama 503, Triton
// UNAVAILABLE), is counted by the status the server used.
func TestQueueFullOutcomePerProtocol(t *testing.T) {
	s := startTritonSimulator(t, fastSimulator())
	want := map[string]probe.Outcome{
		probe.ProtocolOpenAIChat: probe.OutcomeHTTP5xx, probe.ProtocolOpenAICompletions: probe.OutcomeHTTP5xx,
		probe.ProtocolTGI: probe.OutcomeHTTP4xx, probe.ProtocolOllama: probe.OutcomeHTTP5xx,
		probe.ProtocolTritonGenerate: probe.OutcomeHTTP5xx, probe.ProtocolTritonGRPC: probe.OutcomeGRPCError,
	}
	wantErr := map[string]string{
		probe.ProtocolTGI: "Model is overloaded", probe.ProtocolOllama: "server busy",
		probe.ProtocolTritonGenerate: "Exceeds maximum queue size", probe.ProtocolTritonGRPC: "Exceeds maximum queue size",
	}
	for _, rt := range realTargets {
		t.Run(rt.name, func(t *testing.T) {
			opts := rt.opts(s)
			opts.Headers = map[string]string{simulator.HeaderFault: "queue_full"}
			d := newDriver(t, rt.protocol, opts)
			for _, stream := range []bool{true, false} {
				req := streamedRequest(4)
				req.Stream = stream
				res := probeWith(d, req, 10*time.Second)
				if res.Outcome != want[rt.protocol] || res.Err == nil || !strings.Contains(res.Err.Error(), wantErr[rt.protocol]) {
					t.Errorf("stream=%v: %s (%v), want %s", stream, res.Outcome, res.Err, want[rt.protocol])
				}
			}
		})
	}
	// The same through a really full queue: TGI's event in a 200 stream.
	cfg := fastSimulator()
	cfg.Scheduler.MaxRunning, cfg.Scheduler.MaxQueue = 1, 0
	full := startSimulator(t, cfg)
	busy := newDriver(t, probe.ProtocolTGI, probe.TargetOptions{Name: "sim", URL: full.url, Model: "sim-llm",
		Headers: map[string]string{simulator.HeaderFault: "slow_first_token:delay=1s"}})
	done := make(chan *probe.Result, 1)
	go func() { done <- probeWith(busy, streamedRequest(2), 10*time.Second) }()
	time.Sleep(200 * time.Millisecond)
	d := newDriver(t, probe.ProtocolTGI, probe.TargetOptions{Name: "sim", URL: full.url, Model: "sim-llm"})
	if res := probeWith(d, streamedRequest(2), 10*time.Second); res.Outcome != probe.OutcomeHTTP4xx || res.StatusCode != 200 {
		t.Errorf("TGI stream into a full queue: %s (status %d, %v), want http_4xx from an event in a 200 stream", res.Outcome, res.StatusCode, res.Err)
	}
	if res := <-done; res.Outcome != probe.OutcomeSuccess {
		t.Errorf("the request holding the slot: %s %v", res.Outcome, res.Err)
	}
}

// TestContextOverflowIsHTTP4xx: prompt + max_tokens beyond the context is
// vLLM's 400, a prompt beyond it llama.cpp's 400
// exceed_context_size_error, and on TGI a 422 validation error (an event
// in a 200 stream): each the client's error.
func TestContextOverflowIsHTTP4xx(t *testing.T) {
	cfg := fastSimulator()
	cfg.MaxModelLen = 64
	vllm := startSimulator(t, cfg)
	cfg.OpenAIServer = simulator.OpenAIServerLlamaCpp
	llama := startSimulator(t, cfg)
	long := strings.Repeat("word ", 70)
	for _, c := range []struct {
		name, url, protocol string
		req                 probe.Request
		status              int
		errContains         string
	}{
		{"vLLM max_tokens", vllm.url, probe.ProtocolOpenAIChat, streamedRequest(100), 400, "'max_tokens' or 'max_completion_tokens' is too large: 100"},
		{"vLLM prompt", vllm.url, probe.ProtocolOpenAICompletions, probe.Request{Prompt: long, MaxTokens: 1, Stream: true}, 400, "maximum context length is 64 tokens"},
		{"llama.cpp prompt", llama.url, probe.ProtocolOpenAIChat, probe.Request{Prompt: long, MaxTokens: 1, Stream: true}, 400, "exceed_context_size_error"},
		{"TGI stream", vllm.url, probe.ProtocolTGI, streamedRequest(100), 200, "must be <= 64"},
		{"TGI generate", vllm.url, probe.ProtocolTGI, probe.Request{Prompt: "a b", MaxTokens: 100}, 422, "must be <= 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t, c.protocol, probe.TargetOptions{Name: "sim", URL: c.url, Model: "sim-llm"})
			res := probeWith(d, c.req, 10*time.Second)
			if res.Outcome != probe.OutcomeHTTP4xx || res.StatusCode != c.status || res.Err == nil || !strings.Contains(res.Err.Error(), c.errContains) {
				t.Errorf("%s (status %d, %v), want http_4xx status %d with %q", res.Outcome, res.StatusCode, res.Err, c.status, c.errContains)
			}
		})
	}
	// llama.cpp does not refuse max_tokens beyond the context: the answer
	// stops when the context is full, a success with finish_reason length.
	d := newDriver(t, probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: llama.url, Model: "sim-llm"})
	if res := probeWith(d, streamedRequest(100), 10*time.Second); res.Outcome != probe.OutcomeSuccess || res.FinishReason != "length" || res.OutputTokens >= 64 {
		t.Errorf("llama.cpp, max_tokens past the context: %s %v, %d tokens, finish %q", res.Outcome, res.Err, res.OutputTokens, res.FinishReason)
	}
}

// TestMidStreamErrorShapes: vLLM's error object in a data line (then
// [DONE]) and newer llama.cpp's (stream closed after it) are failures by
// the code they carry.
func TestMidStreamErrorShapes(t *testing.T) {
	vllm := startSimulator(t, fastSimulator())
	cfg := fastSimulator()
	cfg.OpenAIServer = simulator.OpenAIServerLlamaCpp
	llama := startSimulator(t, cfg)
	for _, c := range []struct {
		name, url, fault string
		want             probe.Outcome
		errContains      string
	}{
		{"vLLM GenerationError", vllm.url, "error_event:after=2", probe.OutcomeHTTP5xx, "(code 500, type InternalServerError): Internal server error"},
		{"vLLM 400", vllm.url, "error_event:after=2,status=400", probe.OutcomeHTTP4xx, "code 400, type BadRequestError"},
		{"llama.cpp, no [DONE] after it", llama.url, "error_event:after=2", probe.OutcomeHTTP5xx, "code 500, type server_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
				d := newDriver(t, protocol, probe.TargetOptions{Name: "sim", URL: c.url, Model: "sim-llm",
					Headers: map[string]string{simulator.HeaderFault: c.fault}})
				res := probeWith(d, streamedRequest(6), 10*time.Second)
				if res.Outcome != c.want || res.Err == nil || !strings.Contains(res.Err.Error(), c.errContains) || len(res.Chunks) != 2 {
					t.Errorf("%s: %s (%v) after %d chunks, want %s", protocol, res.Outcome, res.Err, len(res.Chunks), c.want)
				}
			}
		})
	}
}

// TestSSEPingAndUsageChunk: sse-starlette's ": ping" comments, before the
// first token and between tokens, and vLLM's final usage chunk with empty
// choices leave a success with the server's exact token counts, and a
// TTFT that is the first token's, not the first comment's.
func TestSSEPingAndUsageChunk(t *testing.T) {
	s := startSimulator(t, fastSimulator())
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		t.Run(protocol, func(t *testing.T) {
			d := newDriver(t, protocol, probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm",
				Headers: map[string]string{simulator.HeaderFault: "sse_ping:every=5ms;slow_first_token:delay=50ms;stall:after=4,for=30ms"}})
			res := probeWith(d, streamedRequest(8), 10*time.Second)
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("%s %v", res.Outcome, res.Err)
			}
			rec := s.groundTruth(t, res.RequestID)
			pings, usage := 0, 0
			for _, c := range rec.Chunks {
				switch c.Kind {
				case "ping":
					pings++
				case "usage":
					usage++
				}
			}
			if pings < 10 || usage != 1 {
				t.Fatalf("simulator sent %d pings and %d usage chunks; the test proves nothing", pings, usage)
			}
			if res.OutputTokens != 8 || res.OutputTokensSource != probe.TokenSourceServer || res.InputTokens != rec.PromptTokens ||
				len(res.Chunks) != 8 || res.FinishReason != "length" {
				t.Errorf("tokens out %d (%s) in %d (simulator %d), %d chunks, finish %q", res.OutputTokens, res.OutputTokensSource,
					res.InputTokens, rec.PromptTokens, len(res.Chunks), res.FinishReason)
			}
			// The first comment came right after the head; the first token
			// 50 ms later.
			serverTTFT := time.Duration(rec.FirstTokenUnixNano - rec.ReceivedUnixNano)
			if res.TTFT < 50*time.Millisecond || (res.TTFT-serverTTFT).Abs() > 5*time.Millisecond {
				t.Errorf("TTFT %v, simulator's %v", res.TTFT, serverTTFT)
			}
		})
	}
}

// TestNoDoneIsIncomplete: an OpenAI stream closed without [DONE] is
// incomplete even though finish_reason and usage arrived ([DONE] is the
// stream's only end; docs/metrics.md), and the error names the finish
// reason, so a server that never sends [DONE] can be told apart from a
// stream cut short.
func TestNoDoneIsIncomplete(t *testing.T) {
	s := startSimulator(t, fastSimulator())
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		d := newDriver(t, protocol, probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm",
			Headers: map[string]string{simulator.HeaderFault: "no_done"}})
		res := probeWith(d, streamedRequest(5), 10*time.Second)
		if res.Outcome != probe.OutcomeIncomplete || res.Err == nil || !strings.Contains(res.Err.Error(), `finish_reason "length" had arrived`) ||
			res.OutputTokens != 5 || res.OutputTokensSource != probe.TokenSourceServer {
			t.Errorf("%s: %s (%v), %d tokens (%s)", protocol, res.Outcome, res.Err, res.OutputTokens, res.OutputTokensSource)
		}
		if rec := s.groundTruth(t, res.RequestID); rec.Outcome != "completed" {
			t.Errorf("%s: simulator outcome %s", protocol, rec.Outcome)
		}
	}
}

// TestOllamaModelLoad: the first request after start, and the first after
// the idle unload, pay Ollama's model load: a multi-second TTFT that is a
// success, with load_duration reporting the wait; a resident model's load
// is next to nothing.
func TestOllamaModelLoad(t *testing.T) {
	const delay = 1500 * time.Millisecond
	cfg := fastSimulator()
	cfg.Faults.ModelLoadDelay = delay
	cfg.Faults.ModelKeepAlive = 400 * time.Millisecond
	s := startSimulator(t, cfg)
	d := newDriver(t, probe.ProtocolOllama, probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm", OllamaAPI: probe.OllamaAPIChat})
	reg := prometheus.NewPedanticRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	pm.Add(collector.ProbeSeries{Target: "sim", Probe: "load", Model: "sim-llm"})
	load := func(res *probe.Result) time.Duration {
		for _, st := range res.ServerTimings {
			if st.Name == "load" {
				return st.Duration
			}
		}
		t.Fatalf("%s: no load timing in %v", res.RequestID, res.ServerTimings)
		return 0
	}
	check := func(name string, cold bool) {
		res := probeNative(d, 6, true, 20*time.Second)
		pm.Observe("sim", "load", res)
		if res.Outcome != probe.OutcomeSuccess {
			t.Fatalf("%s: %s %v", name, res.Outcome, res.Err)
		}
		rec := s.groundTruth(t, res.RequestID)
		waited := time.Duration(rec.ModelLoadNanos)
		switch {
		case cold && (waited < delay || load(res) < waited || res.TTFT < load(res)):
			t.Errorf("%s: TTFT %v, load_duration %v, the simulator loaded for %v", name, res.TTFT, load(res), waited)
		case !cold && (waited != 0 || load(res) > 50*time.Millisecond || res.TTFT > time.Second):
			t.Errorf("%s: resident model, TTFT %v, load_duration %v, waited %v", name, res.TTFT, load(res), waited)
		}
	}
	check("first request", true)
	check("resident", false)
	time.Sleep(600 * time.Millisecond)
	check("after the idle unload", true)
	loads := testutil.Gather(t, reg).Series("llm_probe_server_reported_seconds", "phase", "load")
	if len(loads) != 1 || loads[0].GetHistogram().GetSampleCount() != 3 || loads[0].GetHistogram().GetSampleSum() < 2*delay.Seconds() {
		t.Errorf("exported load histogram %v", loads)
	}
}

// TestLlamaCppTimingsAgainstGroundTruth: the timings the simulator sends
// as llama.cpp are what the prober reads and exports, and the client's
// TTFT is never below the server's prompt time (the server's clock starts
// later and stops earlier).
func TestLlamaCppTimingsAgainstGroundTruth(t *testing.T) {
	cfg := fastSimulator()
	cfg.OpenAIServer = simulator.OpenAIServerLlamaCpp
	cfg.Output.RoleChunk = simulator.RoleChunkOff
	s := startSimulator(t, cfg)
	reg := prometheus.NewPedanticRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	var wantPrompt, wantPredicted float64
	for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
		pm.Add(collector.ProbeSeries{Target: "sim", Probe: protocol, Model: "sim-llm"})
		d := newDriver(t, protocol, probe.TargetOptions{Name: "sim", URL: s.url, Model: "sim-llm"})
		for i := range 20 {
			req := streamedRequest(4 + i%5)
			req.Stream = i%4 != 3 // some non-streamed answers too
			res := probeWith(d, req, 10*time.Second)
			pm.Observe("sim", protocol, res)
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("%s: %s %v", protocol, res.Outcome, res.Err)
			}
			rec := s.groundTruth(t, res.RequestID)
			sent := rec.LlamaCppTimings
			if sent == nil {
				t.Fatalf("%s: the simulator sent no timings", res.RequestID)
			}
			got := map[string]time.Duration{}
			for _, st := range res.ServerTimings {
				got[st.Name] = st.Duration
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			n := float64(sent.PredictedN)
			if len(got) != 4 || res.ServerTimingsInvalid != 0 ||
				math.Abs(ms(got["prompt"])-sent.PromptMS) > 1e-6 || math.Abs(ms(got["predicted"])-sent.PredictedMS) > 1e-6 ||
				math.Abs(ms(got["predicted_per_token"])-sent.PredictedMS/n) > 1e-6 ||
				math.Abs(ms(got["prompt_per_token"])-sent.PromptMS/float64(sent.PromptN)) > 1e-6 {
				t.Errorf("%s: read %v (%d invalid), sent %+v", res.RequestID, res.ServerTimings, res.ServerTimingsInvalid, sent)
			}
			if res.Streamed && res.TTFT-got["prompt"] < 0 {
				t.Errorf("%s: client TTFT %v below the server's prompt time %v", res.RequestID, res.TTFT, got["prompt"])
			}
			wantPrompt += sent.PromptMS / 1e3
			wantPredicted += sent.PredictedMS / 1e3
		}
	}
	m := testutil.Gather(t, reg)
	sum := func(phase string) (float64, uint64) {
		var s float64
		var c uint64
		for _, h := range m.Series("llm_probe_server_reported_seconds", "phase", phase) {
			s += h.GetHistogram().GetSampleSum()
			c += h.GetHistogram().GetSampleCount()
		}
		return s, c
	}
	for phase, want := range map[string]float64{"prompt": wantPrompt, "predicted": wantPredicted} {
		if got, n := sum(phase); n != 40 || math.Abs(got-want) > 1e-6 {
			t.Errorf("exported %s: sum %v over %d, the simulator sent %v over 40", phase, got, n, want)
		}
	}
	if n := m.Sum("llm_probe_server_timing_invalid_total"); n != 0 {
		t.Errorf("%v invalid timings", n)
	}
}
