package collector

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-prober/llm-prober/probe"
)

// wantHist is what one normalised histogram must hold: count, sum,
// the number of finite boundaries and some cumulative bucket counts.
type wantHist struct {
	out, model string
	count      uint64
	sum        float64
	bounds     int
	at         map[float64]uint64
}

func checkHists(t *testing.T, got []serverHistogram, want []wantHist) {
	t.Helper()
	if len(got) != len(want) {
		var names []string
		for _, h := range got {
			names = append(names, h.out+"{"+h.model+"}")
		}
		t.Errorf("%d histograms, want %d: %v", len(got), len(want), names)
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(h serverHistogram) bool { return h.out == w.out && h.model == w.model })
		if i < 0 {
			t.Errorf("no %s{model=%q}", w.out, w.model)
			continue
		}
		h := got[i]
		if h.count != w.count || math.Abs(h.sum-w.sum) > 1e-9 || len(h.buckets) != w.bounds {
			t.Errorf("%s{%s}: count %d sum %g, %d bounds; want %d, %g, %d", w.out, w.model, h.count, h.sum, len(h.buckets), w.count, w.sum, w.bounds)
		}
		for le, c := range w.at {
			if got, ok := h.buckets[le]; !ok || got != c {
				t.Errorf("%s{%s} le=%g: %d (present %v), want %d", w.out, w.model, le, got, ok, c)
			}
		}
	}
}

func normaliseFile(t *testing.T, name, kind string) normalisation {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	res, err := newNormaliser().normalise(b, false, kind)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// TestLatencyHistograms reads each kind's histograms from an exposition in
// the server's own format (prometheus_client for vLLM, SGLang and Triton's
// vLLM backend, Triton core's, TGI's metrics-exporter-prometheus) with the
// upstream bucket layouts of model-servers.md §6.
func TestLatencyHistograms(t *testing.T) {
	t.Run("vllm", func(t *testing.T) {
		// Two engines of one model add up; the model still on the old
		// ITL name (before 0.11) reads it, the current one does not read
		// the old name beside the new.
		res := normaliseFile(t, "servers/vllm-latency.prom", KindAuto)
		if res.kind != KindVLLM {
			t.Fatalf("kind %q", res.kind)
		}
		checkHists(t, res.histograms, []wantHist{
			{serverTTFT, "llama", 5, 0.03 + 0.07 + 0.2 + 0.09 + 1.2, 22, map[float64]uint64{0.04: 1, 0.08: 2, 0.1: 3, 1.0: 4, 2.5: 5, 2560: 5}},
			{serverITL, "llama", 6, 0.02*3 + 0.03 + 0.06 + 0.2, 19, map[float64]uint64{0.025: 3, 0.05: 4, 0.075: 5, 0.2: 6}},
			{serverITL, "old", 3, 0.12, 19, map[float64]uint64{0.05: 3}},
			{serverRequestTPOT, "llama", 2, 0.14, 19, map[float64]uint64{0.05: 1, 0.15: 2}},
			{serverQueueTime, "llama", 3, 2.41, 21, map[float64]uint64{0.3: 1, 0.5: 2, 2.0: 3}},
		})
		_, lines := norm(t, KindVLLM, mustRead(t, "servers/vllm-latency.prom"), false)
		has(t, lines,
			"llm_server_preemptions_total{,llama} 7",
			"llm_server_spec_decode_draft_tokens_total{,llama} 400",
			"llm_server_spec_decode_accepted_tokens_total{,llama} 250",
		)
	})
	t.Run("sglang", func(t *testing.T) {
		// Retractions are counted by every TP rank alike: rank 0 only.
		res := normaliseFile(t, "servers/sglang-latency.prom", KindAuto)
		if res.kind != KindSGLang {
			t.Fatalf("kind %q", res.kind)
		}
		checkHists(t, res.histograms, []wantHist{
			{serverTTFT, "qwen", 4, 3.3, 18, map[float64]uint64{0.2: 1, 0.4: 3, 4: 4}},
			{serverITL, "qwen", 3, 0.032, 23, map[float64]uint64{0.01: 1, 0.015: 3}},
			{serverQueueTime, "qwen", 4, 0.65, 16, map[float64]uint64{0: 1, 0.1: 2, 0.5: 4}},
		})
		_, lines := norm(t, KindSGLang, mustRead(t, "servers/sglang-latency.prom"), false)
		has(t, lines, "llm_server_preemptions_total{,qwen} 5")
	})
	t.Run("triton", func(t *testing.T) {
		// Milliseconds become seconds, exactly; versions of a model add
		// up; the vLLM backend's histograms (labelled model) are read.
		res := normaliseFile(t, "servers/triton-latency.prom", KindAuto)
		if res.kind != KindTriton {
			t.Fatalf("kind %q", res.kind)
		}
		checkHists(t, res.histograms, []wantHist{
			{serverTTFT, "ensemble", 3, 3.53, 4, map[float64]uint64{0.1: 1, 0.5: 2, 2: 2, 5: 3}},
			{serverTTFT, "tensorrt_llm", 4, 3.05, 4, map[float64]uint64{0.1: 2, 0.5: 3, 5: 4}},
			{serverTTFT, "vllm_model", 2, 0.35, 16, map[float64]uint64{0.06: 1, 0.5: 2}},
			{serverITL, "vllm_model", 3, 0.08, 13, map[float64]uint64{0.025: 2, 0.05: 3}},
		})
	})
	t.Run("tgi", func(t *testing.T) {
		// No TTFT; the per-request mean time per token is the request
		// TPOT, not the per-gap ITL.
		res := normaliseFile(t, "servers/tgi-latency.prom", KindAuto)
		if res.kind != KindTGI {
			t.Fatalf("kind %q", res.kind)
		}
		checkHists(t, res.histograms, []wantHist{
			{serverQueueTime, "", 3, 0.0224, 35, nil},
			{serverRequestTPOT, "", 3, 0.049, 35, nil},
		})
	})
	t.Run("trtllm", func(t *testing.T) {
		// trtllm-serve's TPOT histogram is one observation per request;
		// spec-decode counters are summed over token_position.
		res := normaliseFile(t, "servers/trtllm-2026.prom", KindAuto)
		if res.kind != KindTRTLLM {
			t.Fatalf("kind %q", res.kind)
		}
		checkHists(t, res.histograms, []wantHist{
			{serverTTFT, "nemotron-nano-3", 44, 3.5, 3, map[float64]uint64{0.01: 0, 0.1: 30, 1: 44}},
			{serverRequestTPOT, "nemotron-nano-3", 44, 0.66, 2, map[float64]uint64{0.01: 10, 0.025: 44}},
			{serverQueueTime, "nemotron-nano-3", 44, 2.2, 2, map[float64]uint64{0.3: 42, 1: 44}},
		})
	})
	t.Run("llamacpp", func(t *testing.T) {
		res := normaliseFile(t, "servers/llamacpp-latency.prom", KindAuto)
		if res.kind != KindLlamaCPP || len(res.histograms) != 0 {
			t.Fatalf("kind %q, %d histograms: llama.cpp exports none", res.kind, len(res.histograms))
		}
		_, lines := norm(t, KindLlamaCPP, mustRead(t, "servers/llamacpp-latency.prom"), false)
		has(t, lines,
			"llm_server_spec_decode_draft_tokens_total{,} 1000",
			"llm_server_spec_decode_accepted_tokens_total{,} 640",
		)
	})
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLatencyHistogramBoundaries: series of one model whose boundaries
// differ merge on the boundaries they share, with exact count and sum;
// a histogram without its TYPE line is not taken for one.
func TestLatencyHistogramBoundaries(t *testing.T) {
	text := `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m",le="0.1"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m",le="0.5"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m",le="1"} 3
vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m",le="+Inf"} 3
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.2
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3
vllm:time_to_first_token_seconds_bucket{engine="1",model_name="m",le="0.25"} 1
vllm:time_to_first_token_seconds_bucket{engine="1",model_name="m",le="0.5"} 1
vllm:time_to_first_token_seconds_bucket{engine="1",model_name="m",le="+Inf"} 2
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.2
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 2
vllm:request_queue_time_seconds_bucket{model_name="m",le="1"} 1
vllm:request_queue_time_seconds_count{model_name="m"} 1
vllm:request_queue_time_seconds_sum{model_name="m"} 1
`
	res, err := newNormaliser().normalise([]byte(text), false, KindVLLM)
	if err != nil {
		t.Fatal(err)
	}
	checkHists(t, res.histograms, []wantHist{
		{serverTTFT, "m", 5, 3.4, 1, map[float64]uint64{0.5: 3}},
	})
}

// TestLatencyHistogramsExported: the histograms reach a registry as
// histograms with the labels of every llm_server_* series, the counters
// as counters.
func TestLatencyHistogramsExported(t *testing.T) {
	c, _, reg := newTestServerMetrics(t)
	body := mustRead(t, "servers/vllm-latency.prom")
	ts := textServer(t, "text/plain; version=0.0.4", func() string { return body })
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: KindVLLM, Timeout: 5 * time.Second}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, f := range fams {
		types[f.GetName()] = f.GetType()
		if f.GetName() != serverTTFT {
			continue
		}
		m := f.GetMetric()[0]
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if got := strings.Join(labels, ","); got != "model=llama,server=vllm,target=t" {
			t.Errorf("labels %s", got)
		}
		if h := m.GetHistogram(); h.GetSampleCount() != 5 || len(h.GetBucket()) != 22 {
			t.Errorf("histogram %v", h)
		}
	}
	for name, want := range map[string]dto.MetricType{
		serverTTFT: dto.MetricType_HISTOGRAM, serverITL: dto.MetricType_HISTOGRAM,
		serverRequestTPOT: dto.MetricType_HISTOGRAM, serverQueueTime: dto.MetricType_HISTOGRAM,
		serverPreemptions: dto.MetricType_COUNTER, serverSpecDraftTokens: dto.MetricType_COUNTER,
		serverSpecAccepted: dto.MetricType_COUNTER,
	} {
		if got, ok := types[name]; !ok || got != want {
			t.Errorf("%s: type %v (exported %v), want %v", name, got, ok, want)
		}
	}
}

// TestLatencyRulesConsistent: every row's output is declared with the
// right type, reads a metric its kind is detected by (Triton's vLLM
// backend aside), and every kind with latency histograms upstream has
// rows.
func TestLatencyRulesConsistent(t *testing.T) {
	hist := map[string]bool{}
	for _, o := range latencyHistogramOutputs() {
		hist[o.name] = true
	}
	counters := map[string]bool{}
	for _, o := range latencyCounterOutputs() {
		if o.typ != prometheus.CounterValue || o.extra != "" {
			t.Errorf("%s: want a counter without extra label", o.name)
		}
		counters[o.name] = true
	}
	attributable := func(kind, metric string) bool {
		for _, k := range ServerKindTable() {
			if k.Name == kind && slices.ContainsFunc(k.Detect, func(p string) bool { return strings.HasPrefix(metric, p) }) {
				return true
			}
		}
		return kind == KindTriton && strings.HasPrefix(metric, "vllm:")
	}
	kinds := map[string]bool{}
	for _, r := range latencyHistogramRules() {
		kinds[r.kind] = true
		if !hist[r.out] || !attributable(r.kind, r.metric) {
			t.Errorf("%s %s ← %s: unknown output or metric not of the kind", r.kind, r.out, r.metric)
		}
	}
	for _, r := range latencyCounterRules() {
		if !counters[r.out] || len(r.sources) != 1 || !attributable(r.kind, r.sources[0].metric) {
			t.Errorf("%s %s: unknown output or bad source", r.kind, r.out)
		}
	}
	for _, k := range []string{KindVLLM, KindSGLang, KindTriton, KindTGI} {
		if !kinds[k] {
			t.Errorf("no latency histograms for %s", k)
		}
	}
}

// FuzzLatencyHistograms: arbitrary histograms never panic, and whatever is
// read is exportable with a bounded model label.
func FuzzLatencyHistograms(f *testing.F) {
	for _, s := range []string{
		"# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"NaN\"} 1\nvllm:time_to_first_token_seconds_count 1\n",
		"# TYPE nv_inference_first_response_histogram_ms histogram\nnv_inference_first_response_histogram_ms_bucket{model=\"m\",le=\"1e308\"} 5\nnv_inference_first_response_histogram_ms_bucket{model=\"m\",le=\"+Inf\"} 1\nnv_inference_first_response_histogram_ms_sum{model=\"m\"} -Inf\n",
		"# TYPE sglang:queue_time_seconds histogram\nsglang:queue_time_seconds_bucket{model_name=\"" + strings.Repeat("é", 200) + "\",le=\"-1\"} 18446744073709551615\n",
		"# TYPE tgi_request_queue_duration histogram\ntgi_request_queue_duration_sum NaN\ntgi_request_queue_duration_count 1\n",
	} {
		f.Add([]byte(s))
	}
	c := NewServerMetrics(nil)
	n := newNormaliser()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, kind := range []string{KindAuto, KindVLLM, KindTriton, KindTGI, KindSGLang} {
			res, err := n.normalise(body, false, kind)
			if err != nil {
				continue
			}
			for _, h := range res.histograms {
				if len(h.model) > probe.MaxModelNameBytes {
					t.Fatalf("model label of %d bytes", len(h.model))
				}
				if _, err := h.constHistogram(c.outputs[h.out], "t", res.kind, h.model); err != nil {
					t.Fatalf("%+v not exportable: %v", h, err)
				}
			}
		}
	})
}
