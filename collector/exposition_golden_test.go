package collector

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llm-prober/llm-prober/probe"
)

// The exposition of every per-probe collector for a fixed set of probes
// and results, compared with testdata/exposition.golden: the golden file
// was written by the collectors before they shared probeStore, so it pins
// the series names, labels, help, values, native buckets, exemplars and
// created-timestamp presence that the refactor had to keep. Rewrite it
// (go test -run TestExpositionGolden -update) only for an intended change
// of the exposition.
const expositionGolden = "testdata/exposition.golden"

// goldenStart is the fixed start time of every result, so the last-run
// and failing-since gauges are reproducible.
var goldenStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type goldenCollectors struct {
	probes  *ProbeMetrics
	answers *AnswerMetrics
	cancels *CancelMetrics
	prefix  *PrefixMetrics
	pooled  *PooledMetrics
	limits  *RateLimitMetrics
}

func newGoldenCollectors() (*goldenCollectors, *prometheus.Registry) {
	c := &goldenCollectors{
		probes: NewProbeMetrics(), answers: NewAnswerMetrics(), cancels: NewCancelMetrics(),
		prefix: NewPrefixMetrics(), pooled: NewPooledMetrics(), limits: NewRateLimitMetrics(),
	}
	c.probes.now = func() time.Time { return goldenStart.Add(time.Minute) }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.probes, c.answers, c.cancels, c.prefix, c.pooled, c.limits)
	return c, reg
}

// goldenProbe is one configured probe as the engine announces it to
// every collector.
type goldenProbe struct {
	ps         ProbeSeries
	assertions []string
	cancel     bool
	sequence   string // "", "session" or "shared_prefix"
}

func (c *goldenCollectors) add(p goldenProbe) {
	ps := p.ps
	c.probes.Add(ps)
	c.answers.Add(AnswerSeries{Target: ps.Target, Probe: ps.Probe, Model: ps.Model, Assertions: p.assertions, Histograms: ps.Histograms})
	c.limits.Add(ps.Target, ps.Probe)
	c.pooled.Add(ps.Target, ps.Probe, ps.Model, ps.Protocol)
	if p.cancel {
		c.cancels.Add(CancelSeries{Target: ps.Target, Probe: ps.Probe, Model: ps.Model, Histograms: ps.Histograms})
	} else {
		c.cancels.Remove(ps.Target, ps.Probe)
	}
	if p.sequence != "" {
		c.prefix.Add(PrefixSeries{Target: ps.Target, Probe: ps.Probe, Model: ps.Model, Mode: p.sequence, Histograms: ps.Histograms})
	} else {
		c.prefix.Remove(ps.Target, ps.Probe)
	}
}

func (c *goldenCollectors) remove(target, name string) {
	c.probes.Remove(target, name)
	c.answers.Remove(target, name)
	c.limits.Remove(target, name)
	c.pooled.Remove(target, name)
	c.cancels.Remove(target, name)
	c.prefix.Remove(target, name)
}

func (c *goldenCollectors) observe(target, name string, r *probe.Result) {
	c.probes.Observe(target, name, r)
	c.answers.Observe(target, name, r)
	c.limits.Observe(target, r)
	c.pooled.Observe(target, name, r)
	c.cancels.Observe(target, name, r)
}

func goldenProbes() []goldenProbe {
	slo := SLO{TTFT: 250 * time.Millisecond, TPOT: 20 * time.Millisecond, Objective: 0.99}
	var out []goldenProbe
	for i, p := range probe.Protocols() {
		form := HistogramForms()[i%3]
		out = append(out, goldenProbe{ps: ProbeSeries{
			Target: "t-" + p.Name, Probe: "basic", Model: "m-" + p.Name, Protocol: p.Name, Histograms: form,
			PlannedInterval: 15 * time.Second,
		}})
	}
	return append(out,
		goldenProbe{ps: ProbeSeries{Target: "slo", Probe: "full", Model: "llm", Protocol: probe.ProtocolOpenAIChat, SLO: slo,
			Asserts: true, PlannedInterval: 30 * time.Second}, assertions: []string{"contains", "json"}},
		goldenProbe{ps: ProbeSeries{Target: "slo", Probe: "ttft-only", Model: "llm", Protocol: probe.ProtocolOpenAIChat,
			SLO: SLO{TTFT: time.Second}, Histograms: HistogramsClassic}},
		goldenProbe{ps: ProbeSeries{Target: "slo", Probe: "objective-only", Model: "llm", Protocol: probe.ProtocolTGI,
			SLO: SLO{Objective: 0.9}, Histograms: HistogramsNative}},
		goldenProbe{ps: ProbeSeries{Target: "seq", Probe: "session", Model: "llm", Protocol: probe.ProtocolOpenAIChat}, sequence: "session"},
		goldenProbe{ps: ProbeSeries{Target: "seq", Probe: "shared", Model: "llm", Protocol: probe.ProtocolOpenAIChat, Histograms: HistogramsClassic}, sequence: "shared_prefix"},
		goldenProbe{ps: ProbeSeries{Target: "cut", Probe: "cancel", Model: "llm", Protocol: probe.ProtocolOpenAIChat}, cancel: true},
		goldenProbe{ps: ProbeSeries{Target: "no-protocol", Probe: "p", Model: "m"}},
		goldenProbe{ps: ProbeSeries{Target: "gone", Probe: "removed", Model: "llm", Protocol: probe.ProtocolOpenAIChat}, cancel: true, sequence: "session"},
		goldenProbe{ps: ProbeSeries{Target: "reload", Probe: "model-change", Model: "old", Protocol: probe.ProtocolOpenAIChat}, cancel: true, sequence: "session"},
	)
}

// goldenResult is a successful stream of n tokens with every optional
// part a driver may fill in; step varies the timings.
func goldenResult(step int) *probe.Result {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	r := &probe.Result{
		RequestID: fmt.Sprintf("%032x", step+1), Start: goldenStart.Add(time.Duration(step) * time.Second),
		StatusCode: 200, Streamed: true,
		Phases: probe.Phases{DNS: ms(1), HasDNS: true, Connect: ms(2), HasConnect: true, TLS: ms(3), HasTLS: true,
			Write: ms(0.05), HasWrite: true, FirstByte: ms(20 + float64(step)), HasFirstByte: true},
		TTFT:        ms(40 + 10*float64(step)),
		InputTokens: 9, InputTokensSource: probe.TokenSourceServer,
		CachedInputTokens: 4, HasCachedInputTokens: true,
		OutputTokens: 5, OutputTokensSource: probe.TokenSourceServer,
		Outcome: probe.OutcomeSuccess,
		Reasoning: probe.Reasoning{Seen: true, FirstReasoning: ms(30), FirstAnswer: ms(90 + float64(step)),
			Tokens: 7, HasTokens: true},
		ServerTimings: []probe.ServerTiming{{Name: "prompt", Duration: ms(12)}, {Name: "predicted", Duration: ms(80)},
			{Name: "not-a-phase", Duration: ms(1)}, {Name: "queue", Duration: 2 * time.Hour}},
		ServerTimingsInvalid: 1,
		TLSCertExpiry:        goldenStart.Add(90 * 24 * time.Hour),
		RateLimit: &probe.RateLimit{
			Requests: probe.RateLimitWindow{Limit: 100, HasLimit: true, Remaining: float64(90 - step), HasRemaining: true,
				Reset: 30 * time.Second, HasReset: true},
			Tokens:     probe.RateLimitWindow{Limit: 1e6, HasLimit: true},
			RetryAfter: 2 * time.Second, HasRetryAfter: true,
			Malformed: []string{"x-ratelimit-reset-tokens", "x-not-read"},
		},
	}
	at := r.TTFT
	for i := range 5 {
		r.Chunks = append(r.Chunks, probe.Chunk{At: at, Tokens: 1})
		at += ms(15 + float64(i*step))
	}
	r.EndToEnd = at
	return r
}

// feed sends every probe the same mix: successes, a failure of each
// kind, a retry, dropped usage, a cancellation, pooled answers, skips and
// the scheduler's counts.
func (c *goldenCollectors) feed(probes []goldenProbe, round int) {
	for pi, p := range probes {
		tg, name := p.ps.Target, p.ps.Probe
		for step := range 4 {
			c.observe(tg, name, goldenResult(step+pi+round))
		}
		fail := &probe.Result{RequestID: "f", Start: goldenStart, Outcome: probe.OutcomeHTTP5xx, StatusCode: 503,
			Phases: probe.Phases{Connect: time.Millisecond, HasConnect: true},
			Retry:  &probe.Retry{Reason: probe.RetryReset}, UsageInvalid: []string{probe.UsageFields()[0], "bogus"}}
		c.observe(tg, name, fail)
		timeout := &probe.Result{Start: goldenStart.Add(time.Second), Outcome: probe.OutcomeTimeout,
			Retry: &probe.Retry{Reason: "strange"}}
		c.observe(tg, name, timeout)
		// A looping answer with the server's load report (vLLM), and a
		// server's own word for a stop.
		loop := goldenResult(pi)
		loop.FinishReason = "repetition"
		loop.ServerLoad = &probe.ServerLoad{Waiting: 3, KVCacheUsage: 0.25, HasWaiting: true, HasKVCache: true}
		c.observe(tg, name, loop)
		eos := goldenResult(pi + 1)
		eos.FinishReason = "eos_token"
		c.observe(tg, name, eos)
		if p.assertions != nil {
			wrong := goldenResult(pi)
			wrong.Outcome = probe.OutcomeWrongAnswer
			wrong.AssertionFailures = []probe.AssertionFailure{{Name: "json"}, {Name: "unknown"}}
			c.observe(tg, name, wrong)
		}
		if p.cancel {
			cut := goldenResult(pi)
			cut.Cancel = &probe.Cancellation{AfterTokens: 2, Tokens: 2, Release: probe.CancelReleased, ReleaseAfter: 300 * time.Millisecond}
			c.observe(tg, name, cut)
			leak := goldenResult(pi)
			leak.Cancel = &probe.Cancellation{Release: probe.CancelLeaked}
			c.observe(tg, name, leak)
		}
		if proto, ok := probe.LookupProtocol(p.ps.Protocol); ok && (proto.Settings == probe.SettingsEmbedding || proto.Settings == probe.SettingsRerank) {
			c.observe(tg, name, &probe.Result{Outcome: probe.OutcomeSuccess, Start: goldenStart,
				Pooled: &probe.PooledAnswer{Items: 3 + round, Dimension: 768, Top: 1}})
		}
		if p.sequence != "" {
			cold, warm := goldenResult(pi), goldenResult(pi+3)
			c.prefix.ObserveRun(tg, name, []PrefixRequest{{Cache: PrefixCold, Result: cold}, {Cache: PrefixWarm, Result: warm},
				{Cache: PrefixWarm, Result: nil}})
		}
		c.probes.Skipped(tg, name, SkipReasonConcurrencyLimit)
		c.probes.Skipped(tg, name, SkipReasonOverdue)
		c.probes.Skipped(tg, name, "custom")
		c.probes.ObserveScheduleLag(tg, name, time.Duration(pi+1)*time.Millisecond)
		c.probes.ObserveBurstSpread(tg, name, time.Duration(pi+1)*time.Microsecond)
		c.probes.OutputLengthMismatch(tg, name)
		c.probes.InputLengthMismatch(tg, name)
		for range 3 {
			c.probes.Scheduled(tg, name)
		}
		c.probes.InFlight(tg, name, 2)
		c.probes.InFlight(tg, name, -1)
	}
}

// renderGolden is the OpenMetrics text of what reg gathers, with created
// lines and exemplars, followed by each native histogram's fields, which
// no text format carries. Timestamps taken from the clock are replaced by
// a fixed one (kept where present, so a lost created timestamp shows),
// and so is the rate-limit update time.
func renderGolden(t *testing.T, reg prometheus.Gatherer) []byte {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fixed := timestamppb.New(time.Unix(1700000000, 0))
	var native strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if m.Counter != nil && m.Counter.CreatedTimestamp != nil {
				m.Counter.CreatedTimestamp = fixed
			}
			if m.Counter != nil && m.Counter.Exemplar != nil && m.Counter.Exemplar.Timestamp != nil {
				m.Counter.Exemplar.Timestamp = fixed
			}
			if mf.GetName() == "llm_probe_rate_limit_last_update_timestamp_seconds" {
				m.Gauge.Value = new(float64)
			}
			h := m.Histogram
			if h == nil {
				continue
			}
			if h.CreatedTimestamp != nil {
				h.CreatedTimestamp = fixed
			}
			for _, b := range h.Bucket {
				if b.Exemplar != nil && b.Exemplar.Timestamp != nil {
					b.Exemplar.Timestamp = fixed
				}
			}
			for _, e := range h.Exemplars {
				if e.Timestamp != nil {
					e.Timestamp = fixed
				}
			}
			if h.Schema != nil {
				fmt.Fprintf(&native, "%s%s schema=%d zero_threshold=%g zero_count=%d count=%d sum=%g pos=%v %v neg=%v %v exemplars=%d\n",
					mf.GetName(), labelString(m.Label), h.GetSchema(), h.GetZeroThreshold(), h.GetZeroCount(),
					h.GetSampleCount(), h.GetSampleSum(), spans(h.PositiveSpan), h.PositiveDelta, spans(h.NegativeSpan), h.NegativeDelta, len(h.Exemplars))
			}
		}
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeOpenMetrics), expfmt.WithCreatedLines())
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString("# native histograms\n")
	buf.WriteString(native.String())
	return buf.Bytes()
}

func labelString(ls []*dto.LabelPair) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func spans(ss []*dto.BucketSpan) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%d:%d", s.GetOffset(), s.GetLength())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// filledGoldenCollectors are the golden probes added and fed once.
func filledGoldenCollectors() (*goldenCollectors, *prometheus.Registry, []goldenProbe) {
	c, reg := newGoldenCollectors()
	probes := goldenProbes()
	for _, p := range probes {
		c.add(p)
	}
	c.feed(probes, 0)
	return c, reg, probes
}

func TestExpositionGolden(t *testing.T) {
	c, reg, probes := filledGoldenCollectors()

	// A reload: unchanged probes keep their series, a changed model
	// replaces them, a changed planned interval swaps only its own
	// series, a removed probe takes all of its series along.
	var kept []goldenProbe
	for _, p := range probes {
		switch p.ps.Target {
		case "gone":
			c.remove(p.ps.Target, p.ps.Probe)
			continue
		case "reload":
			p.ps.Model = "new"
		case "slo":
			p.ps.PlannedInterval = 0
		}
		if p.ps.Probe == "basic" && p.ps.Protocol == probe.ProtocolOllama {
			p.ps.PlannedInterval = time.Minute
		}
		c.add(p)
		kept = append(kept, p)
	}
	c.feed(kept, 1)

	got := renderGolden(t, reg)
	path := filepath.FromSlash(expositionGolden)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is missing: run go test ./collector/ -run TestExpositionGolden -update on a tree whose exposition is right", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("exposition differs from %s at line %d:\n got: %s\nwant: %s\n(%d lines got, %d want)", path, i+1, g, w, len(gl), len(wl))
			}
		}
	}
}
