package bench

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/llm-prober/llm-prober/probe"
)

// SLO is the per-request objective behind goodput: a request is good when
// it succeeded and met every bound given. Zero bounds are not set.
type SLO struct {
	// TTFT, TPOT and Latency are upper bounds in seconds.
	TTFT, TPOT, Latency float64
	// Texts are the bounds as written, for outputs.
	Texts []string
}

var sloRE = regexp.MustCompile(`^\s*(ttft|tpot|latency)\s*(<=|<)\s*(\S.*?)\s*$`)

// sloHelp lists what ParseSLO accepts.
const sloHelp = "an SLO is ttft, tpot or latency (end to end) with < or <= and a duration with a unit, e.g. 'ttft<500ms', 'tpot<=50ms', 'latency<10s'"

// ParseSLO reads the --slo bounds; each metric may be given once.
func ParseSLO(specs []string) (SLO, error) {
	var s SLO
	for _, spec := range specs {
		m := sloRE.FindStringSubmatch(spec)
		if m == nil {
			return SLO{}, fmt.Errorf("--slo %q: %s", spec, sloHelp)
		}
		v, err := parseValue(kindDuration, m[3])
		if err != nil {
			return SLO{}, fmt.Errorf("--slo %q: %w", spec, err)
		}
		if !(v > 0) {
			return SLO{}, fmt.Errorf("--slo %q: the bound must be positive", spec)
		}
		var dst *float64
		switch m[1] {
		case "ttft":
			dst = &s.TTFT
		case "tpot":
			dst = &s.TPOT
		default:
			dst = &s.Latency
		}
		if *dst != 0 {
			return SLO{}, fmt.Errorf("--slo %q: %s is bounded twice", spec, m[1])
		}
		*dst = v
		s.Texts = append(s.Texts, strings.TrimSpace(spec))
	}
	return s, nil
}

// Set reports whether any bound is given.
func (s SLO) Set() bool { return s.TTFT > 0 || s.TPOT > 0 || s.Latency > 0 }

// good applies the SLO to one request. A request without a TTFT (not
// streamed) cannot show it met a TTFT bound, so it fails one; a one-token
// answer has no TPOT (docs/metrics.md) and passes a TPOT bound.
func (s SLO) good(sm *sample) bool {
	if sm.outcome != probe.OutcomeSuccess {
		return false
	}
	if s.TTFT > 0 && (sm.ttft <= 0 || sm.ttft.Seconds() > s.TTFT) {
		return false
	}
	if s.TPOT > 0 && sm.hasTPOT && sm.tpot.Seconds() > s.TPOT {
		return false
	}
	return s.Latency <= 0 || sm.endToEnd.Seconds() <= s.Latency
}

// Goodput is a step's share of good requests. Skipped open-loop arrivals
// count as offered and not good: a server that sheds load does not meet
// an objective by shedding it.
type Goodput struct {
	Good      int     `json:"good_requests"`
	Offered   int     `json:"offered_requests"`
	Ratio     float64 `json:"ratio"`
	Objective float64 `json:"objective"`
	// GoodPerSecond is good requests over the measurement span.
	GoodPerSecond float64 `json:"good_requests_per_second"`
	Passed        bool    `json:"passed"`
}

// wilsonLower is the lower bound of the Wilson score interval for k
// successes in n trials at z standard deviations: with few requests a
// share of bad ones is only clearly above the allowance when this bound
// is.
func wilsonLower(k, n int, z float64) float64 {
	if n == 0 {
		return 0
	}
	p := float64(k) / float64(n)
	nf := float64(n)
	d := 1 + z*z/nf
	c := p + z*z/(2*nf)
	r := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return (c - r) / d
}

// slope fits y = a + b·x by least squares and returns b and its t
// statistic (b over its standard error); t is 0 with fewer than three
// points or no spread in x, and +Inf for a perfect positive fit.
func slope(xs, ys []float64) (b, t float64) {
	n := float64(len(xs))
	if len(xs) < 3 {
		return 0, 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	b = sxy / sxx
	var sse float64
	for i := range xs {
		e := ys[i] - my - b*(xs[i]-mx)
		sse += e * e
	}
	se := math.Sqrt(sse / (n - 2) / sxx)
	switch {
	case se > 0:
		return b, b / se
	case b > 0:
		return b, math.Inf(1)
	case b < 0:
		return b, math.Inf(-1)
	}
	return 0, 0
}
