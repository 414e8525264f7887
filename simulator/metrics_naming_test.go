package simulator

import (
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestMetricsNamings drives the same requests through every naming and
// checks the names each real server uses carry the engine's counts.
func TestMetricsNamings(t *testing.T) {
	cases := map[string][]string{
		NamingVLLM: {
			`vllm:num_requests_running{engine="0",model_name="sim-llm"} 0`,
			`vllm:prompt_tokens_total{engine="0",model_name="sim-llm"} 14`,
			`vllm:generation_tokens_total{engine="0",model_name="sim-llm"} 9`,
			`vllm:request_success_total{engine="0",finished_reason="length",model_name="sim-llm"} 2`,
			`vllm:request_success_total{engine="0",finished_reason="abort",model_name="sim-llm"} 1`,
			`vllm:request_success_total{engine="0",finished_reason="repetition",model_name="sim-llm"} 0`,
			`vllm:num_requests_waiting_by_reason{engine="0",model_name="sim-llm",reason="capacity"} 0`,
			`vllm:num_requests_waiting_by_reason{engine="0",model_name="sim-llm",reason="deferred"} 0`,
		},
		NamingTriton: {
			`nv_inference_request_success{model="sim-llm",version="1"} 2`,
			`nv_inference_request_failure{model="sim-llm",reason="CANCELED",version="1"} 1`,
			`nv_inference_pending_request_count{model="sim-llm",version="1"} 0`,
			`nv_trt_llm_request_metrics{model="sim-llm",request_type="active",version="1"} 0`,
			`nv_trt_llm_request_metrics{model="sim-llm",request_type="max",version="1"} 4`,
			`nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="sim-llm",version="1"} 128`,
			`nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="sim-llm",version="1"} 0`,
			`nv_llm_input_token_len_sum{model="sim-llm",response_metric_type="total_input_tokens",version="1"} 14`,
			`nv_llm_output_token_len_sum{model="sim-llm",response_metric_type="total_output_tokens",version="1"} 9`,
			`nv_inference_queue_duration_us{model="sim-llm",version="1"}`,
			`nv_inference_compute_infer_duration_us{model="sim-llm",version="1"}`,
			`nv_inference_compute_input_duration_us{model="sim-llm",version="1"} 0`,
			`nv_inference_first_response_histogram_ms_count{model="sim-llm",version="1"} 3`,
		},
		NamingTGI: {
			`tgi_queue_size 0`,
			`tgi_batch_current_size 0`,
			`tgi_batch_max_total_tokens 4096`,
			`tgi_request_count 3`,
			`tgi_request_success 2`,
			`tgi_request_failure{err="incomplete"} 1`,
			`tgi_request_input_length_sum 14`,
			`tgi_request_generated_tokens_sum 9`,
			`tgi_request_queue_duration_count 3`,
		},
		NamingSGLang: {
			`sglang:num_running_reqs{engine_type="unified",model_name="sim-llm",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0`,
			`sglang:max_total_num_tokens{engine_type="unified",model_name="sim-llm",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 4096`,
			`sglang:num_requests_total{engine_type="unified",model_name="sim-llm"} 3`,
			`sglang:num_aborted_requests_total{engine_type="unified",model_name="sim-llm"} 1`,
			`sglang:prompt_tokens_total{engine_type="unified",model_name="sim-llm"} 14`,
			`sglang:generation_tokens_total{engine_type="unified",model_name="sim-llm"} 9`,
			`sglang:time_to_first_token_seconds_count{engine_type="unified",model_name="sim-llm"} 3`,
			`sglang:inter_token_latency_seconds_count{engine_type="unified",model_name="sim-llm"} 6`,
		},
		// trtllm-serve counts only the two requests that finished with a
		// reason; the truncated one is nowhere.
		NamingTRTLLM: {
			`trtllm_num_requests_running{engine_type="trtllm",model_name="sim-llm"} 0`,
			`trtllm_num_requests_waiting{engine_type="trtllm",model_name="sim-llm"} 0`,
			`trtllm_kv_cache_max_blocks{engine_type="trtllm",model_name="sim-llm"} 128`,
			`trtllm_request_success_total{engine_type="trtllm",finished_reason="length",model_name="sim-llm"} 2`,
			`trtllm_generation_tokens_total{engine_type="trtllm",model_name="sim-llm"} 8`,
			`trtllm_request_queue_time_seconds_count{engine_type="trtllm",model_name="sim-llm"} 2`,
			`trtllm_e2e_request_latency_seconds_count{engine_type="trtllm",model_name="sim-llm"} 2`,
		},
	}
	for naming, wants := range cases {
		t.Run(naming, func(t *testing.T) {
			cfg := fastConfig()
			cfg.Metrics.Naming = naming
			cfg.Scheduler.MaxRunning = 4
			cfg.Scheduler.KVCacheCapacityTokens = 4096
			ts := startServer(t, cfg)
			for range 2 {
				resp := ts.post(t, "/v1/chat/completions", chatBody(4, map[string]any{"ignore_eos": true}))
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			resp := ts.post(t, "/v1/completions", completionBody(4, map[string]any{"ignore_eos": true}), HeaderFault, "truncate:after=1")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()

			mfs, err := ts.srv.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				if p.Text == "metric names should not contain ':'" {
					continue // the servers' own names, as on the real ones
				}
				// TGI and Triton name counters without _total and Triton
				// puts units in the name (_us, _ms); they do on the real
				// servers too, and copying them is the point.
				if naming == NamingTGI || naming == NamingTriton {
					continue
				}
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
			code, body := ts.get(t, "/metrics")
			if code != 200 {
				t.Fatalf("/metrics: %d", code)
			}
			text := string(body)
			for _, w := range wants {
				if !strings.Contains(text, w) {
					t.Errorf("/metrics lacks %s", w)
				}
			}
			// trtllm-serve's exposition is at /prometheus/metrics; the
			// other servers have no such route.
			code, other := ts.get(t, "/prometheus/metrics")
			if naming == NamingTRTLLM {
				if code != 200 || !strings.Contains(string(other), wants[0]) {
					t.Errorf("/prometheus/metrics: %d, lacks %s", code, wants[0])
				}
				if strings.Contains(text, `finished_reason="abort"`) {
					t.Errorf("trtllm counted the truncated request")
				}
			} else if code == 200 {
				t.Errorf("/prometheus/metrics answers 200 for naming %s", naming)
			}
		})
	}
}

func TestMetricsNamingValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Metrics.Naming = "nim"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "metrics.naming: unknown naming \"nim\"") {
		t.Fatalf("Validate = %v", err)
	}
	cfg.Metrics.Naming = ""
	if err := cfg.Validate(); err != nil {
		t.Fatalf("empty naming (vLLM) rejected: %v", err)
	}
}
