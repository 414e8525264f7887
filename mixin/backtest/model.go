package backtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Server is the latency and error model of a healthy server, as one probe
// sees it: independent requests, TTFT and TPOT each a lognormal with a
// heavy tail (a small fraction of requests TailFactor times slower: a
// queue, a preemption, a long prompt ahead), and transient errors.
type Server struct {
	TTFTMedian, TTFTSigma float64 // seconds; lognormal body
	TPOTMedian, TPOTSigma float64 // seconds per output token
	// TailFraction of requests take TailFactor times the body's draw, for
	// TTFT and (independently) TPOT.
	TailFraction, TailFactor float64
	OutputTokens             int
	// ErrorRate: requests ending http_5xx at once, independently.
	ErrorRate float64
	// Timeout is the probe's: a request not answered by then ends timeout.
	Timeout time.Duration
	// HealthySpend is the share of the TTFT SLO's error budget a healthy
	// server spends (tail and errors together); SLOFor sets the TTFT
	// threshold to it. TPOT's tail gets a tenth of TTFT's.
	HealthySpend float64
}

// DefaultServer is the healthy background of every scenario.
func DefaultServer() Server {
	return Server{
		TTFTMedian: 0.25, TTFTSigma: 0.35,
		TPOTMedian: 0.02, TPOTSigma: 0.15,
		TailFraction: 0.003, TailFactor: 5,
		OutputTokens: 64,
		ErrorRate:    0.0002,
		Timeout:      30 * time.Second,
		HealthySpend: 0.5,
	}
}

// SLO is one probe's declared SLO: thresholds and objective.
type SLO struct {
	Objective  float64
	TTFT, TPOT time.Duration
}

// survival is P(X > x) for the mixture of lognormal(median, sigma) with
// weight 1-tail and factor times it with weight tail.
func survival(x, median, sigma, tail, factor float64) float64 {
	sf := func(m float64) float64 {
		z := (math.Log(x) - math.Log(m)) / sigma
		return 0.5 * math.Erfc(z/math.Sqrt2)
	}
	return (1-tail)*sf(median) + tail*sf(median*factor)
}

// quantileAbove returns x with survival(x) = p, by bisection in log space.
func quantileAbove(p, median, sigma, tail, factor float64) float64 {
	lo, hi := median/1e3, median*factor*1e3
	for range 200 {
		mid := math.Sqrt(lo * hi)
		if survival(mid, median, sigma, tail, factor) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// SLOFor returns the SLO a probe with objective declares in the backtest:
// thresholds set so that the healthy server spends HealthySpend of the
// TTFT SLO's budget. Thresholds are whole milliseconds, as a config
// would write them.
func (s Server) SLOFor(objective float64) SLO {
	budget := 1 - objective
	tail := (s.HealthySpend*budget - s.ErrorRate) / (1 - s.ErrorRate)
	if tail <= 0 {
		panic(fmt.Sprintf("objective %v: errors alone spend more than %v of the budget", objective, s.HealthySpend))
	}
	ttft := quantileAbove(tail, s.TTFTMedian, s.TTFTSigma, s.TailFraction, s.TailFactor)
	tpot := quantileAbove(tail/10, s.TPOTMedian, s.TPOTSigma, s.TailFraction, s.TailFactor)
	ms := func(x float64) time.Duration { return time.Duration(math.Round(x*1000)) * time.Millisecond }
	return SLO{Objective: objective, TTFT: ms(ttft), TPOT: ms(tpot)}
}

// BadRatios returns the expected ratio of bad requests of a healthy
// server for each SLO (ttft, tpot, goodput) under slo.
func (s Server) BadRatios(slo SLO) (ttft, tpot, goodput float64) {
	pt := survival(slo.TTFT.Seconds(), s.TTFTMedian, s.TTFTSigma, s.TailFraction, s.TailFactor)
	pp := survival(slo.TPOT.Seconds(), s.TPOTMedian, s.TPOTSigma, s.TailFraction, s.TailFactor)
	ok := 1 - s.ErrorRate
	return 1 - ok*(1-pt), 1 - ok*(1-pp), 1 - ok*(1-pt)*(1-pp)
}

// draw returns one lognormal-with-tail value.
func draw(rng *rand.Rand, median, sigma, tail, factor float64) float64 {
	v := median * math.Exp(sigma*rng.NormFloat64())
	if rng.Float64() < tail {
		v *= factor
	}
	return v
}

func (s Server) ttft(rng *rand.Rand) float64 {
	return draw(rng, s.TTFTMedian, s.TTFTSigma, s.TailFraction, s.TailFactor)
}

func (s Server) tpot(rng *rand.Rand) float64 {
	return draw(rng, s.TPOTMedian, s.TPOTSigma, s.TailFraction, s.TailFactor)
}

// RegressionFactor is the TTFT multiplier under which the typical (median)
// request takes k times the threshold of slo.
func (s Server) RegressionFactor(slo SLO, k float64) float64 {
	return k * slo.TTFT.Seconds() / s.TTFTMedian
}
