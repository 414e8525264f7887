package bench

import (
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/internal/stats"
	"github.com/llm-prober/llm-prober/probe"
)

// Summary is internal/stats.Summary with JSON names. Times are seconds.
type Summary struct {
	Count int     `json:"count"`
	Avg   float64 `json:"avg"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

func summarise(values []float64) Summary { return fromStats(stats.Summarise(values)) }

func fromStats(s stats.Summary) Summary {
	return Summary{Count: s.Count, Avg: s.Avg, Min: s.Min, Max: s.Max, P50: s.P50, P75: s.P75, P90: s.P90, P95: s.P95, P99: s.P99}
}

// stat returns one named statistic; false when the sample is empty.
func (s Summary) stat(name string) (float64, bool) {
	if s.Count == 0 {
		return 0, false
	}
	switch name {
	case "avg":
		return s.Avg, true
	case "min":
		return s.Min, true
	case "max":
		return s.Max, true
	case "p50":
		return s.P50, true
	case "p75":
		return s.P75, true
	case "p90":
		return s.P90, true
	case "p95":
		return s.P95, true
	case "p99":
		return s.P99, true
	}
	return 0, false
}

// Stats are one step's statistics over its measured requests, as defined
// in docs/bench.md.
type Stats struct {
	// Requests counts every measured request, whatever its outcome.
	Requests  int            `json:"requests"`
	Successes int            `json:"successes"`
	Outcomes  map[string]int `json:"outcomes"`
	// FirstErrors holds, per failing outcome, the first error seen, so a
	// run that failed says why without --export-requests.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
	// ErrorRate is (requests − successes) / requests; 0 without requests.
	ErrorRate float64 `json:"error_rate"`
	// MeasurementSeconds is the throughput denominator: from the first
	// measured request's start to the last measured response's end.
	MeasurementSeconds    float64 `json:"measurement_seconds"`
	RequestsPerSecond     float64 `json:"requests_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	InputTokensPerSecond  float64 `json:"input_tokens_per_second"`
	OutputTokens          int     `json:"output_tokens_total"`
	InputTokens           int     `json:"input_tokens_total"`
	// InputTokensUnknown counts successes whose prompt length the server
	// did not report; they add nothing to InputTokens.
	InputTokensUnknown int `json:"input_tokens_unknown_requests"`

	TTFT                   Summary `json:"time_to_first_token_seconds"`
	TPOT                   Summary `json:"time_per_output_token_seconds"`
	ITL                    Summary `json:"inter_token_latency_seconds"`
	Latency                Summary `json:"request_latency_seconds"`
	OutputTokensPerRequest Summary `json:"output_tokens_per_request"`
	InputTokensPerRequest  Summary `json:"input_tokens_per_request"`
}

// maxErrorText bounds each remembered error: servers put whole bodies into
// their error messages.
const maxErrorText = 300

// sample is what the statistics need of one measured request, kept in
// place of its probe.Result: a long step holds one per request, and a
// Result's chunk times cost 16 bytes per token where an ITL observation
// needs 4: float32 nanoseconds, exact up to 16 ms and within 0.00001% above.
type sample struct {
	start    time.Time
	endToEnd time.Duration
	ttft     time.Duration // zero unless streamed with output
	tpot     time.Duration
	hasTPOT  bool
	outcome  probe.Outcome
	// err is the error cut to maxErrorText; cancelled marks a request
	// cancelled by the end of an interrupted run's drain.
	err          string
	cancelled    bool
	outputTokens int
	inputTokens  int
	inputKnown   bool
	itl          []float32
	// export is the request's --export-requests line, kept only when
	// that file is asked for.
	export []byte
}

func newSample(r *probe.Result) *sample {
	sm := &sample{
		start: r.Start, endToEnd: r.EndToEnd, outcome: r.Outcome,
		outputTokens: r.OutputTokens, inputTokens: r.InputTokens,
		inputKnown: r.InputTokensSource != probe.TokenSourceNone,
	}
	if r.Err != nil {
		sm.err = cut(r.Err.Error(), maxErrorText)
		sm.cancelled = r.Outcome == probe.OutcomeCancelled
	}
	if r.Outcome != probe.OutcomeSuccess {
		return sm
	}
	if r.Streamed && r.TTFT > 0 {
		sm.ttft = r.TTFT
	}
	sm.tpot, sm.hasTPOT = r.TPOT()
	n := 0
	r.InterTokenLatencies(func(time.Duration) { n++ })
	if n > 0 {
		sm.itl = make([]float32, 0, n)
		r.InterTokenLatencies(func(d time.Duration) { sm.itl = append(sm.itl, float32(d)) })
	}
	return sm
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// computeStats applies the definitions of docs/metrics.md to a set of
// samples: latency statistics over successes only, failures in outcomes
// and the error rate, throughput over the measurement span (genai-perf's
// definition).
func computeStats(samples []*sample) Stats {
	st := Stats{Requests: len(samples), Outcomes: map[string]int{}}
	for _, o := range probe.Outcomes() {
		st.Outcomes[string(o)] = 0
	}
	// Sized up front: a long step has millions of ITL observations, and
	// growing by doubling would briefly need three times their memory.
	nITL := 0
	for _, r := range samples {
		nITL += len(r.itl)
	}
	n := len(samples)
	ttft, tpot, lat := make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	outTok, inTok, itlNS := make([]float64, 0, n), make([]float64, 0, n), make([]float32, 0, nITL)
	var first, last time.Time
	for _, r := range samples {
		st.Outcomes[string(r.outcome)]++
		end := r.start.Add(r.endToEnd)
		if first.IsZero() || r.start.Before(first) {
			first = r.start
		}
		if last.IsZero() || end.After(last) {
			last = end
		}
		if r.outcome != probe.OutcomeSuccess {
			if _, seen := st.FirstErrors[string(r.outcome)]; !seen && r.err != "" {
				if st.FirstErrors == nil {
					st.FirstErrors = map[string]string{}
				}
				st.FirstErrors[string(r.outcome)] = r.err
			}
			continue
		}
		st.Successes++
		if r.ttft > 0 {
			ttft = append(ttft, r.ttft.Seconds())
		}
		if r.hasTPOT {
			tpot = append(tpot, r.tpot.Seconds())
		}
		itlNS = append(itlNS, r.itl...)
		lat = append(lat, r.endToEnd.Seconds())
		outTok = append(outTok, float64(r.outputTokens))
		st.OutputTokens += r.outputTokens
		if !r.inputKnown {
			st.InputTokensUnknown++
		} else {
			inTok = append(inTok, float64(r.inputTokens))
			st.InputTokens += r.inputTokens
		}
	}
	if st.Requests > 0 {
		st.ErrorRate = float64(st.Requests-st.Successes) / float64(st.Requests)
	}
	if span := last.Sub(first).Seconds(); span > 0 {
		st.MeasurementSeconds = span
		st.RequestsPerSecond = float64(st.Successes) / span
		st.OutputTokensPerSecond = float64(st.OutputTokens) / span
		st.InputTokensPerSecond = float64(st.InputTokens) / span
	}
	st.TTFT = summarise(ttft)
	st.TPOT = summarise(tpot)
	st.ITL = fromStats(stats.Summarise(itlNS).DividedBy(1e9))
	st.Latency = summarise(lat)
	st.OutputTokensPerRequest = summarise(outTok)
	st.InputTokensPerRequest = summarise(inTok)
	return st
}

// stable reports whether the windows agree: each one's request
// throughput and mean end-to-end latency within ±tolerance of the
// windows' mean (perf_analyzer's stability criterion, on both measures).
func stable(windows []Stats, tolerance float64) bool {
	if len(windows) == 0 {
		return false
	}
	var tput, lat float64
	for _, w := range windows {
		if w.Successes == 0 || w.RequestsPerSecond <= 0 {
			return false
		}
		tput += w.RequestsPerSecond
		lat += w.Latency.Avg
	}
	n := float64(len(windows))
	tput /= n
	lat /= n
	for _, w := range windows {
		if !within(w.RequestsPerSecond, tput, tolerance) || !within(w.Latency.Avg, lat, tolerance) {
			return false
		}
	}
	return true
}

func within(v, mean, tolerance float64) bool {
	if mean == 0 {
		return v == 0
	}
	d := (v - mean) / mean
	return d >= -tolerance && d <= tolerance
}
