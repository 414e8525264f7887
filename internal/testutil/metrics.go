package testutil

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a parsed text exposition: its metric families by name.
type Families map[string]*dto.MetricFamily

// Gather collects g (a registry) into Families, failing the test on a
// gathering error.
func Gather(t testing.TB, g interface {
	Gather() ([]*dto.MetricFamily, error)
}) Families {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	f := make(Families, len(mfs))
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	return f
}

// ParseMetrics parses a text exposition (version 0.0.4), names checked as
// UTF-8 (a zero-value expfmt.TextParser would panic).
func ParseMetrics(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	return Families(mfs), err
}

// GetMetrics fetches and parses baseURL/metrics with c (nil: a client
// with a 10 s timeout); a status other than 200 is an error.
func GetMetrics(c *http.Client, baseURL string) (Families, error) {
	if c == nil {
		c = client
	}
	resp, err := c.Get(baseURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s/metrics: status %d: %s", baseURL, resp.StatusCode, b)
	}
	mfs, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: the exposition does not parse: %w", baseURL, err)
	}
	return mfs, nil
}

// Scrape is GetMetrics that fails the test on any error.
func Scrape(t testing.TB, baseURL string) Families {
	t.Helper()
	mfs, err := GetMetrics(nil, baseURL)
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	return mfs
}

// Series returns the series of family name that carry every label given
// as name, value pairs (no labels: all of its series).
func (f Families) Series(name string, labels ...string) []*dto.Metric {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("testutil: labels %q are not name, value pairs", labels))
	}
	var out []*dto.Metric
	for _, m := range f[name].GetMetric() {
		if hasLabels(m, labels) {
			out = append(out, m)
		}
	}
	return out
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}

// Label is the value of m's label name ("" when it has none).
func Label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// Sum adds up the values of the counter, gauge and untyped series of family
// name that carry every label given as name, value pairs; 0 when there are
// none.
func (f Families) Sum(name string, labels ...string) float64 {
	var v float64
	for _, m := range f.Series(name, labels...) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return v
}

// SampleLine finds the series written exactly as series (name and labels
// in exposition order, as in `up{job="x"}`) in a text exposition and
// returns its value as written and how many lines carry it.
func SampleLine(exposition, series string) (value string, n int) {
	for line := range strings.Lines(exposition) {
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), series+" "); ok {
			value = rest
			n++
		}
	}
	return value, n
}
