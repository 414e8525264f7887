package collector

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// promhttpEncoding is the encoding promhttp itself picks for an
// Accept-Encoding header: "gzip", "identity", or "" when it finds none
// acceptable (it then logs and sends identity).
func promhttpEncoding(t testing.TB, values []string) string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "G."}))
	var logged bytes.Buffer
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: log.New(&logged, "", 0)})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for _, v := range values {
		req.Header.Add("Accept-Encoding", v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	switch {
	case w.Header().Get("Content-Encoding") == "gzip":
		return "gzip"
	case strings.Contains(logged.String(), "error getting writer"):
		return ""
	default:
		return "identity"
	}
}

func TestNegotiateEncodingAsPromhttp(t *testing.T) {
	for _, values := range [][]string{
		nil, {""}, {"gzip"}, {"identity"}, {"*"}, {"br"}, {"zstd"}, {"gzip;q=0"}, {"gzip;q=0, identity;q=0"},
		{"*;q=0"}, {"identity;q=0.5, gzip;q=0.4"}, {"identity;q=0.4, gzip;q=0.5"}, {"gzip, deflate, br"},
		{"gzip ; q=1.000"}, {"gzip;q=2"}, {"gzip;x=1"}, {"br", "gzip"}, {"gzip;q=0", "*"}, {"identity;q=0, *;q=0.1"},
		{" gzip"}, {"GZIP"}, {"gzip;q=0.", "identity"}, {"x/y, gzip"},
	} {
		if got, want := negotiateEncoding(http.Header{"Accept-Encoding": values}), promhttpEncoding(t, values); got != want {
			t.Errorf("Accept-Encoding %q: %q, promhttp picks %q", values, got, want)
		}
	}
}

// The negotiation reads a header from the network: whatever it holds,
// the choice is promhttp's own, and nothing panics.
func FuzzNegotiateEncoding(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0, identity;q=0", "*;q=0.5, gzip;q=0.50", "a/b;q=1.9999999999999999999", "gzip,,identity", "\x80gzip"} {
		f.Add(s, "")
	}
	f.Add("br", "gzip;q=0.1")
	f.Fuzz(func(t *testing.T, a, b string) {
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		if got, want := negotiateEncoding(http.Header{"Accept-Encoding": values}), promhttpEncoding(t, values); got != want {
			t.Errorf("Accept-Encoding %q: %q, promhttp picks %q", values, got, want)
		}
	})
}

// A gzipped scrape is the plain scrape compressed, with promhttp's
// headers; an error response goes out plain, as promhttp sends it.
func TestHandlerGzip(t *testing.T) {
	_, reg, _ := filledGoldenCollectors()
	h := NewHandler(reg, NewServerMetrics(nil), promhttp.HandlerOpts{})
	get := func(enc string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	// stable is a page without the one series that changes between
	// scrapes: how long the model-server collector took.
	stable := func(b []byte) string {
		var keep []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if !strings.HasPrefix(line, "llm_prober_collector_duration_seconds{") {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	plain, zipped := get(""), get("gzip")
	if ce := plain.Header().Get("Content-Encoding"); ce != "" {
		t.Errorf("plain scrape: Content-Encoding %q", ce)
	}
	if ce := zipped.Header().Get("Content-Encoding"); ce != "gzip" {
		t.Fatalf("gzip scrape: Content-Encoding %q", ce)
	}
	for _, w := range []*httptest.ResponseRecorder{plain, zipped} {
		if v := w.Header().Values("Vary"); !slices.Contains(v, "Accept-Encoding") || !slices.Contains(v, "Accept") {
			t.Errorf("Vary %q, want Accept and Accept-Encoding as promhttp sends", v)
		}
	}
	zr, err := gzip.NewReader(zipped.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if stable(body) != stable(plain.Body.Bytes()) || len(body) == 0 {
		t.Errorf("gunzipped scrape (%d bytes) differs from the plain one (%d bytes)", len(body), plain.Body.Len())
	}
	// Twice more: the pooled writer is reset between scrapes.
	for range 2 {
		zr, err := gzip.NewReader(get("gzip").Body)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := io.ReadAll(zr); err != nil || stable(again) != stable(body) {
			t.Errorf("a later gzipped scrape differs (err %v)", err)
		}
	}

	w := httptest.NewRecorder()
	gw := &gzipResponse{ResponseWriter: w, pool: h.gzips, compress: true}
	http.Error(gw, "broken", http.StatusInternalServerError)
	gw.close()
	if w.Code != http.StatusInternalServerError || w.Body.String() != "broken\n" || w.Header().Get("Content-Encoding") != "" {
		t.Errorf("error response: %d %q Content-Encoding %q, want a plain 500", w.Code, w.Body, w.Header().Get("Content-Encoding"))
	}
}
