package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// tritonSim serves HTTP (generate) and gRPC from one simulator.
type tritonSim struct {
	*sim
	grpcAddr string
}

func startTritonSimulator(t *testing.T, cfg simulator.Config) *tritonSim {
	t.Helper()
	s := simtest.StartWithGRPC(t, cfg)
	return &tritonSim{sim: &sim{url: s.URL}, grpcAddr: s.GRPCAddr}
}

// tritonVariant is one way of speaking to Triton.
type tritonVariant struct {
	name, protocol, preset string
	// serverCount: the preset asks the server for its token counts
	// (output and input).
	serverCount bool
}

// checkInputTokens: the vLLM preset's input count is the server's prompt
// count, the TensorRT-LLM ensemble's stays unknown (it has no such output).
func (v tritonVariant) checkInputTokens(t *testing.T, res *probe.Result, rec simulator.RequestRecord) {
	t.Helper()
	want, wantSrc := 0, probe.TokenSourceNone
	if v.serverCount {
		want, wantSrc = rec.PromptTokens, probe.TokenSourceServer
	}
	if res.InputTokens != want || res.InputTokensSource != wantSrc || (v.serverCount && want < 1) {
		t.Errorf("%s %s: input tokens %d (%q), want %d (%q)", v.name, res.RequestID, res.InputTokens, res.InputTokensSource, want, wantSrc)
	}
}

var tritonVariants = []tritonVariant{
	{"generate/trtllm", probe.ProtocolTritonGenerate, probe.PresetTRTLLMEnsemble, false},
	{"generate/vllm", probe.ProtocolTritonGenerate, probe.PresetVLLMBackend, true},
	{"grpc/trtllm", probe.ProtocolTritonGRPC, probe.PresetTRTLLMEnsemble, false},
	{"grpc/vllm", probe.ProtocolTritonGRPC, probe.PresetVLLMBackend, true},
}

func (s *tritonSim) options(v tritonVariant) probe.TargetOptions {
	in, err := probe.TritonPreset(v.preset)
	if err != nil {
		panic(err)
	}
	o := probe.TargetOptions{Name: "sim", Model: "sim-llm", Triton: probe.TritonOptions{Inputs: in}}
	if v.protocol == probe.ProtocolTritonGRPC {
		o.Address = s.grpcAddr
	} else {
		o.URL = s.url
	}
	return o
}

// TestTritonAccuracyAgainstGroundTruth is the Triton counterpart of
// TestAccuracyAgainstGroundTruth: every streamed response's read time
// against the simulator's send time, over both drivers and both presets.
func TestTritonAccuracyAgainstGroundTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("hundreds of requests against the simulator")
	}
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 20 * time.Millisecond
	cfg.Latency.DecodeBase = 4 * time.Millisecond
	s := startTritonSimulator(t, cfg)
	for _, v := range tritonVariants {
		t.Run(v.name, func(t *testing.T) {
			d := newDriver(t, v.protocol, s.options(v))
			const requests, concurrency = 120, 8
			wantSrc := probe.TokenSourceCounted
			if v.serverCount {
				wantSrc = probe.TokenSourceServer
			}
			run := s.compareWithGroundTruth(t, requests, concurrency,
				func() *probe.Result { return probeOnce(d, 16, 20*time.Second) },
				func(res *probe.Result, rec simulator.RequestRecord, _ []int64) {
					if res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != wantSrc {
						t.Errorf("%s: output tokens %d (%s), simulator sent %d (want source %s)", res.RequestID, res.OutputTokens, res.OutputTokensSource, rec.OutputTokens, wantSrc)
					}
					v.checkInputTokens(t, res, rec)
					// The phases are consecutive segments before the first
					// response, over HTTP and gRPC alike.
					p := res.Phases
					if sum := p.DNS + p.Connect + p.TLS + p.Write + p.FirstByte; sum > res.TTFT || !p.HasWrite || !p.HasFirstByte {
						t.Errorf("%s: phases %+v (sum %v) against ttft %v", res.RequestID, p, sum, res.TTFT)
					}
				})
			// Generous for a loaded 2-core machine under -race. TTFT also
			// holds what happens before the server sees the request
			// (stream setup, HTTP/2 headers, decoding), hence its wider
			// bound; the read-vs-send errors are the prober's own.
			medianWithin(t, "ttft", run.ttft, -0.001, 0.006)
			medianWithin(t, "first token read vs send", run.first, -0.001, 0.003)
			medianWithin(t, "every token read vs send", run.token, -0.001, 0.003)
			if run.tokens < requests*16 {
				t.Errorf("compared %d tokens, want at least %d", run.tokens, requests*16)
			}
		})
	}
}

// TestTritonNonStreaming checks generate and ModelInfer (and the decoupled
// path over ModelStreamInfer) answer whole.
func TestTritonNonStreaming(t *testing.T) {
	s := startTritonSimulator(t, fastSimulator())
	for _, v := range tritonVariants {
		for _, decoupled := range []bool{false, true} {
			if decoupled && v.protocol != probe.ProtocolTritonGRPC {
				continue
			}
			opts := s.options(v)
			opts.Triton.Decoupled = decoupled
			d := newDriver(t, v.protocol, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := d.Probe(ctx, &probe.Request{Prompt: "hi there", MaxTokens: 12, IgnoreEOS: true})
			cancel()
			if res.Outcome != probe.OutcomeSuccess || res.Streamed || len(res.Chunks) != 0 || res.TTFT != 0 {
				t.Errorf("%s decoupled=%v: %s %v streamed=%v chunks=%d", v.name, decoupled, res.Outcome, res.Err, res.Streamed, len(res.Chunks))
				continue
			}
			rec := s.groundTruth(t, res.RequestID)
			v.checkInputTokens(t, res, rec)
			if v.serverCount && (res.OutputTokens != rec.OutputTokens || res.OutputTokensSource != probe.TokenSourceServer) {
				t.Errorf("%s: output tokens %d (%s), simulator %d", v.name, res.OutputTokens, res.OutputTokensSource, rec.OutputTokens)
			}
			if res.EndToEnd < time.Duration(rec.FinishedUnixNano-rec.ReceivedUnixNano)/2 {
				t.Errorf("%s: end-to-end %v shorter than the server's handling", v.name, res.EndToEnd)
			}
		}
	}
}

// TestTritonFaults injects each simulator fault and checks the outcome per
// protocol, then that the same driver still succeeds.
func TestTritonFaults(t *testing.T) {
	s := startTritonSimulator(t, fastSimulator())
	type want struct{ generate, grpc probe.Outcome }
	cases := []struct {
		fault   string
		want    want
		timeout time.Duration
	}{
		{"error=503", want{probe.OutcomeHTTP5xx, probe.OutcomeGRPCError}, 0},
		{"error=500", want{probe.OutcomeHTTP5xx, probe.OutcomeGRPCError}, 0},
		{"error=400", want{probe.OutcomeHTTP4xx, probe.OutcomeGRPCError}, 0},
		{"reset:after=3", want{probe.OutcomeIncomplete, probe.OutcomeIncomplete}, 0},
		// Mid-stream: no final response / no finish_reason.
		{"truncate:after=4", want{probe.OutcomeIncomplete, probe.OutcomeIncomplete}, 0},
		// After the last token: the final flag (finish_reason) never comes.
		{"truncate:after=100000", want{probe.OutcomeIncomplete, probe.OutcomeIncomplete}, 0},
		{"malformed:after=2", want{probe.OutcomeProtocolError, probe.OutcomeProtocolError}, 0},
		// Triton's mid-stream error carries no status: the server failed.
		{"error_event:after=2", want{probe.OutcomeHTTP5xx, probe.OutcomeGRPCError}, 0},
		{"stall:after=2,for=3s", want{probe.OutcomeStreamStalled, probe.OutcomeStreamStalled}, 0},
		{"slow_first_token:delay=2s", want{probe.OutcomeStreamStalled, probe.OutcomeStreamStalled}, 0},
		{"slow_first_token:delay=3s", want{probe.OutcomeTimeout, probe.OutcomeTimeout}, 300 * time.Millisecond},
		{"slow_first_token:delay=100ms", want{probe.OutcomeSuccess, probe.OutcomeSuccess}, 0},
	}
	// vLLM preset: its finish_reason makes a cleanly closed generate_stream
	// that stopped early detectable.
	v := tritonVariant{protocol: probe.ProtocolTritonGenerate, preset: probe.PresetVLLMBackend}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			for _, protocol := range []string{probe.ProtocolTritonGenerate, probe.ProtocolTritonGRPC} {
				v.protocol = protocol
				opts := s.options(v)
				opts.Headers = map[string]string{simulator.HeaderFault: c.fault}
				opts.StreamIdleTimeout = 500 * time.Millisecond
				d := newDriver(t, protocol, opts)
				timeout := c.timeout
				if timeout == 0 {
					timeout = 10 * time.Second
				}
				w := c.want.generate
				if protocol == probe.ProtocolTritonGRPC {
					w = c.want.grpc
				}
				res := probeOnce(d, 12, timeout)
				if res.Outcome != w {
					t.Errorf("%s %s: outcome %s (%v), want %s", protocol, c.fault, res.Outcome, res.Err, w)
				}
				if w != probe.OutcomeSuccess && res.Err == nil {
					t.Errorf("%s %s: failure without an error message", protocol, c.fault)
				}
			}
		})
	}
	// A fresh driver without faults works against the same simulator after
	// resets (no poisoned pool or channel).
	for _, protocol := range []string{probe.ProtocolTritonGenerate, probe.ProtocolTritonGRPC} {
		v.protocol = protocol
		d := newDriver(t, protocol, s.options(v))
		for range 3 {
			if res := probeOnce(d, 6, 10*time.Second); res.Outcome != probe.OutcomeSuccess {
				t.Errorf("%s after faults: %s %v", protocol, res.Outcome, res.Err)
			}
		}
	}
}

// TestTritonGRPCRecoversAfterReset sends probes through one gRPC driver
// while the simulator resets connections at random.
func TestTritonGRPCRecoversAfterReset(t *testing.T) {
	cfg := fastSimulator()
	cfg.Faults.ResetRate = 0.2
	cfg.Faults.ErrorEventRate = 0.1
	s := startTritonSimulator(t, cfg)
	d := newDriver(t, probe.ProtocolTritonGRPC, s.options(tritonVariant{protocol: probe.ProtocolTritonGRPC, preset: probe.PresetTRTLLMEnsemble}))
	counts := map[probe.Outcome]int{}
	for range 40 {
		counts[probeOnce(d, 6, 10*time.Second).Outcome]++
	}
	t.Logf("outcomes: %v", counts)
	if counts[probe.OutcomeSuccess] < 15 || counts[probe.OutcomeIncomplete] == 0 || counts[probe.OutcomeGRPCError] == 0 {
		t.Errorf("unexpected outcome mix %v", counts)
	}
}

// TestTritonGRPCConnectAndReadiness: nothing listening is connect_error;
// a model the server does not serve fails the readiness check.
func TestTritonGRPCConnectAndReadiness(t *testing.T) {
	addr := testutil.FreeAddr(t)
	d := newDriver(t, probe.ProtocolTritonGRPC, probe.TargetOptions{Name: "x", Address: addr, Model: "m", ConnectTimeout: time.Second})
	if res := probeOnce(d, 4, 5*time.Second); res.Outcome != probe.OutcomeConnectError {
		t.Errorf("nothing listening: %s %v", res.Outcome, res.Err)
	}
	s := startTritonSimulator(t, fastSimulator())
	d = newDriver(t, probe.ProtocolTritonGRPC, probe.TargetOptions{Name: "x", Address: s.grpcAddr, Model: "not-served"})
	res := probeOnce(d, 4, 5*time.Second)
	if res.Outcome != probe.OutcomeGRPCError {
		t.Errorf("unknown model: %s %v", res.Outcome, res.Err)
	}
	// The HTTP side answers the same readiness question.
	resp, err := http.Get(s.url + "/v2/models/not-served/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP model ready for an unknown model: %d", resp.StatusCode)
	}
}
