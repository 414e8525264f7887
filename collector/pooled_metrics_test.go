package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestPooledMetrics: only embedding and rerank probes get series, only
// after a successful answer, and Remove drops them.
func TestPooledMetrics(t *testing.T) {
	m := NewPooledMetrics()
	m.Add("e", "p", "bge", probe.ProtocolOpenAIEmbeddings)
	m.Add("r", "p", "rr", probe.ProtocolTEIRerank)
	m.Add("c", "p", "llm", probe.ProtocolOpenAIChat)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("%d series before any answer", n)
	}
	m.Observe("e", "p", &probe.Result{Outcome: probe.OutcomeWrongAnswer, Pooled: &probe.PooledAnswer{Dimension: 3}})
	m.Observe("e", "p", &probe.Result{Outcome: probe.OutcomeSuccess, Pooled: &probe.PooledAnswer{Items: 2, Dimension: 1024}})
	m.Observe("r", "p", &probe.Result{Outcome: probe.OutcomeSuccess, Pooled: &probe.PooledAnswer{Items: 5, Top: 1}})
	m.Observe("c", "p", &probe.Result{Outcome: probe.OutcomeSuccess, Pooled: &probe.PooledAnswer{Items: 5}})
	want := `
# HELP llm_probe_embedding_dimension Dimension of the vectors of the probe's last successful embedding answer.
# TYPE llm_probe_embedding_dimension gauge
llm_probe_embedding_dimension{model="bge",probe="p",target="e"} 1024
# HELP llm_probe_rerank_results Results of the probe's last successful rerank answer.
# TYPE llm_probe_rerank_results gauge
llm_probe_rerank_results{model="rr",probe="p",target="r"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	m.Add("e", "p", "bge", probe.ProtocolOpenAIEmbeddings) // unchanged: value kept
	m.Remove("r", "p")
	if n := testutil.CollectAndCount(m); n != 1 {
		t.Errorf("%d series after removing one, want 1", n)
	}
	m.Add("e", "p", "other", probe.ProtocolOpenAIEmbeddings) // new model: starts over
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("%d series after a model change, want 0", n)
	}
}
