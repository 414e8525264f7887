package collector

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// norm normalises text and renders "out{extra,model} value" lines, sorted.
func norm(t *testing.T, kind, text string, openMetrics bool) (string, []string) {
	t.Helper()
	res, err := newNormaliser().normalise([]byte(text), openMetrics, kind)
	if err != nil {
		t.Fatalf("normalise: %v", err)
	}
	var lines []string
	for _, s := range res.samples {
		lines = append(lines, s.out+"{"+s.extra+","+s.model+"} "+trimFloat(s.value))
	}
	sort.Strings(lines)
	return res.kind, lines
}

func trimFloat(v float64) string { return strconvG(v) }

func has(t *testing.T, lines []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, l := range lines {
			if l == w {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %q in\n%s", w, strings.Join(lines, "\n"))
		}
	}
}

func hasNo(t *testing.T, lines []string, prefix string) {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			t.Errorf("unexpected %q", l)
		}
	}
}

func TestNormaliseVLLMRenameAndAggregation(t *testing.T) {
	// Two models, model a on two data-parallel engines: counts add up per
	// model, KV usage is the fullest engine's; both KV names present (as
	// on vLLM 0.9.2–0.11) and the new one wins.
	text := `
vllm:num_requests_running{engine="0",model_name="a"} 3
vllm:num_requests_running{engine="1",model_name="a"} 4
vllm:num_requests_running{engine="0",model_name="b"} 1
vllm:num_requests_waiting{engine="0",model_name="a"} 2
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.75
vllm:gpu_cache_usage_perc{engine="0",model_name="a"} 0.99
vllm:gpu_cache_usage_perc{engine="0",model_name="b"} 0.5
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="a"} 10
vllm:request_success_total{engine="0",finished_reason="length",model_name="a"} 5
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="a"} 1
vllm:request_success_total{engine="0",finished_reason="abort",model_name="a"} 2
vllm:request_success_total{engine="0",finished_reason="error",model_name="a"} 1
`
	kind, lines := norm(t, KindAuto, text, false)
	if kind != KindVLLM {
		t.Fatalf("kind %q", kind)
	}
	has(t, lines,
		"llm_server_requests_running{,a} 7",
		"llm_server_requests_running{,b} 1",
		"llm_server_requests_waiting{,a} 2",
		"llm_server_kv_cache_usage_ratio{,a} 0.75",
		// b only has the old name: the rename row supplies it.
		"llm_server_kv_cache_usage_ratio{,b} 0.5",
		// repetition is a success, and its own finish reason.
		"llm_server_requests_total{success,a} 16",
		"llm_server_requests_total{failure,a} 3",
		"llm_server_requests_finished_total{repetition,a} 1",
		"llm_server_requests_finished_total{stop,a} 10",
	)
	if len(lines) != 12 {
		t.Errorf("got %d series:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

func TestNormaliseVLLMPhases(t *testing.T) {
	text := `
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",model_name="a",le="+Inf"} 4
vllm:request_queue_time_seconds_sum{engine="0",model_name="a"} 2
vllm:request_queue_time_seconds_count{engine="0",model_name="a"} 4
vllm:request_queue_time_seconds_bucket{engine="1",model_name="a",le="+Inf"} 1
vllm:request_queue_time_seconds_sum{engine="1",model_name="a"} 0.5
vllm:request_queue_time_seconds_count{engine="1",model_name="a"} 1
vllm:request_prefill_time_seconds_sum{model_name="a"} 1.5
vllm:request_prefill_time_seconds_count{model_name="a"} 3
`
	// The prefill histogram has no TYPE line: its _sum and _count parse as
	// untyped families and are still read.
	_, lines := norm(t, KindVLLM, text, false)
	has(t, lines,
		"llm_server_phase_seconds_total{queue,a} 2.5",
		"llm_server_phase_requests_total{queue,a} 5",
		"llm_server_phase_seconds_total{prefill,a} 1.5",
		"llm_server_phase_requests_total{prefill,a} 3",
	)
}

func TestNormaliseTriton(t *testing.T) {
	base := `
nv_inference_request_success{model="ensemble",version="1"} 10
nv_inference_request_success{model="tensorrt_llm",version="1"} 10
nv_inference_request_failure{model="ensemble",reason="REJECTED",version="1"} 1
nv_inference_request_failure{model="ensemble",reason="BACKEND",version="1"} 2
nv_inference_pending_request_count{model="ensemble",version="1"} 5
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 0
nv_inference_queue_duration_us{model="ensemble",version="1"} 2000000
nv_inference_compute_input_duration_us{model="ensemble",version="1"} 1000000
nv_inference_compute_infer_duration_us{model="ensemble",version="1"} 3000000
nv_inference_compute_output_duration_us{model="ensemble",version="1"} 500000
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 3
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 8
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 6
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 1000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 250
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 750
`
	t.Run("blocks without fraction", func(t *testing.T) {
		_, lines := norm(t, KindAuto, base, false)
		has(t, lines,
			// TRT-LLM's own queue for its model, Triton's for the ensemble.
			"llm_server_requests_waiting{,tensorrt_llm} 3",
			"llm_server_requests_waiting{,ensemble} 5",
			"llm_server_requests_running{,tensorrt_llm} 8",
			"llm_server_batch_size{,tensorrt_llm} 6",
			"llm_server_kv_cache_usage_ratio{,tensorrt_llm} 0.25",
			"llm_server_requests_total{success,ensemble} 10",
			"llm_server_requests_total{failure,ensemble} 3",
			"llm_server_phase_seconds_total{queue,ensemble} 2",
			"llm_server_phase_seconds_total{compute,ensemble} 4.5",
			"llm_server_phase_seconds_total{compute_input,ensemble} 1",
			"llm_server_phase_seconds_total{compute_infer,ensemble} 3",
			"llm_server_phase_seconds_total{compute_output,ensemble} 0.5",
			"llm_server_phase_requests_total{compute,ensemble} 10",
		)
	})
	t.Run("fraction wins", func(t *testing.T) {
		_, lines := norm(t, KindTriton, base+`nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.3`+"\n", false)
		has(t, lines, "llm_server_kv_cache_usage_ratio{,tensorrt_llm} 0.3")
	})
	t.Run("zero max blocks gives no ratio", func(t *testing.T) {
		text := strings.Replace(base, `"max",model="tensorrt_llm",version="1"} 1000`, `"max",model="tensorrt_llm",version="1"} 0`, 1)
		_, lines := norm(t, KindTriton, text, false)
		hasNo(t, lines, "llm_server_kv_cache_usage_ratio")
	})
	t.Run("vLLM backend inside Triton", func(t *testing.T) {
		text := `
nv_inference_request_success{model="vllm_model",version="1"} 2
vllm:prompt_tokens_total{model="vllm_model",version="1"} 40
vllm:generation_tokens_total{model="vllm_model",version="1"} 90
`
		kind, lines := norm(t, KindAuto, text, false)
		if kind != KindTriton {
			t.Fatalf("kind %q, want triton (its vLLM backend also has vllm: names)", kind)
		}
		has(t, lines, "llm_server_prompt_tokens_total{,vllm_model} 40", "llm_server_generation_tokens_total{,vllm_model} 90")
	})
	t.Run("vLLM backend: Triton's pending count is not the queue", func(t *testing.T) {
		// The vLLM backend returns from execute() at once: pending stays 0
		// while vLLM queues. The model with vllm:* series has no waiting
		// series; another model keeps Triton's count, and a TRT-LLM
		// waiting gauge would still win.
		text := `
nv_inference_pending_request_count{model="vllm_model",version="1"} 0
nv_inference_pending_request_count{model="other",version="1"} 2
vllm:prompt_tokens_total{model="vllm_model",version="1"} 40
`
		_, lines := norm(t, KindTriton, text, false)
		has(t, lines, "llm_server_requests_waiting{,other} 2")
		hasNo(t, lines, "llm_server_requests_waiting{,vllm_model}")
		_, lines = norm(t, KindTriton, text+`nv_trt_llm_request_metrics{model="vllm_model",request_type="waiting",version="1"} 3`+"\n", false)
		has(t, lines, "llm_server_requests_waiting{,vllm_model} 3")
	})
}

func TestNormaliseTGITotalSuffix(t *testing.T) {
	text := `
# TYPE tgi_request_success_total counter
tgi_request_success_total 7
# TYPE tgi_request_failure_total counter
tgi_request_failure_total{err="validation"} 1
tgi_request_failure_total{err="overloaded"} 2
tgi_batch_current_max_tokens 500
tgi_batch_max_total_tokens 2000
tgi_queue_size 4
`
	kind, lines := norm(t, KindAuto, text, false)
	if kind != KindTGI {
		t.Fatalf("kind %q", kind)
	}
	has(t, lines,
		"llm_server_requests_total{success,} 7",
		"llm_server_requests_total{failure,} 3",
		"llm_server_kv_cache_usage_ratio{,} 0.25",
		"llm_server_requests_waiting{,} 4",
	)
}

func TestNormaliseSGLangRanks(t *testing.T) {
	// Two data-parallel ranks, each a TP group of two: rank-0 gauges of
	// each DP rank add up, tp_rank 1 duplicates are ignored.
	text := `
sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="0"} 3
sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="1"} 3
sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="0"} 2
sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="1"} 2
sglang:num_used_tokens{dp_rank="0",model_name="m",tp_rank="0"} 100
sglang:num_used_tokens{dp_rank="1",model_name="m",tp_rank="0"} 300
sglang:max_total_num_tokens{dp_rank="0",model_name="m",tp_rank="0"} 1000
sglang:max_total_num_tokens{dp_rank="1",model_name="m",tp_rank="0"} 1000
sglang:num_requests_total{model_name="m"} 20
sglang:num_aborted_requests_total{model_name="m"} 4
`
	_, lines := norm(t, KindSGLang, text, false)
	has(t, lines,
		"llm_server_requests_running{,m} 5",
		// No token_usage: derived from used / capacity over the DP ranks.
		"llm_server_kv_cache_usage_ratio{,m} 0.2",
		// Finished requests as counted; no success or failure from the
		// abort counter, which counts abort calls, not requests.
		"llm_server_requests_finished_total{all,m} 20",
	)
	hasNo(t, lines, "llm_server_requests_total")
}

func TestNormaliseOpenMetrics(t *testing.T) {
	// What prometheus_client sends when asked for OpenMetrics: counters
	// named without _total in TYPE, _created series, exemplars, float
	// timestamps, UNIT lines, an info type and # EOF; a label value with
	// " # ", braces and an escaped quote must survive.
	text := `# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
# UNIT vllm:prompt_tokens tokens
vllm:prompt_tokens_total{model_name="a # {b} \"c\""} 42.0 1700000000.123 # {trace_id="x"} 1.0 1700000000.1
vllm:prompt_tokens_created{model_name="a # {b} \"c\""} 1.7e+09
# TYPE vllm:cache_config info
vllm:cache_config_info{block_size="16"} 1.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a # {b} \"c\""} 2.0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{le="1.0",model_name="x"} 1.0 # {trace_id="y"} 0.5
vllm:request_queue_time_seconds_bucket{le="+Inf",model_name="x"} 2.0
vllm:request_queue_time_seconds_sum{model_name="x"} 3.0
vllm:request_queue_time_seconds_count{model_name="x"} 2.0
# EOF
`
	_, lines := norm(t, KindAuto, text, true)
	has(t, lines,
		`llm_server_prompt_tokens_total{,a # {b} "c"} 42`,
		`llm_server_requests_running{,a # {b} "c"} 2`,
		"llm_server_phase_seconds_total{queue,x} 3",
		"llm_server_phase_requests_total{queue,x} 2",
	)
}

func TestNormaliseLlamaCPPFixture(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "server_llamacpp.prom"))
	if err != nil {
		t.Fatal(err)
	}
	kind, lines := norm(t, KindAuto, string(b), false)
	if kind != KindLlamaCPP {
		t.Fatalf("kind %q", kind)
	}
	has(t, lines,
		"llm_server_prompt_tokens_total{,} 101",
		"llm_server_generation_tokens_total{,} 66",
		"llm_server_kv_cache_usage_ratio{,} 0.0375977",
		"llm_server_phase_seconds_total{prefill,} 0.109",
		"llm_server_phase_seconds_total{decode,} 0.437",
	)
	hasNo(t, lines, "llm_server_phase_requests_total")
	hasNo(t, lines, "llm_server_requests_total")
}

func TestNormaliseErrors(t *testing.T) {
	cases := []struct {
		name, kind, text, want string
	}{
		{"empty", KindAuto, "", "cannot detect the server kind"},
		{"unknown names", KindAuto, "http_requests_total 3\n", "cannot detect the server kind: no metric names start with nv_inference_"},
		{"garbage", KindAuto, "\x00\x01 not { metrics", "malformed exposition"},
		{"html", KindAuto, "<html><body>login</body></html>\n", "malformed exposition"},
		{"wrong kind", KindTriton, "vllm:num_requests_running{model_name=\"a\"} 1\n", "no triton metrics in the exposition (1 metric families); is the kind right?"},
		{"only NaN", KindVLLM, "vllm:num_requests_running{model_name=\"a\"} NaN\n", "no vllm metrics"},
		{"type clash", KindAuto, "# TYPE vllm:x gauge\n# TYPE vllm:x counter\n", "malformed exposition"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := newNormaliser().normalise([]byte(c.text), false, c.kind)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestNormaliseModelCap(t *testing.T) {
	var b strings.Builder
	for i := range maxServerModels + 10 {
		b.WriteString("vllm:num_requests_running{model_name=\"m" + strconvItoa(i) + "\"} 1\n")
	}
	res, err := newNormaliser().normalise([]byte(b.String()), false, KindVLLM)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.samples) != maxServerModels || res.droppedModels != 10 {
		t.Fatalf("%d samples, %d dropped", len(res.samples), res.droppedModels)
	}
}

// TestServerRulesConsistent keeps the table honest: every row's output is
// known, an extra label value is set exactly when the output has that
// label, combinations have the sources they need, and every kind has rows.
func TestServerRulesConsistent(t *testing.T) {
	outs := map[string]serverOutput{}
	for _, o := range serverOutputs() {
		outs[o.name] = o
	}
	kinds := map[string]int{}
	for i, r := range serverRules() {
		o, ok := outs[r.out]
		if !ok {
			t.Errorf("row %d: unknown output %q", i, r.out)
		}
		if (o.extra == "") != (r.extraValue == "") {
			t.Errorf("row %d (%s %s): extra label value %q for extra label %q", i, r.kind, r.out, r.extraValue, o.extra)
		}
		switch r.combine {
		case combineOne:
			if len(r.sources) != 1 {
				t.Errorf("row %d: %d sources for a single-source row", i, len(r.sources))
			}
		case combineRatio:
			if len(r.sources) != 2 {
				t.Errorf("row %d: ratio needs 2 sources", i)
			}
		default:
			if len(r.sources) < 2 {
				t.Errorf("row %d: %s needs 2 or more sources", i, r.combine)
			}
		}
		kinds[r.kind]++
	}
	for _, k := range []string{KindVLLM, KindTriton, KindTGI, KindSGLang, KindLlamaCPP, KindTRTLLM} {
		if kinds[k] == 0 {
			t.Errorf("no rows for %s", k)
		}
	}
}

func TestNormalisePrefixCache(t *testing.T) {
	// vLLM: model a on two engines with the current names (summed),
	// model b on a release before 0.9.2 with the gpu_ names only; where
	// both are present the current name wins.
	text := `
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="a"} 1000
vllm:prefix_cache_queries_total{engine="1",model_name="a"} 500
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="a"} 640
vllm:prefix_cache_hits_total{engine="1",model_name="a"} 320
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="a"} 1
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="b"} 300
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="b"} 100
`
	kind, lines := norm(t, KindAuto, text, false)
	if kind != KindVLLM {
		t.Fatalf("kind %q", kind)
	}
	has(t, lines,
		"llm_server_prefix_cache_queries_total{,a} 1500",
		"llm_server_prefix_cache_hits_total{,a} 960",
		"llm_server_prefix_cache_queries_total{,b} 300",
		"llm_server_prefix_cache_hits_total{,b} 100",
	)
	if len(lines) != 4 {
		t.Errorf("got %d series:\n%s", len(lines), strings.Join(lines, "\n"))
	}

	// SGLang: cached tokens of the prompt tokens; the hit-rate gauge is
	// not used.
	text = `
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",model_name="m"} 2048
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{engine_type="unified",model_name="m"} 1536
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{engine_type="unified",model_name="m",tp_rank="0",pp_rank="0",moe_ep_rank="0"} 0.75
`
	kind, lines = norm(t, KindAuto, text, false)
	if kind != KindSGLang {
		t.Fatalf("kind %q", kind)
	}
	has(t, lines,
		"llm_server_prefix_cache_queries_total{,m} 2048",
		"llm_server_prefix_cache_hits_total{,m} 1536",
		"llm_server_prompt_tokens_total{,m} 2048",
	)
	if len(lines) != 3 {
		t.Errorf("got %d series:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
