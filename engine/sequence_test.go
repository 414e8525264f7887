package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	itestutil "github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// prefixSim is a simulator whose prefill dominates TTFT: 200 µs per
// prompt token, so a 1024-token prefix costs about 205 ms cold.
func prefixSim(t *testing.T, cache bool) *simtest.Sim {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase = 2*time.Millisecond, 200*time.Microsecond
	cfg.Latency.PrefillPerToken = 200 * time.Microsecond
	cfg.PrefixCache.Enabled = cache
	return simtest.Start(t, cfg)
}

// runSequence opens probe probeName of target and sends one whole run of
// it (a session's turns or a shared prefix's requests), as a scheduled
// ticket would.
func runSequence(t *testing.T, cfg *config.Config, target, probeName string) []Step {
	t.Helper()
	tc, pc, err := cfg.Lookup(target, probeName)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(cfg, tc, pc, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	var steps []Step
	for run := p.NewSequence(); !run.Done(ctx); {
		steps = append(steps, run.Next(ctx, nil, time.Time{}))
	}
	return steps
}

// TestSharedPrefixGroundTruth: each request of a shared_prefix run
// carries the run's system prompt; the first finds the simulator's prefix
// cache cold, the later ones warm, and the cached tokens each result
// reports are the simulator's ground truth. Cold TTFT is several times
// warm TTFT with the cache on, and about the same with it off.
func TestSharedPrefixGroundTruth(t *testing.T) {
	for _, cache := range []bool{true, false} {
		t.Run(fmt.Sprintf("cache=%v", cache), func(t *testing.T) {
			sim := prefixSim(t, cache)
			cfg := parseConfig(t, fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - name: prefix
        workload: short
        schedule: {every: 1m}
        shared_prefix: {tokens: 1024, requests: 4}
workloads:
  short: {prompts: {synthetic: {input_tokens: 16}}, max_tokens: 4, ignore_eos: true}
`, sim.URL))
			steps := runSequence(t, cfg, "sim", "prefix")
			if len(steps) != 4 {
				t.Fatalf("%d requests, want 4", len(steps))
			}
			var system string
			var warm time.Duration
			for i, st := range steps {
				res := st.Result
				if res.Outcome != probe.OutcomeSuccess {
					t.Fatalf("request %d: %s %v", i, res.Outcome, res.Err)
				}
				if want := map[bool]string{true: CacheCold, false: CacheWarm}[i == 0]; st.Cache != want {
					t.Errorf("request %d tagged %s, want %s", i, st.Cache, want)
				}
				msgs := st.Request().Messages
				if msgs[0].Role != "system" || len(strings.Fields(msgs[0].Content)) != 1024 {
					t.Fatalf("request %d: first message %s of %d words", i, msgs[0].Role, len(strings.Fields(msgs[0].Content)))
				}
				if i == 0 {
					system = msgs[0].Content
				} else if msgs[0].Content != system {
					t.Errorf("request %d has another system prompt", i)
				}
				truth := simtest.GroundTruth(t, sim.URL, res.RequestID)
				if cache != res.HasCachedInputTokens || res.CachedInputTokens != truth.CachedPromptTokens {
					t.Errorf("request %d: result says %d cached tokens (reported %v), ground truth %d",
						i, res.CachedInputTokens, res.HasCachedInputTokens, truth.CachedPromptTokens)
				}
				switch {
				case !cache && truth.CachedPromptTokens != 0:
					t.Errorf("request %d: %d cached tokens with the cache off", i, truth.CachedPromptTokens)
				case cache && i == 0 && truth.CachedPromptTokens != 0:
					t.Errorf("cold request: %d cached tokens", truth.CachedPromptTokens)
				case cache && i > 0 && truth.CachedPromptTokens != 1024:
					// 64 full blocks of the prefix; the suffix differs.
					t.Errorf("warm request %d: %d cached tokens, want 1024", i, truth.CachedPromptTokens)
				}
				if i > 0 {
					warm += res.TTFT
				}
			}
			cold := steps[0].Result.TTFT
			ratio := (warm / 3).Seconds() / cold.Seconds()
			t.Logf("cold TTFT %s, mean warm TTFT %s, ratio %.3f", cold, warm/3, ratio)
			if cache && ratio > 0.3 {
				t.Errorf("cache on: warm/cold %.3f, want < 0.3", ratio)
			}
			if !cache && (ratio < 0.7 || ratio > 1.4) {
				t.Errorf("cache off: warm/cold %.3f, want about 1", ratio)
			}
		})
	}
}

// TestSessionTurns: each turn resends the conversation with the previous
// answer, so the simulator counts the previous prompt, the previous
// answer and the new user message; with the cache on, each turn after the
// first is served the previous turn's full blocks from cache.
func TestSessionTurns(t *testing.T) {
	sim := prefixSim(t, true)
	for _, proto := range []string{"openai_chat", "openai_responses", "ollama"} {
		t.Run(proto, func(t *testing.T) { testSessionTurns(t, sim, proto, false) })
	}
	t.Run("openai_responses chained", func(t *testing.T) { testSessionTurns(t, sim, "openai_responses", true) })
}

// testSessionTurns runs a 3-turn session; chained, turns after the first
// send their user message alone with previous_response_id, and the
// simulator counts the same prompt as for a resent conversation.
func testSessionTurns(t *testing.T, sim *simtest.Sim, proto string, chained bool) {
	cfg := parseConfig(t, fmt.Sprintf(`targets:
  - name: sim
    protocol: %s
    url: %s
    model: sim-llm
    probes:
      - name: chat
        workload: turns
        schedule: {every: 1m}
        session: {turns: 3, previous_response_id: %t}
workloads:
  turns:
    prompts: {system: "You answer briefly.", inline: ["tell me about latency and how prefill time grows with the length of the prompt"]}
    max_tokens: 24
    ignore_eos: true
`, proto, sim.URL, chained))
	steps := runSequence(t, cfg, "sim", "chat")
	var truths []simulator.RequestRecord
	for i, st := range steps {
		if st.Result.Outcome != probe.OutcomeSuccess {
			t.Fatalf("turn %d: %s %v", i+1, st.Result.Outcome, st.Result.Err)
		}
		if st.Result.Answer != "" {
			t.Errorf("turn %d kept its answer although the probe has no assertions", i+1)
		}
		truths = append(truths, simtest.GroundTruth(t, sim.URL, st.Result.RequestID))
	}
	if len(steps) != 3 {
		t.Fatalf("%d turns, want 3", len(steps))
	}
	// Ground truth: each prompt = the previous prompt + its answer + the
	// new user message.
	const user = 15 // words of the user message
	for i := 1; i < 3; i++ {
		msgs := steps[i].Request().Messages
		if chained {
			prev := steps[i].Request().Extra["previous_response_id"]
			if len(msgs) != 1 || msgs[0].Role != "user" || prev != "resp_"+steps[i-1].Result.RequestID {
				t.Errorf("turn %d sent %v with previous_response_id %v", i+1, msgs, prev)
			}
		}
		if want := truths[i-1].PromptTokens + truths[i-1].OutputTokens + user; truths[i].PromptTokens != want {
			t.Errorf("turn %d: simulator counted %d prompt tokens, want %d (turn %d's %d + answer %d + user %d)",
				i+1, truths[i].PromptTokens, want, i, truths[i-1].PromptTokens, truths[i-1].OutputTokens, user)
		}
		if chained {
			continue
		}
		roles := make([]string, len(msgs))
		for j, m := range msgs {
			roles[j] = m.Role
		}
		if want := strings.TrimSuffix(strings.Repeat("user assistant ", i)+"user", " "); strings.Join(roles[1:], " ") != want || roles[0] != "system" {
			t.Errorf("turn %d roles %v", i+1, roles)
		}
		if got := len(strings.Fields(msgs[len(msgs)-2].Content)); got != truths[i-1].OutputTokens {
			t.Errorf("turn %d resends an answer of %d words; turn %d's was %d tokens", i+1, got, i, truths[i-1].OutputTokens)
		}
		if want := truths[i-1].PromptTokens / 16 * 16; truths[i].CachedPromptTokens < want {
			t.Errorf("turn %d: %d cached tokens, want at least the previous prompt's full blocks (%d)", i+1, truths[i].CachedPromptTokens, want)
		}
	}
	if steps[0].Cache != CacheCold || steps[1].Cache != CacheWarm || steps[2].Cache != CacheWarm {
		t.Errorf("tags %s %s %s", steps[0].Cache, steps[1].Cache, steps[2].Cache)
	}
}

// TestPrefixMetricsThroughTheEngine: scheduled shared_prefix probes
// against a simulator with its prefix cache and one without export cold
// and warm TTFT histograms, the warm/cold ratio (low with the cache, about
// 1 without) and the cached tokens; every request is also a request of
// the ordinary metrics; a plain probe gets no prefix series.
func TestPrefixMetricsThroughTheEngine(t *testing.T) {
	on, off := prefixSim(t, true), prefixSim(t, false)
	cfg := parseConfig(t, fmt.Sprintf(`targets:
  - name: cached
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: prefix, workload: short, schedule: {every: 100ms}, shared_prefix: {tokens: 1024, requests: 3}}
      - {name: plain, workload: short, schedule: {every: 100ms}}
  - name: uncached
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: prefix, workload: short, schedule: {every: 100ms}, shared_prefix: {tokens: 1024, requests: 3}}
workloads:
  short: {prompts: {synthetic: {input_tokens: 16}}, max_tokens: 4, ignore_eos: true}
`, on.URL, off.URL))
	reg := prometheus.NewPedanticRegistry()
	pm, pfx := collector.NewProbeMetrics(), collector.NewPrefixMetrics()
	reg.MustRegister(pm, pfx)
	e := New(promslog.NewNopLogger(), pm, PrefixSink(pfx))
	e.Apply(cfg)
	// find is the first series of family name with the labels given as
	// name, value pairs; nil when there is none.
	find := func(name string, labels ...string) *dto.Metric {
		if series := itestutil.Gather(t, reg).Series(name, labels...); len(series) > 0 {
			return series[0]
		}
		return nil
	}
	histogram := func(name string, labels ...string) (n, sum float64) {
		h := find(name, labels...).GetHistogram()
		return float64(h.GetSampleCount()), h.GetSampleSum()
	}
	// The mean warm over the mean cold TTFT of several runs: one run's
	// ratio (the gauge) moves with a loaded machine's scheduling, the
	// means much less.
	meanRatio := func(target string) (float64, float64) {
		nc, sc := histogram("llm_probe_prefix_time_to_first_token_seconds", "target", target, "cache", "cold")
		nw, sw := histogram("llm_probe_prefix_time_to_first_token_seconds", "target", target, "cache", "warm")
		if nc == 0 || nw == 0 {
			return 0, nc
		}
		return (sw / nw) / (sc / nc), nc
	}
	const runs = 5
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, a := meanRatio("cached")
		_, b := meanRatio("uncached")
		if a >= runs && b >= runs {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.Stop(ctx)

	withCache, n1 := meanRatio("cached")
	withoutCache, n2 := meanRatio("uncached")
	t.Logf("mean warm/cold TTFT: %.3f with the prefix cache (%v runs), %.3f without (%v runs)", withCache, n1, withoutCache, n2)
	if n1 < runs || n2 < runs {
		t.Fatalf("%v and %v runs after 30s, want %d each", n1, n2, runs)
	}
	for _, target := range []string{"cached", "uncached"} {
		if _, ok := pfx.Ratio(target, "prefix"); !ok {
			t.Errorf("%s: no last-run ratio", target)
		}
	}
	if withCache > 0.3 {
		t.Errorf("cache on: ratio %.3f, want < 0.3", withCache)
	}
	if withoutCache < 0.7 || withoutCache > 1.4 {
		t.Errorf("cache off: ratio %.3f, want about 1", withoutCache)
	}
	count := func(name string, labels ...string) float64 {
		if v, ok := metricValue(t, reg, name, labels...); ok {
			return v
		}
		return -1
	}
	cold := count("llm_probe_prefix_time_to_first_token_seconds", "target", "cached", "cache", "cold")
	warm := count("llm_probe_prefix_time_to_first_token_seconds", "target", "cached", "cache", "warm")
	all := count("llm_probe_time_to_first_token_seconds", "target", "cached", "probe", "prefix")
	if cold < 1 || warm != 2*cold || all != cold+warm {
		t.Errorf("cold %v, warm %v, all TTFT observations %v: want warm = 2·cold and all = cold + warm", cold, warm, all)
	}
	if got := count("llm_probe_cached_input_tokens_total", "target", "cached"); got != 1024*warm {
		t.Errorf("cached tokens %v, want 1024 per warm request (%v)", got, 1024*warm)
	}
	if got := count("llm_probe_prefix_time_to_first_token_seconds", "probe", "plain"); got != -1 {
		t.Errorf("plain probe has prefix series")
	}
	if n, err := testutil.GatherAndCount(reg, "llm_probe_prefix_warm_cold_ttft_ratio"); err != nil || n != 2 {
		t.Errorf("%d ratio series (%v), want 2", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestSharedPrefixProtocols: the other protocols that take a prompt carry
// the run's prefix too (completions and TGI before the prompt, Ollama as
// the system message), so the simulator serves warm requests from cache.
func TestSharedPrefixProtocols(t *testing.T) {
	sim := prefixSim(t, true)
	for _, proto := range []string{"openai_completions", "tgi", "ollama"} {
		t.Run(proto, func(t *testing.T) {
			cfg := parseConfig(t, fmt.Sprintf(`targets:
  - name: sim
    protocol: %s
    url: %s
    model: sim-llm
    probes:
      - {name: prefix, workload: short, schedule: {every: 1m}, shared_prefix: {tokens: 512, requests: 2}}
workloads:
  short: {prompts: {synthetic: {input_tokens: 16}}, max_tokens: 4, ignore_eos: true}
`, proto, sim.URL))
			var cached []int
			for _, st := range runSequence(t, cfg, "sim", "prefix") {
				if st.Result.Outcome != probe.OutcomeSuccess {
					t.Fatalf("%s %v", st.Result.Outcome, st.Result.Err)
				}
				cached = append(cached, simtest.GroundTruth(t, sim.URL, st.Result.RequestID).CachedPromptTokens)
			}
			if len(cached) != 2 || cached[0] != 0 || cached[1] != 512 {
				t.Errorf("cached prompt tokens per request %v, want [0 512]", cached)
			}
		})
	}
}
