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

func summarise(values []float64) Summary {
	s := stats.Summarise(values)
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

func (st *Stats) noteError(r *probe.Result) {
	if r.Err == nil {
		return
	}
	if _, ok := st.FirstErrors[string(r.Outcome)]; ok {
		return
	}
	if st.FirstErrors == nil {
		st.FirstErrors = map[string]string{}
	}
	msg := r.Err.Error()
	if len(msg) > maxErrorText {
		msg = strings.ToValidUTF8(msg[:maxErrorText], "") + "…"
	}
	st.FirstErrors[string(r.Outcome)] = msg
}

// computeStats applies the definitions of docs/metrics.md to a set of
// results: latency statistics over successes only, failures in outcomes
// and the error rate, throughput over the measurement span (genai-perf's
// definition).
func computeStats(results []*probe.Result) Stats {
	st := Stats{Requests: len(results), Outcomes: map[string]int{}}
	for _, o := range probe.Outcomes() {
		st.Outcomes[string(o)] = 0
	}
	var ttft, tpot, itl, lat, outTok, inTok []float64
	var first, last time.Time
	for _, r := range results {
		st.Outcomes[string(r.Outcome)]++
		end := r.Start.Add(r.EndToEnd)
		if first.IsZero() || r.Start.Before(first) {
			first = r.Start
		}
		if last.IsZero() || end.After(last) {
			last = end
		}
		if r.Outcome != probe.OutcomeSuccess {
			st.noteError(r)
			continue
		}
		st.Successes++
		if r.Streamed && r.TTFT > 0 {
			ttft = append(ttft, r.TTFT.Seconds())
		}
		if d, ok := r.TPOT(); ok {
			tpot = append(tpot, d.Seconds())
		}
		r.InterTokenLatencies(func(d time.Duration) { itl = append(itl, d.Seconds()) })
		lat = append(lat, r.EndToEnd.Seconds())
		outTok = append(outTok, float64(r.OutputTokens))
		st.OutputTokens += r.OutputTokens
		if r.InputTokensSource == probe.TokenSourceNone {
			st.InputTokensUnknown++
		} else {
			inTok = append(inTok, float64(r.InputTokens))
			st.InputTokens += r.InputTokens
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
	st.ITL = summarise(itl)
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
