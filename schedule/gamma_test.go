package schedule

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestGammaArrivalsMatchTarget draws many gaps for several burstiness
// factors and checks the sample against the target: mean 1/rate, and a
// coefficient of variation 1/√burstiness (1 for Poisson). The tolerances
// are about five standard errors for 200 000 gaps, so a fixed seed is
// not what makes the test pass.
func TestGammaArrivalsMatchTarget(t *testing.T) {
	const rate, n = 40.0, 200000
	for _, b := range []float64{0.25, 0.5, 1, 2, 8} {
		m := Spec{Rate: rate, Burstiness: b}.mode()
		start := time.Unix(0, 0)
		arr := m.newArrivals(start, rand.New(rand.NewPCG(uint64(b*100), 7)))
		prev := start
		var sum, sumSq float64
		for range n {
			at, k := arr.next()
			if k != 1 || at.Before(prev) {
				t.Fatalf("burstiness %g: arrival %v (count %d) before %v", b, at, k, prev)
			}
			g := at.Sub(prev).Seconds()
			prev = at
			sum += g
			sumSq += g * g
		}
		mean := sum / n
		cv := math.Sqrt(sumSq/n-mean*mean) / mean
		if want := 1 / rate; math.Abs(mean-want)/want > 0.02 {
			t.Errorf("burstiness %g: mean gap %.5fs, want %.5fs ±2%%", b, mean, want)
		}
		if want := 1 / math.Sqrt(b); math.Abs(cv-want)/want > 0.04 {
			t.Errorf("burstiness %g: coefficient of variation %.3f, want %.3f ±4%%", b, cv, want)
		}
	}
}

func TestGammaShapeBelowOneIsFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		if v := Gamma(rng, 0.05); math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("Gamma(0.05) = %g", v)
		}
	}
}

func TestTraceArrivalsReplayOffsetsThenEnd(t *testing.T) {
	offsets := []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond, time.Second}
	m := Spec{Trace: offsets}.mode()
	start := time.Unix(100, 0)
	arr := m.newArrivals(start, rand.New(rand.NewPCG(1, 1)))
	for i, off := range offsets {
		at, n := arr.next()
		if n != 1 || !at.Equal(start.Add(off)) {
			t.Fatalf("arrival %d at %v ×%d, want %v", i, at, n, start.Add(off))
		}
	}
	if at, _ := arr.next(); !at.IsZero() {
		t.Fatalf("arrival after the trace's end: %v", at)
	}
	if got := m.String(); got != "trace=4 arrivals over 1s" {
		t.Errorf("String() = %q", got)
	}
}
