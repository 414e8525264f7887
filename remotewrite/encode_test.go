package remotewrite

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A gathered histogram and gauge come back from the wire as the series a
// scrape would have, with the external labels a series lacks.
func TestFlattenEncodeRoundTrip(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "g"}, []string{"location"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h", Buckets: []float64{0.25, 1}})
	reg.MustRegister(g, h)
	g.WithLabelValues("own").Set(3)
	h.Observe(0.5)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, encode(nil, flatten(mfs, []Label{{"location", "ext"}, {"zone", "z"}}, 1234)))
	want := map[string]float64{
		`g{location="own",zone="z"}`:                          3,
		`h_seconds_bucket{le="0.25",location="ext",zone="z"}`: 0,
		`h_seconds_bucket{le="1",location="ext",zone="z"}`:    1,
		`h_seconds_bucket{le="+Inf",location="ext",zone="z"}`: 1,
		`h_seconds_sum{location="ext",zone="z"}`:              0.5,
		`h_seconds_count{location="ext",zone="z"}`:            1,
	}
	if len(got) != len(want) {
		t.Errorf("%d samples, want %d: %v", len(got), len(want), got)
	}
	for _, s := range got {
		key := s.labels["__name__"] + "{"
		first := true
		for _, n := range []string{"le", "location", "zone"} {
			if v, ok := s.labels[n]; ok {
				if !first {
					key += ","
				}
				key += n + `="` + v + `"`
				first = false
			}
		}
		key += "}"
		if v, ok := want[key]; !ok || v != s.value || s.ts != 1234 {
			t.Errorf("unexpected sample %s = %v at %d", key, s.value, s.ts)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: prometheus.DefBuckets}, []string{"target", "probe"})
	reg.MustRegister(h)
	for i := range 200 {
		h.WithLabelValues("t", string(rune('a'+i%26))+string(rune('a'+i/26))).Observe(0.1)
	}
	mfs, _ := reg.Gather()
	samples := flatten(mfs, []Label{{"location", "x"}}, 1)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = encode(buf[:0], samples)
	}
}
