package bench

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/llm-prober/llm-prober/internal/stats"
)

func sketchOf(vs []float64) *Sketch {
	b := newSketchBuilder()
	for _, v := range vs {
		b.observe(v)
	}
	return b.sketch()
}

// Merging two sketches gives exactly the sketch of the union, and its
// percentiles stay within the sketch's relative error of the exact
// nearest-rank ones.
func TestSketchMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b []float64
	for range 20000 {
		a = append(a, 0.02+rng.ExpFloat64()*0.05)
		b = append(b, 0.05*math.Exp(rng.NormFloat64()))
	}
	a = append(a, 0) // a zero gap: no log bucket holds it
	merged := sketchOf(a).merge(sketchOf(b))
	union := sketchOf(append(slices.Clone(a), b...))
	if math.Abs(merged.Sum-union.Sum) > 1e-9*union.Sum {
		t.Errorf("sum %g, union's %g", merged.Sum, union.Sum)
	}
	merged.Sum = union.Sum
	if !reflect.DeepEqual(merged, union) {
		t.Fatalf("merged sketch differs from the union's")
	}
	if err := merged.check(); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	exact := stats.Summarise(all)
	got := merged.summary()
	for _, c := range []struct {
		name       string
		got, exact float64
	}{{"p50", got.P50, exact.P50}, {"p90", got.P90, exact.P90}, {"p99", got.P99, exact.P99}, {"min", got.Min, exact.Min}, {"max", got.Max, exact.Max}} {
		if rel := math.Abs(c.got-c.exact) / c.exact; rel > (sketchGamma-1)/(sketchGamma+1)+1e-12 {
			t.Errorf("%s %g, exact %g: %.3f%% off", c.name, c.got, c.exact, rel*100)
		}
	}
	if got.Count != len(all) || got.Min != 0 {
		t.Errorf("count %d min %g", got.Count, got.Min)
	}
}

func TestSketchCheckRejectsInconsistentSketches(t *testing.T) {
	good := sketchOf([]float64{0.1, 0.2, 0.2})
	for name, mutate := range map[string]func(s *Sketch){
		"count":     func(s *Sketch) { s.Count++ },
		"gamma":     func(s *Sketch) { s.Gamma = 2 },
		"order":     func(s *Sketch) { s.Buckets[0], s.Buckets[1] = s.Buckets[1], s.Buckets[0] },
		"zero":      func(s *Sketch) { s.Buckets[0][1] = 0 },
		"minmax":    func(s *Sketch) { s.Min, s.Max = s.Max, s.Min },
		"far index": func(s *Sketch) { s.Buckets[1][0] = 1 << 40 },
	} {
		s := *good
		s.Buckets = slices.Clone(good.Buckets)
		mutate(&s)
		if err := s.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var missing *Sketch
	if err := missing.check(); err == nil {
		t.Error("nil sketch accepted")
	}
}
