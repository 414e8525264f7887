package remotewrite

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A series keeps one label slice across gathers, its own label wins over
// an external one, and series that went are forgotten.
func TestFlattenInterns(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "g"}, []string{"location", "x"})
	reg.MustRegister(g)
	g.WithLabelValues("own", "1").Set(1)
	g.WithLabelValues("own", "2").Set(2)
	in := newInterner()
	gather := func() []sample {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		s := flatten(mfs, []Label{{"location", "ext"}, {"zone", "z"}}, 1, in)
		in.rotate()
		return s
	}
	a, b := gather(), gather()
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("%d and %d samples", len(a), len(b))
	}
	want := []Label{{"__name__", "g"}, {"location", "own"}, {"x", "1"}, {"zone", "z"}}
	if got := a[0].labels; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("labels %v, want %v", got, want)
	}
	if &a[0].labels[0] != &b[0].labels[0] {
		t.Error("the same series got a new label slice in the next gather")
	}
	g.DeleteLabelValues("own", "2")
	gather()
	gather()
	if len(in.prev) != 1 {
		t.Errorf("interner holds %d series, want the 1 still gathered", len(in.prev))
	}
}

func BenchmarkFlatten(b *testing.B) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: prometheus.DefBuckets}, []string{"target", "probe"})
	reg.MustRegister(h)
	for i := range 1000 {
		h.WithLabelValues("t", string(rune('a'+i%26))+string(rune('a'+i/26))).Observe(0.1)
	}
	mfs, _ := reg.Gather()
	in := newInterner()
	ext := []Label{{"location", "x"}}
	b.ReportAllocs()
	for b.Loop() {
		flatten(mfs, ext, 1, in)
		in.rotate()
	}
}
