package bench

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// A rate step with --burstiness sends gamma arrivals: over the planned
// times of its requests (the arrival process's own clock, so a loaded
// machine does not change them), the mean gap is 1/rate and the gaps'
// coefficient of variation is 1/√burstiness. 600 gaps estimate the
// mean within about 8% and the CV within about 15% at five standard
// errors for burstiness 0.25, the most dispersed case here.
func TestBurstinessShapesArrivals(t *testing.T) {
	for _, b := range []float64{0.25, 1, 4} {
		o, stdout, _ := fakeOptions(&fakeDriver{delay: time.Millisecond, tokens: 2},
			Settings{Mode: ModeRate, Levels: []float64{300}, Burstiness: b, Duration: 2 * time.Second, Seed: 11})
		rep, code := Run(context.Background(), o)
		if code != ExitPass {
			t.Fatalf("burstiness %g: exit %d\n%s", b, code, stdout)
		}
		st := rep.Steps[0]
		if st.SkippedTotal > 0 {
			t.Fatalf("burstiness %g: %d arrivals skipped; the gaps below would be wrong", b, st.SkippedTotal)
		}
		var planned []time.Time
		for _, r := range st.records {
			planned = append(planned, r.planned)
		}
		slices.SortFunc(planned, func(a, b time.Time) int { return a.Compare(b) })
		var sum, sumSq float64
		n := float64(len(planned) - 1)
		for i := 1; i < len(planned); i++ {
			g := planned[i].Sub(planned[i-1]).Seconds()
			sum += g
			sumSq += g * g
		}
		mean := sum / n
		cv := math.Sqrt(sumSq/n-mean*mean) / mean
		t.Logf("burstiness %g: %d gaps, mean %.2f ms, CV %.2f", b, int(n), mean*1e3, cv)
		if math.Abs(mean*300-1) > 0.12 {
			t.Errorf("burstiness %g: mean gap %.3f ms, want %.3f ms", b, mean*1e3, 1e3/300.0)
		}
		if want := 1 / math.Sqrt(b); math.Abs(cv/want-1) > 0.2 {
			t.Errorf("burstiness %g: CV %.2f, want %.2f", b, cv, want)
		}
		if st.Burstiness != b {
			t.Errorf("step burstiness %g", st.Burstiness)
		}
	}
}
