package collector

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// A server that answers one probe with usage 2^63-1 after two chunks must
// not freeze the token counters: later probes still add to them
// (issue 27, item 9).
func TestHostileUsageDoesNotFreezeCounters(t *testing.T) {
	if numUsageFields != len(probe.UsageFields()) {
		t.Fatalf("numUsageFields %d, probe has %d fields", numUsageFields, len(probe.UsageFields()))
	}
	var calls int
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls++
		n := 3
		if calls == 1 {
			n = math.MaxInt64
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{"a", "b"} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", c)
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", n, n)
	}))
	defer ts.Close()
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "t", URL: ts.URL, Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	if n, err := testutil.GatherAndCount(reg, "llm_probe_server_usage_invalid_total"); err != nil || n != 0 {
		t.Fatalf("%d usage-invalid series before any (err %v), want none", n, err)
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r := d.Probe(ctx, &probe.Request{Prompt: "hi", MaxTokens: 8, Stream: true})
		cancel()
		if r.Outcome != probe.OutcomeSuccess {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		pm.Observe("t", "p", r)
	}
	// 2 chunks counted for the first answer, the server's 3 for the second;
	// input: the second's 3 only.
	want := `
# HELP llm_probe_input_tokens_total Input (prompt) tokens of probe requests, as counted by the server where it reports them.
# TYPE llm_probe_input_tokens_total counter
llm_probe_input_tokens_total{model="m",probe="p",target="t"} 3
# HELP llm_probe_output_tokens_total Output tokens received by probe requests, the server's count where it reports one, else counted from chunks.
# TYPE llm_probe_output_tokens_total counter
llm_probe_output_tokens_total{model="m",probe="p",target="t"} 5
# HELP llm_probe_server_usage_invalid_total Token counts a server reported for a probe request that were implausible for what arrived (over 2^24, over max_tokens x 4 per choice, over 65536 per chunk received, or over 1e8 tokens/s) and so were not counted, by field; a dropped output count is replaced by the chunks counted.
# TYPE llm_probe_server_usage_invalid_total counter
llm_probe_server_usage_invalid_total{field="input_tokens",model="m",probe="p",target="t"} 1
llm_probe_server_usage_invalid_total{field="output_tokens",model="m",probe="p",target="t"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"llm_probe_input_tokens_total", "llm_probe_output_tokens_total", "llm_probe_server_usage_invalid_total"); err != nil {
		t.Error(err)
	}
	// Sanity of the tokens/s histogram: its sum is bounded by what the two
	// answers could carry at 1e8 tokens/s, never 2^63 over their time.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "llm_probe_output_tokens_per_second" {
			if sum := mf.GetMetric()[0].GetHistogram().GetSampleSum(); sum <= 0 || sum > 2e8 {
				t.Errorf("tokens/s sum %g", sum)
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	pm.Remove("t", "p")
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_server_usage_invalid_total"); n != 0 {
		t.Errorf("%d usage-invalid series after the probe was removed", n)
	}
}
