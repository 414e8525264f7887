package collector

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestExemplarJoinsServerTrace: the trace id in a TTFT exemplar is the one
// the server received in traceparent (HTTP header, gRPC metadata), so an
// exemplar leads to the server's trace of the same request.
func TestExemplarJoinsServerTrace(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase, cfg.Latency.PrefillPerToken = 2*time.Millisecond, time.Millisecond, 0
	sim := simtest.StartWithGRPC(t, cfg)
	for _, protocol := range []string{"openai_chat", "triton_grpc"} {
		t.Run(protocol, func(t *testing.T) {
			opts := probe.TargetOptions{Name: "sim", Model: cfg.ServedModelNames[0], URL: sim.URL}
			if protocol == "triton_grpc" {
				opts = probe.TargetOptions{Name: "sim", Model: cfg.ServedModelNames[0], Address: sim.GRPCAddr}
			}
			d, err := probe.NewDriver(protocol, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := d.Probe(ctx, &probe.Request{Prompt: "Trace me.", MaxTokens: 4, Stream: true})
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
			}
			if res.TraceID != res.RequestID || !probe.ValidTraceID(res.TraceID) || len(res.SpanID) != 16 {
				t.Fatalf("trace id %q span %q, request id %q: want the request id as trace id", res.TraceID, res.SpanID, res.RequestID)
			}

			m := NewProbeMetrics()
			m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", Protocol: protocol})
			m.Observe("sim", "p", res)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(m)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var ex *dto.Exemplar
			for _, mf := range mfs {
				if mf.GetName() != "llm_probe_time_to_first_token_seconds" {
					continue
				}
				for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
					if b.GetExemplar() != nil {
						ex = b.GetExemplar()
					}
				}
			}
			if ex == nil || len(ex.GetLabel()) != 1 || ex.GetLabel()[0].GetName() != "trace_id" {
				t.Fatalf("TTFT exemplar %v: want one trace_id label", ex)
			}
			rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
			if rec.TraceID == "" || rec.TraceID != ex.GetLabel()[0].GetValue() {
				t.Fatalf("server recorded trace id %q, exemplar carries %q", rec.TraceID, ex.GetLabel()[0].GetValue())
			}
		})
	}
}
