package bench

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// result builds a streamed success: first chunk at ttft, then one chunk of
// one token every gap, the end a millisecond after the last chunk.
func result(start time.Time, ttft, gap time.Duration, tokens int) *probe.Result {
	r := &probe.Result{Start: start, TTFT: ttft, Streamed: true, Outcome: probe.OutcomeSuccess,
		OutputTokens: tokens, OutputTokensSource: probe.TokenSourceServer, InputTokens: 10, InputTokensSource: probe.TokenSourceServer}
	for i := range tokens {
		r.Chunks = append(r.Chunks, probe.Chunk{At: ttft + time.Duration(i)*gap, Tokens: 1})
	}
	r.EndToEnd = ttft + time.Duration(tokens-1)*gap + time.Millisecond
	return r
}

func TestComputeStats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rs := []*probe.Result{
		result(t0, 100*time.Millisecond, 10*time.Millisecond, 11),                          // ends at 0.201
		result(t0.Add(500*time.Millisecond), 200*time.Millisecond, 20*time.Millisecond, 6), // ends at 0.5+0.301
		{Start: t0.Add(time.Second), EndToEnd: 999 * time.Millisecond, Outcome: probe.OutcomeHTTP5xx, StatusCode: 503, Err: errors.New("HTTP 503: queue full")},
		{Start: t0.Add(1100 * time.Millisecond), EndToEnd: time.Millisecond, Outcome: probe.OutcomeConnectError, Err: errors.New(strings.Repeat("x", 5000))},
		{Start: t0.Add(1100 * time.Millisecond), EndToEnd: time.Millisecond, Outcome: probe.OutcomeHTTP5xx, StatusCode: 500, Err: errors.New("second 5xx")},
	}
	st := computeStats(samplesOf(rs))
	if st.FirstErrors["http_5xx"] != "HTTP 503: queue full" || len(st.FirstErrors["connect_error"]) > maxErrorText+len("…") || len(st.FirstErrors) != 2 {
		t.Errorf("first errors %q", st.FirstErrors)
	}
	rs = rs[:4]
	st = computeStats(samplesOf(rs))
	if st.Requests != 4 || st.Successes != 2 || st.ErrorRate != 0.5 {
		t.Errorf("requests %d successes %d error rate %g", st.Requests, st.Successes, st.ErrorRate)
	}
	if st.Outcomes["http_5xx"] != 1 || st.Outcomes["connect_error"] != 1 || st.Outcomes["success"] != 2 || len(st.Outcomes) != len(probe.Outcomes()) {
		t.Errorf("outcomes %v", st.Outcomes)
	}
	// Span: first start (t0) to last end (t0+1.999 s), failures included.
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %.9g, want %.9g", name, got, want)
		}
	}
	near("measurement", st.MeasurementSeconds, 1.999)
	near("req/s", st.RequestsPerSecond, 2/1.999)
	near("out tok/s", st.OutputTokensPerSecond, 17/1.999)
	near("in tok/s", st.InputTokensPerSecond, 20/1.999)
	if st.TTFT.Count != 2 {
		t.Errorf("TTFT count %d", st.TTFT.Count)
	}
	near("ttft min", st.TTFT.Min, 0.1)
	near("ttft max", st.TTFT.Max, 0.2)
	near("ttft avg", st.TTFT.Avg, 0.15)
	// TPOT = (e2e - ttft)/(tokens-1): (0.101)/10 and (0.101)/5.
	near("tpot min", st.TPOT.Min, 0.0101)
	near("tpot max", st.TPOT.Max, 0.0202)
	// ITL: one observation per token after the first: 10 of 10 ms, 5 of 20 ms.
	if st.ITL.Count != 15 {
		t.Errorf("ITL count %d, want 15", st.ITL.Count)
	}
	near("itl p50", st.ITL.P50, 0.01)
	near("itl p75", st.ITL.P75, 0.02)
	near("latency max", st.Latency.Max, 0.301)
	near("output tokens avg", st.OutputTokensPerRequest.Avg, 8.5)
	if st.OutputTokens != 17 || st.InputTokens != 20 {
		t.Errorf("tokens out %d in %d", st.OutputTokens, st.InputTokens)
	}

	empty := computeStats(nil)
	if empty.Requests != 0 || empty.ErrorRate != 0 || empty.RequestsPerSecond != 0 || empty.TTFT.Count != 0 {
		t.Errorf("empty stats %+v", empty)
	}
	// A non-streamed answer has no TTFT (and hence no TPOT), but a latency.
	ns := &probe.Result{Start: t0, EndToEnd: time.Second, Outcome: probe.OutcomeSuccess, OutputTokens: 5}
	st = computeStats(samplesOf([]*probe.Result{ns}))
	if st.TTFT.Count != 0 || st.TPOT.Count != 0 || st.Latency.Count != 1 || st.InputTokensUnknown != 1 {
		t.Errorf("non-streamed: %+v", st)
	}
}

func TestStable(t *testing.T) {
	w := func(rps, lat float64) Stats {
		return Stats{Successes: 10, RequestsPerSecond: rps, Latency: Summary{Count: 10, Avg: lat}}
	}
	if !stable([]Stats{w(10, 1), w(10.5, 1.05), w(9.6, 0.97)}, 0.1) {
		t.Error("windows within 10% judged unstable")
	}
	if stable([]Stats{w(10, 1), w(13, 1), w(10, 1)}, 0.1) {
		t.Error("throughput 20% off the mean judged stable")
	}
	if stable([]Stats{w(10, 1), w(10, 1.3), w(10, 1)}, 0.1) {
		t.Error("latency 20% off the mean judged stable")
	}
	if stable([]Stats{w(10, 1), {}, w(10, 1)}, 0.5) {
		t.Error("an empty window judged stable")
	}
}

// fakeDriver answers after delay (or when ctx ends: a timeout, or
// cancelled, as the real drivers say), with tokens one-token chunks
// spread evenly.
type fakeDriver struct {
	delay  time.Duration
	tokens int
	fail   func() bool
}

func (f *fakeDriver) Probe(ctx context.Context, req *probe.Request) *probe.Result {
	start := time.Now()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		o := probe.OutcomeTimeout
		if errors.Is(ctx.Err(), context.Canceled) {
			o = probe.OutcomeCancelled
		}
		return &probe.Result{RequestID: req.ID, Start: start, EndToEnd: time.Since(start), Outcome: o, Err: ctx.Err()}
	}
	if f.fail != nil && f.fail() {
		return &probe.Result{RequestID: req.ID, Start: start, EndToEnd: time.Since(start), Outcome: probe.OutcomeHTTP5xx, StatusCode: 503, Err: errors.New("503")}
	}
	return result(start, f.delay/2, f.delay/2/time.Duration(f.tokens), f.tokens)
}

func (f *fakeDriver) Close() {}

func samplesOf(rs []*probe.Result) []*sample {
	out := make([]*sample, len(rs))
	for i, r := range rs {
		out[i] = newSample(r)
	}
	return out
}

// TestSampleKeepsITLToTheNanosecond: the compact float32 nanoseconds give
// back the ITL a Result gives, for gaps short and long.
func TestSampleKeepsITLToTheNanosecond(t *testing.T) {
	r := &probe.Result{Outcome: probe.OutcomeSuccess, Streamed: true, TTFT: time.Millisecond, OutputTokens: 4,
		Chunks: []probe.Chunk{{At: time.Millisecond, Tokens: 1}, {At: time.Millisecond + 7654321, Tokens: 1},
			{At: time.Millisecond + 7654321 + 3*time.Second, Tokens: 2}}}
	r.EndToEnd = r.Chunks[2].At
	var want []time.Duration
	r.InterTokenLatencies(func(d time.Duration) { want = append(want, d) })
	sm := newSample(r)
	if len(sm.itl) != len(want) {
		t.Fatalf("%d ITL observations, want %d", len(sm.itl), len(want))
	}
	for i, ns := range sm.itl {
		got := time.Duration(ns)
		if diff := (got - want[i]).Abs(); diff > want[i]/10_000_000+1 {
			t.Errorf("ITL %d = %v, want %v", i, got, want[i])
		}
	}
	if time.Duration(sm.itl[0]) != 7654321 {
		t.Errorf("a 7.65 ms gap is not exact: %v", time.Duration(sm.itl[0]))
	}
}
