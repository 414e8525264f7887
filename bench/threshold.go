package bench

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// valueKind says what unit a threshold's value takes.
type valueKind int

const (
	kindDuration valueKind = iota // us/µs, ms, s; compared in seconds
	kindRatio                     // 1% or 0.01
	kindNumber                    // a plain number
)

var (
	summaryMetrics = []string{"ttft", "tpot", "itl", "latency", "output_tokens"}
	summaryStats   = []string{"avg", "min", "max", "p50", "p75", "p90", "p95", "p99"}
	scalarMetrics  = []string{"error_rate", "requests_per_second", "output_tokens_per_second", "input_tokens_per_second", "requests"}
)

// Threshold is one pass/fail condition checked against every step.
type Threshold struct {
	// Text is the threshold as written, for messages.
	Text   string  `json:"threshold"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"`
	kind   valueKind
}

var thresholdRE = regexp.MustCompile(`^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*(\S.*?)\s*$`)

// ThresholdHelp lists what ParseThreshold accepts.
func ThresholdHelp() string {
	return fmt.Sprintf("a threshold is <metric><op><value> with op one of < <= > >=; metric one of %s each with _%s, or %s; "+
		"time metrics take a duration with a unit (us, µs, ms, s: ttft_p95<500ms), error_rate a percentage or a ratio (error_rate<1%% or <0.01), "+
		"the others a plain number (output_tokens_per_second>200)",
		strings.Join(summaryMetrics, ", "), strings.Join(summaryStats, "|_"), strings.Join(scalarMetrics, ", "))
}

// ParseThreshold reads "<metric><op><value>", e.g. ttft_p95<500ms.
func ParseThreshold(s string) (Threshold, error) {
	m := thresholdRE.FindStringSubmatch(s)
	if m == nil {
		return Threshold{}, fmt.Errorf("threshold %q is not <metric><op><value>; %s", s, ThresholdHelp())
	}
	t := Threshold{Text: strings.TrimSpace(s), Metric: m[1], Op: m[2]}
	kind, ok := metricKind(t.Metric)
	if !ok {
		return Threshold{}, fmt.Errorf("threshold %q: unknown metric %q; %s", s, t.Metric, ThresholdHelp())
	}
	t.kind = kind
	v, err := parseValue(kind, m[3])
	if err != nil {
		return Threshold{}, fmt.Errorf("threshold %q: %w", s, err)
	}
	t.Value = v
	return t, nil
}

func metricKind(metric string) (valueKind, bool) {
	for _, s := range scalarMetrics {
		if metric == s {
			if s == "error_rate" {
				return kindRatio, true
			}
			return kindNumber, true
		}
	}
	i := strings.LastIndexByte(metric, '_')
	if i < 0 {
		return 0, false
	}
	base, stat := metric[:i], metric[i+1:]
	for _, b := range summaryMetrics {
		if b != base {
			continue
		}
		for _, s := range summaryStats {
			if s == stat {
				if b == "output_tokens" {
					return kindNumber, true
				}
				return kindDuration, true
			}
		}
	}
	return 0, false
}

var (
	durationRE = regexp.MustCompile(`^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s)$`)
	numberRE   = regexp.MustCompile(`^[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?$`)
)

func parseValue(kind valueKind, s string) (float64, error) {
	switch kind {
	case kindDuration:
		m := durationRE.FindStringSubmatch(s)
		if m == nil {
			if numberRE.MatchString(s) {
				return 0, fmt.Errorf("value %q needs a unit: us, µs, ms or s (e.g. 500ms)", s)
			}
			return 0, fmt.Errorf("value %q is not a duration; want a number with us, µs, ms or s (e.g. 500ms, 1.5s)", s)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		scale := map[string]float64{"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1}[m[2]]
		return finite(s, v*scale)
	case kindRatio:
		if p, ok := strings.CutSuffix(s, "%"); ok {
			p = strings.TrimSpace(p)
			if !numberRE.MatchString(p) {
				return 0, fmt.Errorf("value %q is not a percentage (e.g. 1%%)", s)
			}
			v, _ := strconv.ParseFloat(p, 64)
			if v > 100 {
				return 0, fmt.Errorf("percentage %q is above 100%%", s)
			}
			return finite(s, v/100)
		}
		if !numberRE.MatchString(s) {
			return 0, fmt.Errorf("value %q is not a percentage or ratio; error_rate takes 1%% or 0.01", s)
		}
		v, _ := strconv.ParseFloat(s, 64)
		if v > 1 {
			return 0, fmt.Errorf("ratio %q is above 1; write a percentage with %% (e.g. %s%%)", s, s)
		}
		return finite(s, v)
	default:
		if !numberRE.MatchString(s) {
			return 0, fmt.Errorf("value %q must be a plain number without a unit", s)
		}
		v, _ := strconv.ParseFloat(s, 64)
		return finite(s, v)
	}
}

func finite(s string, v float64) (float64, error) {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("value %q is out of range", s)
	}
	return v, nil
}

// Lookup returns the threshold's metric in st; false when it is undefined
// there (no successful request, no streamed answer, no requests at all).
func (t Threshold) Lookup(st *Stats) (float64, bool) {
	switch t.Metric {
	case "error_rate":
		return st.ErrorRate, st.Requests > 0
	case "requests_per_second":
		return st.RequestsPerSecond, st.MeasurementSeconds > 0
	case "output_tokens_per_second":
		return st.OutputTokensPerSecond, st.MeasurementSeconds > 0
	case "input_tokens_per_second":
		return st.InputTokensPerSecond, st.MeasurementSeconds > 0
	case "requests":
		return float64(st.Requests), true
	}
	i := strings.LastIndexByte(t.Metric, '_')
	var s Summary
	switch t.Metric[:i] {
	case "ttft":
		s = st.TTFT
	case "tpot":
		s = st.TPOT
	case "itl":
		s = st.ITL
	case "latency":
		s = st.Latency
	case "output_tokens":
		s = st.OutputTokensPerRequest
	}
	return s.stat(t.Metric[i+1:])
}

// Holds reports whether v satisfies the threshold.
func (t Threshold) Holds(v float64) bool {
	switch t.Op {
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	case ">":
		return v > t.Value
	default:
		return v >= t.Value
	}
}

// Format prints a value of the threshold's metric in its unit.
func (t Threshold) Format(v float64) string {
	switch t.kind {
	case kindDuration:
		return formatMS(v) + " ms"
	case kindRatio:
		return strconv.FormatFloat(v*100, 'f', 2, 64) + "%"
	default:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ThresholdResult is a threshold checked against every step.
type ThresholdResult struct {
	Threshold
	Passed bool `json:"passed"`
	// WorstStep is the 1-based index of the step furthest on the wrong
	// side (the first failing one without a value), 0 without steps.
	WorstStep  int      `json:"worst_step"`
	WorstLevel float64  `json:"worst_level"`
	WorstValue *float64 `json:"worst_value"`
	// Missing is set when a step had no value for the metric (e.g. no
	// successful request); such a step fails the threshold.
	Missing bool `json:"missing,omitempty"`
}

// Evaluate checks each threshold against every step. A step that has no
// value for the metric fails it: a bench without a successful request
// must not pass a latency objective.
func Evaluate(ths []Threshold, steps []*Step) []ThresholdResult {
	out := make([]ThresholdResult, 0, len(ths))
	for _, t := range ths {
		r := ThresholdResult{Threshold: t, Passed: len(steps) > 0}
		for _, s := range steps {
			v, ok := t.Lookup(&s.Stats)
			if !ok {
				if !r.Missing {
					r.Missing, r.Passed = true, false
					if r.WorstValue == nil {
						r.WorstStep, r.WorstLevel = s.Index, s.Level
					}
				}
				continue
			}
			if !t.Holds(v) {
				r.Passed = false
			}
			if r.WorstValue == nil || worse(t.Op, v, *r.WorstValue) {
				r.WorstStep, r.WorstLevel, r.WorstValue = s.Index, s.Level, &v
			}
		}
		out = append(out, r)
	}
	return out
}

// worse: for upper bounds the larger value is worse, for lower bounds the
// smaller.
func worse(op string, v, than float64) bool {
	if op == "<" || op == "<=" {
		return v > than
	}
	return v < than
}

func formatMS(seconds float64) string {
	ms := seconds * 1e3
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 3, 64)
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	default:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
}
