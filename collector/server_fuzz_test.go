package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// FuzzNormalise feeds arbitrary bytes through the path a scrape takes,
// from the body to ConstMetrics, for every kind and both formats: nothing
// may panic and whatever comes out must be exportable.
func FuzzNormalise(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "server_*.prom"))
	upstream, _ := filepath.Glob(filepath.Join("testdata", "servers", "*.prom"))
	for _, name := range append(files, upstream...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	for _, s := range []string{
		"",
		"# EOF\n",
		"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\",model=\"m\"} 1\nnv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"m\"} 0\n",
		"sglang:num_requests_total{model_name=\"\\xff\"} +Inf\nsglang:num_aborted_requests_total{model_name=\"\\xff\"} +Inf\n",
		"vllm:x{a=\"} # {\"} 1 # {t=\"1\"} 2 3\n",
		"# TYPE tgi_request_input_length histogram\ntgi_request_input_length_sum NaN\ntgi_request_input_length_count 1\n",
		"# TYPE x stateset\nx{x=\"a\"} 1\n",
		"{\"vllm:utf8 name\",model_name=\"m\"} 1\n",
		"vllm:num_requests_running{model_name=\"" + strings.Repeat("é", 200) + "\"} 1\n",
		// A model whose vllm:* series only hide Triton's pending count.
		"nv_inference_pending_request_count{model=\"m\"} 3\nvllm:x{model=\"m\"} NaN\n",
		"llamacpp:prompt_tokens_cached_total +Inf\nllamacpp:prompt_tokens_total -Inf\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	c := NewServerMetrics(nil)
	n := newNormaliser()
	kinds := ServerKinds()
	f.Fuzz(func(t *testing.T, body []byte, openMetrics bool) {
		for _, kind := range kinds {
			res, err := n.normalise(body, openMetrics, kind)
			if err != nil {
				continue
			}
			models := map[string]bool{}
			for _, s := range res.samples {
				models[s.model] = true
				if len(s.model) > probe.MaxModelNameBytes {
					t.Fatalf("%s: model label of %d bytes exported", kind, len(s.model))
				}
				labels := []string{"target", res.kind, s.model}
				if s.extra != "" {
					labels = append(labels, s.extra)
				}
				if _, err := prometheus.NewConstMetric(c.outputs[s.out], c.types[s.out], s.value, labels...); err != nil {
					t.Fatalf("%s: sample %+v not exportable: %v", kind, s, err)
				}
			}
			if len(models) > maxServerModels {
				t.Fatalf("%d models", len(models))
			}
		}
	})
}
