package probe_test

import (
	"context"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestCancelAfterTokensAgainstSimulator: with CancelAfter, every streaming
// driver reads exactly k output tokens, calls Before once while the
// stream is open, ends as a success with the cut recorded and TPOT and
// throughput undefined, and closes the stream so the server sees the
// client leave (ground truth: client_gone, the disconnect noticed within
// a second of the cut, fewer tokens sent than planned; told to, it
// leaks the slot instead of freeing it). An HTTP driver's
// next probe goes over a new connection: the cut one was not pooled.
func TestCancelAfterTokensAgainstSimulator(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase, cfg.Latency.PrefillPerToken, cfg.Latency.Jitter = 5*time.Millisecond, 2*time.Millisecond, 0, 0
	sim := simtest.StartWithGRPC(t, cfg)
	const k, maxTokens = 5, 400
	for _, p := range probe.Protocols() {
		if !p.Streams {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			opts := simTarget(p, sim, cfg.ServedModelNames[0])
			d, err := probe.NewDriver(p.Name, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			before := 0
			req := &probe.Request{
				Messages:  []probe.Message{{Role: "user", Content: "Tell a long story about lighthouses."}},
				MaxTokens: maxTokens, IgnoreEOS: true, Stream: true,
				CancelAfter: &probe.CancelAfter{Tokens: k, Before: func() { before++ }},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := d.Probe(ctx, req)
			cut := time.Now()
			cancel()
			if res.Outcome != probe.OutcomeSuccess || !res.Cut() {
				t.Fatalf("outcome %s (%v), cut %t", res.Outcome, res.Err, res.Cut())
			}
			read := 0
			for _, c := range res.Chunks {
				read += c.Tokens
			}
			if read != k || res.Cancel.Tokens != k || res.Cancel.AfterTokens != k || res.OutputTokens != k {
				t.Errorf("read %d tokens in %d chunks, cancellation %+v, output tokens %d; want %d", read, len(res.Chunks), *res.Cancel, res.OutputTokens, k)
			}
			if before != 1 {
				t.Errorf("Before called %d times, want 1", before)
			}
			if res.TTFT <= 0 || res.Cancel.At < res.TTFT || res.EndToEnd != res.Cancel.At {
				t.Errorf("TTFT %s, cut at %s, end-to-end %s", res.TTFT, res.Cancel.At, res.EndToEnd)
			}
			if _, ok := res.TPOT(); ok {
				t.Error("TPOT defined for a cut stream")
			}
			if _, ok := res.OutputTokensPerSecond(); ok {
				t.Error("throughput defined for a cut stream")
			}
			rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
			if rec.Outcome != "client_gone" || rec.OutputTokens < k || rec.OutputTokens >= rec.PlannedOutputTokens {
				t.Errorf("ground truth: outcome %s, %d of %d tokens sent; want client_gone after at least %d", rec.Outcome, rec.OutputTokens, rec.PlannedOutputTokens, k)
			}
			if rec.DisconnectUnixNano == 0 || rec.SlotReleasedUnixNano < rec.DisconnectUnixNano {
				t.Errorf("ground truth: disconnect at %d, slot released at %d", rec.DisconnectUnixNano, rec.SlotReleasedUnixNano)
			} else if lag := time.Unix(0, rec.DisconnectUnixNano).Sub(cut); lag > time.Second {
				t.Errorf("server noticed the disconnect %s after the cut", lag)
			}
			// Told to leak (X-Sim-Options, gRPC metadata for triton_grpc),
			// the server keeps the slot after the same cut.
			leaky, err := probe.NewDriver(p.Name, withHeader(opts, simulator.HeaderOptions, "disconnect_release=leak"), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.CancelAfter.Before = nil
			leak := leaky.Probe(context.Background(), req)
			leaky.Close()
			if rec := simtest.GroundTruth(t, sim.URL, leak.RequestID); !leak.Cut() || !rec.SlotLeaked || sim.Server.HeldSlots() != 1 {
				t.Errorf("leak: cut %t, ground truth leaked %t, %d slots held", leak.Cut(), rec.SlotLeaked, sim.Server.HeldSlots())
			}
			if n := sim.Server.FreeLeakedSlots(); n != 1 {
				t.Errorf("freed %d slots", n)
			}
			if p.Endpoint == probe.EndpointURL {
				next := d.Probe(context.Background(), &probe.Request{Prompt: "again", MaxTokens: 2, Stream: true})
				if next.Outcome != probe.OutcomeSuccess || next.Phases.ConnectionReused || next.Cut() {
					t.Errorf("next probe: outcome %s (%v), connection reused %t, cut %t", next.Outcome, next.Err, next.Phases.ConnectionReused, next.Cut())
				}
			}
		})
	}
}

// TestCancelAfterMoreTokensThanTheAnswer: an answer shorter than k is
// read whole and is no cancellation.
func TestCancelAfterMoreTokensThanTheAnswer(t *testing.T) {
	sim, cfg := fastSim(t, nil)
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	called := false
	res := d.Probe(context.Background(), &probe.Request{Prompt: "hi", MaxTokens: 3, IgnoreEOS: true, Stream: true,
		CancelAfter: &probe.CancelAfter{Tokens: 10, Before: func() { called = true }}})
	if res.Outcome != probe.OutcomeSuccess || res.Cut() || called || res.OutputTokens != 3 {
		t.Errorf("outcome %s (%v), cut %t, Before called %t, %d tokens", res.Outcome, res.Err, res.Cut(), called, res.OutputTokens)
	}
	if _, ok := res.TPOT(); !ok {
		t.Error("TPOT undefined for a whole answer")
	}
}

func withHeader(o probe.TargetOptions, k, v string) probe.TargetOptions {
	o.Headers = map[string]string{k: v}
	return o
}
