package collector

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

func TestServerFetchLimit(t *testing.T) {
	for header, want := range map[string]time.Duration{
		"":       0,
		"abc":    0,
		"0":      0,
		"-1":     0,
		"NaN":    0,
		"+Inf":   0,
		"1e300":  0,
		"10":     9500 * time.Millisecond,
		"1":      500 * time.Millisecond,
		"2.5":    2 * time.Second,
		"0.8":    400 * time.Millisecond,
		"0.1":    50 * time.Millisecond,
		" 3 ":    0,
		"3s":     0,
		"1e-300": time.Nanosecond,
	} {
		h := http.Header{}
		if header != "" {
			h.Set(ScrapeTimeoutHeader, header)
		}
		if got := serverFetchLimit(h); got != want {
			t.Errorf("%s: %q: limit %s, want %s", ScrapeTimeoutHeader, header, got, want)
		}
	}
}

// The merge without re-checking gives what prometheus.Gatherers gives, to
// the byte in every format, where it applies; where families clash it
// leaves them to Gatherers, whose errors must then come back.
func TestParallelGatherersMatchesGatherers(t *testing.T) {
	_, main, _ := filledGoldenCollectors()
	other := prometheus.NewRegistry()
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llm_server_up", Help: "Up."}, []string{"target"})
	up.WithLabelValues("a").Set(1)
	other.MustRegister(up)
	empty := prometheus.NewRegistry()

	encode := func(mfs []*dto.MetricFamily, format expfmt.Format) string {
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}
	for name, gs := range map[string][]prometheus.Gatherer{
		"two":        {main, other},
		"one empty":  {main, empty},
		"other only": {empty, other},
	} {
		mfss := make([][]*dto.MetricFamily, len(gs))
		errs := make([]error, len(gs))
		for i, g := range gs {
			mfss[i], errs[i] = g.Gather()
		}
		fast, ok := disjointFamilies(mfss, errs)
		if !ok {
			t.Fatalf("%s: disjoint gatherers not merged directly", name)
		}
		want, err := prometheus.Gatherers(gs).Gather()
		if err != nil {
			t.Fatal(err)
		}
		got, err := parallelGatherers(gs).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []expfmt.Format{
			expfmt.NewFormat(expfmt.TypeTextPlain), expfmt.NewFormat(expfmt.TypeProtoDelim), expfmt.NewFormat(expfmt.TypeOpenMetrics),
		} {
			w := encode(want, f)
			if encode(fast, f) != w || encode(got, f) != w {
				t.Errorf("%s: %s: merged exposition differs from prometheus.Gatherers'", name, f)
			}
		}
	}

	// Clashes: the same family in both, and a histogram's _count beside it.
	dup := prometheus.NewRegistry()
	dup.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llm_server_up", Help: "Other help."}, func() float64 { return 1 }))
	hist := prometheus.NewRegistry()
	hist.MustRegister(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llm_server"}))
	count := prometheus.NewRegistry()
	count.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llm_server_count", Help: "Count."}, func() float64 { return 1 }))
	failing := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("broken") })
	for name, gs := range map[string][]prometheus.Gatherer{
		"same name":        {other, dup},
		"suffix collision": {hist, count},
		"gatherer error":   {other, failing},
	} {
		mfss := make([][]*dto.MetricFamily, len(gs))
		errs := make([]error, len(gs))
		for i, g := range gs {
			mfss[i], errs[i] = g.Gather()
		}
		if _, ok := disjointFamilies(mfss, errs); ok {
			t.Errorf("%s: merged without prometheus.Gatherers' checks", name)
		}
		if _, err := parallelGatherers(gs).Gather(); err == nil {
			t.Errorf("%s: no error from the merge", name)
		}
	}
}
