package probe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

var pooledProtocols = []string{probe.ProtocolOpenAIEmbeddings, probe.ProtocolOllamaEmbed, probe.ProtocolTEIEmbed,
	probe.ProtocolOpenAIRerank, probe.ProtocolTEIRerank}

func pooledSim(t *testing.T) (*simtest.Sim, simulator.Config) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 20 * time.Millisecond
	cfg.Latency.PrefillPerToken = 2 * time.Millisecond
	cfg.Latency.Jitter = 0
	return simtest.Start(t, cfg), cfg
}

func pooledProbe(t *testing.T, protocol string, opts probe.TargetOptions, prompt string) *probe.Result {
	t.Helper()
	d, err := probe.NewDriver(protocol, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.Probe(ctx, &probe.Request{ID: "pooled-" + protocol + "-" + strings.ReplaceAll(t.Name(), "/", "-"), Prompt: prompt})
}

// TestPooledAgainstSimulator: every embedding and rerank protocol
// succeeds, reports the simulator's input-token count (its ground truth:
// words of the query and every text), the vectors' dimension or the
// result count, and a latency no shorter than the simulator's model of
// it (base + per-token × tokens). The reranker puts the lighthouse
// document first.
func TestPooledAgainstSimulator(t *testing.T) {
	sim, cfg := pooledSim(t)
	const prompt = "Write a short story about a lighthouse keeper."
	for _, proto := range pooledProtocols {
		t.Run(proto, func(t *testing.T) {
			opts := probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
				Pooling: probe.PoolingOptions{Inputs: 3, Dimension: simulator.DefaultEmbeddingDimension}}
			res := pooledProbe(t, proto, opts, prompt)
			if res.Outcome != probe.OutcomeSuccess {
				t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
			}
			truth := simtest.GroundTruth(t, sim.URL, res.RequestID)
			if res.InputTokens != truth.PromptTokens || res.InputTokensSource != probe.TokenSourceServer {
				t.Errorf("input tokens %d (%s), ground truth %d", res.InputTokens, res.InputTokensSource, truth.PromptTokens)
			}
			floor := cfg.Latency.TTFTBase + time.Duration(truth.PromptTokens)*cfg.Latency.PrefillPerToken
			if res.EndToEnd < floor || res.Streamed || res.TTFT != 0 || res.OutputTokens != 0 {
				t.Errorf("e2e %v (model floor %v), streamed %t, ttft %v, output %d", res.EndToEnd, floor, res.Streamed, res.TTFT, res.OutputTokens)
			}
			if !res.Phases.HasFirstByte || res.Pooled == nil {
				t.Fatalf("phases %+v, pooled %+v", res.Phases, res.Pooled)
			}
			if strings.HasSuffix(proto, "_rerank") {
				if res.Pooled.Items != len(probe.DefaultRerankDocuments()) || res.Pooled.Top != 0 || res.Pooled.Dimension != 0 {
					t.Errorf("rerank answer %+v", res.Pooled)
				}
			} else if res.Pooled.Items != 3 || res.Pooled.Dimension != simulator.DefaultEmbeddingDimension {
				t.Errorf("embedding answer %+v", res.Pooled)
			}
		})
	}
}

// TestPooledWrongAnswers: each simulated fault ends as wrong_answer with
// an error that says what was wrong; an HTTP error stays an HTTP error.
func TestPooledWrongAnswers(t *testing.T) {
	sim, cfg := pooledSim(t)
	cases := []struct {
		fault, want string
		embed, rank bool
	}{
		{"nan", "finite", true, true},
		{"empty", "empty", true, false},
		{"empty", "0 results", false, true},
		{"short", "dimension", true, false},
		{"count", "vectors for 3 inputs", true, false},
		{"count", "results for 3 documents", false, true},
		{"dup", "twice", false, true},
		{"zero", "all zeros", true, false},
	}
	for _, proto := range pooledProtocols {
		rerank := strings.HasSuffix(proto, "_rerank")
		for _, c := range cases {
			if rerank && !c.rank || !rerank && !c.embed {
				continue
			}
			if c.fault == "dup" && proto != probe.ProtocolOpenAIEmbeddings && !rerank {
				continue // only OpenAI's answer numbers its vectors
			}
			t.Run(proto+"/"+c.fault, func(t *testing.T) {
				opts := probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
					Headers: map[string]string{simulator.HeaderPooledFault: c.fault}, Pooling: probe.PoolingOptions{Inputs: 3}}
				res := pooledProbe(t, proto, opts, "a lighthouse keeper")
				if res.Outcome != probe.OutcomeWrongAnswer || res.Err == nil || !strings.Contains(res.Err.Error(), c.want) {
					t.Errorf("outcome %s (%v), want wrong_answer mentioning %q", res.Outcome, res.Err, c.want)
				}
			})
		}
		t.Run(proto+"/error", func(t *testing.T) {
			opts := probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
				Headers: map[string]string{simulator.HeaderPooledFault: "error"}}
			if res := pooledProbe(t, proto, opts, "x"); res.Outcome != probe.OutcomeHTTP5xx {
				t.Errorf("outcome %s (%v), want http_5xx", res.Outcome, res.Err)
			}
		})
	}
}

// TestPooledExpectations: the configured dimension and expected top
// document are checked.
func TestPooledExpectations(t *testing.T) {
	sim, cfg := pooledSim(t)
	opts := probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
		Pooling: probe.PoolingOptions{Dimension: 768}}
	res := pooledProbe(t, probe.ProtocolOpenAIEmbeddings, opts, "hello")
	if res.Outcome != probe.OutcomeWrongAnswer || !strings.Contains(res.Err.Error(), "dimension 384, the target's embedding.dimension is 768") {
		t.Errorf("outcome %s (%v)", res.Outcome, res.Err)
	}
	top := 2
	opts.Pooling = probe.PoolingOptions{ExpectTop: &top}
	res = pooledProbe(t, probe.ProtocolTEIRerank, opts, "a lighthouse keeper")
	if res.Outcome != probe.OutcomeWrongAnswer || !strings.Contains(res.Err.Error(), "document 0 ranked first, expected document 2") {
		t.Errorf("outcome %s (%v)", res.Outcome, res.Err)
	}
	opts.Model = "no-such-model"
	if res := pooledProbe(t, probe.ProtocolOpenAIRerank, opts, "x"); res.Outcome != probe.OutcomeHTTP4xx {
		t.Errorf("unknown model: outcome %s (%v)", res.Outcome, res.Err)
	}
}

// FuzzPooledAnswers: no answer body makes a pooling driver panic, and
// every outcome is one of its protocol's.
func FuzzPooledAnswers(f *testing.F) {
	for _, seed := range []string{
		`{"data":[{"index":0,"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":3}}`,
		`{"data":[{"index":0,"embedding":[NaN,0.2]}]}`,
		`{"data":[{"index":5,"embedding":[null]}]}`,
		`{"embeddings":[[1,2],[3]],"prompt_eval_count":-4}`,
		`[[0.5,0.5]]`, `[[]]`, `[]`, `null`, `{}`, `"NaN"`, `{"error":"boom"}`,
		`{"results":[{"index":0,"relevance_score":0.9},{"index":0,"relevance_score":0.1}],"usage":{"total_tokens":9}}`,
		`[{"index":2,"score":Infinity}]`, `[{"index":0}]`, `{"results":[{"index":-1,"relevance_score":1e400}]}`,
	} {
		f.Add(seed)
	}
	var current atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Compute-Tokens", "12")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(*current.Load()))
	}))
	f.Cleanup(srv.Close)
	url := srv.URL
	f.Fuzz(func(t *testing.T, body string) {
		current.Store(&body)
		for _, proto := range pooledProtocols {
			p, _ := probe.LookupProtocol(proto)
			res := pooledProbe(t, proto, probe.TargetOptions{Name: "fuzz", URL: url, Model: "m",
				Pooling: probe.PoolingOptions{Inputs: 1}}, "q")
			if res == nil || !containsOutcome(p.Outcomes, res.Outcome) {
				t.Fatalf("%s: body %q: outcome %v", proto, body, res)
			}
			if res.Outcome == probe.OutcomeSuccess && res.Pooled == nil {
				t.Fatalf("%s: success without an answer description", proto)
			}
		}
	})
}

func containsOutcome(list []probe.Outcome, o probe.Outcome) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}
