package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Series per probe: what one probe costs Prometheus. The daemon runs one
// default openai_chat probe with an SLO against the simulator, in each
// histogram form; once it has results, /metrics is scraped as protobuf
// (which carries the native part) and the series that name the probe are
// counted as Prometheus stores them: a counter or gauge is one series, a
// classic histogram one per bucket plus _sum and _count, a native
// histogram one. The histograms' classic and native parts are counted
// apart: a Prometheus that ingests native histograms keeps only the
// native part of a histogram that has one, unless told to scrape the
// classic part too (always_scrape_classic_histograms); in native form the
// histograms with exemplars (TTFT, request duration) still carry a lone
// +Inf classic bucket.

// seriesModes are the histogram forms, in the order they print.
var seriesModes = []string{"classic", "native", "both"}

// seriesCount is one form's count, split by family.
type seriesCount struct {
	mode string
	// requests is the probe's requests when it was scraped.
	requests float64
	// total counts every part; classic and native the histograms' parts,
	// other the counters and gauges.
	total, classic, native, other int
	// families maps each family name to its series for the probe.
	families map[string]int
}

const (
	seriesProbe        = "series"
	seriesTarget       = "sim"
	seriesRequestsWant = 3
)

func seriesConfig(simURL, mode string, tokens int) string {
	return fmt.Sprintf(`histograms: %s
targets:
  - name: %s
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - name: %s
        workload: perf
        schedule: {every: 1s}
        slo: {ttft: 250ms, tpot: 20ms, objective: 0.99}
workloads:
  perf:
    prompts:
      inline: [%q]
    max_tokens: %d
gpus:
  enabled: "false"
`, mode, seriesTarget, simURL, seriesProbe, prompt, tokens)
}

// measureSeries runs the daemon once per histogram form.
func measureSeries(ctx context.Context, o options, sim *simProcess) ([]seriesCount, error) {
	var out []seriesCount
	for _, mode := range seriesModes {
		c, err := seriesOf(ctx, o, sim, mode)
		if err != nil {
			return nil, fmt.Errorf("histograms %s: %w", mode, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func seriesOf(ctx context.Context, o options, sim *simProcess, mode string) (seriesCount, error) {
	sc := seriesCount{mode: mode}
	// Short answers: the series exist after the first results, the length
	// of the answer does not change them.
	d, err := startDaemon(ctx, o, sim, "series-"+mode+".yml", seriesConfig(sim.url, mode, 5), daemonStartupAllowance)
	if err != nil {
		return sc, err
	}
	defer d.stop()
	base := d.base
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams, err := scrapeFamilies(base + "/metrics")
		if err != nil {
			return sc, err
		}
		sc.requests, sc.families, sc.classic, sc.native, sc.other = countProbeSeries(fams, seriesProbe)
		sc.total = sc.classic + sc.native + sc.other
		if sc.requests >= seriesRequestsWant {
			return sc, nil
		}
		if time.Now().After(deadline) {
			return sc, fmt.Errorf("the probe had %v requests after 30 s, want %d: is the simulator answering?", sc.requests, seriesRequestsWant)
		}
		select {
		case <-ctx.Done():
			return sc, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// scrapeFamilies scrapes url as protobuf and decodes every family.
func scrapeFamilies(url string) ([]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptProtobuf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.NewFormat(expfmt.TypeProtoDelim))
	var fams []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return fams, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", url, err)
		}
		fams = append(fams, mf)
	}
}

// countProbeSeries counts the series of metrics labelled probe=name, as
// Prometheus stores them (by family, and the histograms' classic and
// native parts apart from the other series), and sums its
// llm_probe_requests_total.
func countProbeSeries(fams []*dto.MetricFamily, name string) (requests float64, by map[string]int, classic, native, other int) {
	by = map[string]int{}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			if !hasLabel(m, "probe", name) {
				continue
			}
			n := 1
			if h := m.GetHistogram(); h != nil {
				// Classic part: every le bucket, +Inf (which the
				// exposition adds when absent), _sum and _count. A
				// histogram without a native part is classic even with
				// no bucket listed (a summary histogram in the classic
				// form: +Inf, _sum and _count). A native one has a classic
				// part when the exposition lists any bucket, if only the
				// lone +Inf that carries an exemplar.
				le := 0
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						le++
					}
				}
				c := 0
				if !isNative(h) || len(h.GetBucket()) > 0 {
					c = le + 3
				}
				classic += c
				n = c
				if isNative(h) {
					native++
					n++
				}
			} else {
				if s := m.GetSummary(); s != nil {
					n = len(s.GetQuantile()) + 2
				}
				other += n
			}
			by[mf.GetName()] += n
			if mf.GetName() == "llm_probe_requests_total" {
				requests += m.GetCounter().GetValue()
			}
		}
	}
	return requests, by, classic, native, other
}

// isNative reports whether a histogram carries a native part: a schema
// with spans, a zero bucket, or the no-observation marker span.
func isNative(h *dto.Histogram) bool {
	return h.Schema != nil || h.ZeroThreshold != nil || len(h.GetPositiveSpan()) > 0 || len(h.GetNegativeSpan()) > 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func printSeries(out io.Writer, rows []seriesCount) {
	fmt.Fprintln(out, "## (f) Series per probe: one openai_chat probe with an SLO, the daemon's /metrics as protobuf, counted as Prometheus stores them")
	tw := newTable(out)
	fmt.Fprintln(tw, "histograms\trequests\tseries_all_parts\thistogram_classic_part\thistogram_native_part\tcounters_gauges\tseries_native_ingested\t")
	for _, r := range rows {
		// A Prometheus ingesting native histograms keeps only the native
		// part of a histogram that has one.
		ingested := r.total
		if r.native > 0 {
			ingested = r.native + r.other
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t\n", r.mode, r.requests, r.total, r.classic, r.native, r.other, ingested)
	}
	tw.Flush()
	for _, r := range rows {
		names := make([]string, 0, len(r.families))
		for n := range r.families {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(out, "%s:", r.mode)
		for _, n := range names {
			fmt.Fprintf(out, " %s=%d", n, r.families[n])
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "classic histogram: a series per bucket + _sum + _count; native: one series; counters and gauges: one")
	fmt.Fprintln(out, "series_native_ingested: what a Prometheus with native histograms on keeps by default (native part only where there is one; always_scrape_classic_histograms keeps all parts)")
}
