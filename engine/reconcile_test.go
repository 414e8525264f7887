package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/workload"
)

// recordingSink remembers what the engine told it.
type recordingSink struct {
	mu      sync.Mutex
	added   []string
	removed []string
	results map[string]int
}

func (s *recordingSink) Add(i Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.added = append(s.added, i.Target+"/"+i.Probe+" "+i.Protocol+" "+i.Endpoint)
}

func (s *recordingSink) Remove(target, probeName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, target+"/"+probeName)
}

func (s *recordingSink) Record(target, probeName string, req *probe.Request, res *probe.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.results == nil {
		s.results = map[string]int{}
	}
	if req == nil || res == nil {
		s.results["nil"]++
		return
	}
	s.results[target+"/"+probeName]++
}

func (s *recordingSink) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results[key]
}

func parseConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// twoTargets is a configuration of target a (probes p and q) and target b
// (probe p), all every 50ms; model names target b's model.
func twoTargets(url, model string) string {
	return fmt.Sprintf(`targets:
  - name: a
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    probes:
      - {name: p, schedule: {every: 50ms}}
      - {name: q, schedule: {every: 50ms}}
  - name: b
    protocol: openai_chat
    url: %[1]s
    model: %[2]s
    probes:
      - {name: p, schedule: {every: 50ms}}
workloads:
  default: {max_tokens: 4}
`, url, model)
}

// TestApplyReconciles: a reload keeps what did not change (the same driver,
// so its pooled connections), replaces a changed target's driver, and stops
// a dropped probe, whose series and sink entries go.
func TestApplyReconciles(t *testing.T) {
	url := fastSimulatorURL(t)
	reg := prometheus.NewPedanticRegistry()
	pm := collector.NewProbeMetrics()
	reg.MustRegister(pm)
	sink := &recordingSink{}
	e := New(promslog.NewNopLogger(), pm, sink)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Stop(ctx)
	}()

	e.Apply(parseConfig(t, twoTargets(url, "sim-llm")))
	for _, key := range []string{"a/p", "a/q", "b/p"} {
		testutil.WaitFor(t, key+" to record a result", 10*time.Second, func() bool { return sink.count(key) > 0 })
	}
	e.mu.Lock()
	driverA, driverB := e.targets["a"].driver, e.targets["b"].driver
	e.mu.Unlock()

	// Target a loses probe q; target b's model changes, so b is rebuilt.
	second := parseConfig(t, twoTargets(url, "other-llm"))
	second.Targets[0].Probes = second.Targets[0].Probes[:1]
	e.Apply(second)
	e.mu.Lock()
	if e.targets["a"].driver != driverA {
		t.Error("unchanged target a got a new driver: its pooled connections were dropped")
	}
	if e.targets["b"].driver == driverB {
		t.Error("target b changed but kept its driver")
	}
	if want := map[[2]string]bool{{"a", "p"}: true, {"b", "p"}: true}; len(e.series) != 2 || !e.series[[2]string{"a", "p"}] || !e.series[[2]string{"b", "p"}] {
		t.Errorf("running series %v, want %v", e.series, want)
	}
	e.mu.Unlock()
	sink.mu.Lock()
	if !slices.Equal(sink.removed, []string{"a/q"}) {
		t.Errorf("sink told of removals %v, want [a/q]", sink.removed)
	}
	if len(sink.added) != 5 {
		t.Errorf("sink told of %d probes over two configurations, want 3+2: %v", len(sink.added), sink.added)
	}
	sink.mu.Unlock()

	// q stops: at most one request of it was in flight during the reload.
	before := sink.count("a/q")
	afterP := sink.count("a/p")
	testutil.WaitFor(t, "a/p to keep running", 10*time.Second, func() bool { return sink.count("a/p") >= afterP+3 })
	if got := sink.count("a/q"); got > before+1 {
		t.Errorf("dropped probe a/q recorded %d more results after the reload", got-before)
	}
	if n := sink.count("nil"); n != 0 {
		t.Errorf("%d results reached the sink without their request or result", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var target, probeName string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "target":
					target = l.GetValue()
				case "probe":
					probeName = l.GetValue()
				}
			}
			if target == "a" && probeName == "q" {
				t.Fatalf("%s still has a series of the dropped probe a/q", mf.GetName())
			}
		}
	}
}

// TestSendAppliesProbeSettings: Send asks for the probe's streaming mode
// and bounds the request by the probe's timeout.
func TestSendAppliesProbeSettings(t *testing.T) {
	d := &deadlineDriver{}
	p := &Probe{Target: "t", Name: "p", Model: "m", Stream: false, Timeout: 3 * time.Second, Driver: d,
		Workload: fixedWorkload{}}
	start := time.Now()
	sent := p.Send(context.Background())
	if sent.Result == nil || sent.Request() == nil || sent.Request().Stream {
		t.Fatalf("sent %+v: want a result and a non-streamed request", sent)
	}
	end := time.Now()
	if d.deadline.Before(start.Add(3*time.Second)) || d.deadline.After(end.Add(3*time.Second)) {
		t.Errorf("request deadline %s after start, want the probe's 3s timeout", d.deadline.Sub(start))
	}
	if sent.Request().Model != "m" {
		t.Errorf("request for model %q, want the probe's model m", sent.Request().Model)
	}
}

type deadlineDriver struct{ deadline time.Time }

func (d *deadlineDriver) Probe(ctx context.Context, req *probe.Request) *probe.Result {
	d.deadline, _ = ctx.Deadline()
	return &probe.Result{Outcome: probe.OutcomeSuccess}
}

func (d *deadlineDriver) Close() {}

type fixedWorkload struct{}

func (fixedWorkload) Draw(model string) workload.Draw {
	return workload.Draw{Request: &probe.Request{Model: model, Stream: true, MaxTokens: 4}}
}
