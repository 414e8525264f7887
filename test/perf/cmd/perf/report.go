package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

func itoa(n int) string { return strconv.Itoa(n) }

// us formats seconds as signed microseconds.
func us(seconds float64) string {
	if math.IsNaN(seconds) {
		return "-"
	}
	return fmt.Sprintf("%+.0f", seconds*1e6)
}

func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func printOverhead(out io.Writer, rows []overheadRow, o options) {
	fmt.Fprintf(out, "## (a) Client overhead: TTFT - simulator's (request read -> first token write begins), µs; closed loop, %v per client, sample of %d\n", o.stepDuration, o.truthSample)
	tw := newTable(out)
	fmt.Fprintln(tw, "streams\tclient\trequests\tcompared\tmissing\tfailed\tttft_p50_ms\tref_p50_ms\toverhead_min\toverhead_p50\toverhead_p99\toverhead_max\tflush_based_min\t")
	line := func(n int, client string, reqs int, s overheadStats) {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n, client, reqs, s.compared, s.missing, s.failed,
			num(1e3*quantile(s.ttft, 0.5), 3), num(1e3*quantile(s.ref, 0.5), 3),
			us(quantile(s.overhead, 0)), us(quantile(s.overhead, 0.5)), us(quantile(s.overhead, 0.99)), us(quantile(s.overhead, 1)),
			us(quantile(s.flushBased, 0)))
	}
	for _, r := range rows {
		line(r.streams, "prober", r.proberRequest, r.prober)
		line(r.streams, "raw", r.rawRequest, r.raw)
	}
	tw.Flush()
}

func gapName(d time.Duration) string {
	if d == 0 {
		return "0 (back to back)"
	}
	return d.String()
}

func printCost(out io.Writer, rows []costRow, o options) {
	fmt.Fprintf(out, "## (b) CPU of this process per output token (getrusage; simulator excluded): prober / raw read-and-discard client, %d interleaved pairs of %v windows; median [min, max]\n", o.pairs, o.pairWindow)
	tw := newTable(out)
	fmt.Fprintln(tw, "chunk_gap\tstreams\tprober_tok/s\traw_tok/s\tprober_us/tok\traw_us/tok\tratio_median\tratio_min\tratio_max\tfailed\tratios_in_order\t")
	for _, r := range rows {
		rt, pt := r.ratios(), r.perToken(true)
		rr := r.perToken(false)
		failed := 0
		var order string
		for i, p := range r.pairs {
			failed += p.proberFail + p.rawFails
			if i > 0 {
				order += " "
			}
			first := "P"
			if !p.proberFirst {
				first = "R"
			}
			order += first + ":" + num(p.ratio(), 2)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", gapName(r.gap), r.streams,
			num(r.tokensPerSecond(true).median, 0), num(r.tokensPerSecond(false).median, 0),
			num(pt.median, 2), num(rr.median, 2), num(rt.median, 2), num(rt.min, 2), num(rt.max, 2), failed, order)
	}
	tw.Flush()
	fmt.Fprintln(out, "ratios_in_order: P: the prober's window ran first in the pair, R: the raw client's")
}

func printBursts(out io.Writer, rows []burstRow, o options) {
	fmt.Fprintf(out, "## (d) Bursts of 64 every second, %v per variant in 2 alternating rounds; spread = first to last, µs\n", o.burstDuration)
	tw := newTable(out)
	fmt.Fprintln(tw, "variant\tconnections\tbursts\tsent\tskipped\tfailed\tnew_conns\tstart_spread_p50\tstart_spread_p99\tstart_spread_max\tserver_spread_p50\tserver_spread_p99\tserver_spread_max\tlag_p50\tlag_p99\tmissing\t")
	for _, r := range rows {
		lags, failed, dials := lagsOf(r.runs)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.name, r.conns, len(r.spreads), len(r.runs), r.skipped, failed, dials,
			num(1e6*durQuantile(r.spreads, 0.5), 0), num(1e6*durQuantile(r.spreads, 0.99), 0), num(1e6*durQuantile(r.spreads, 1), 0),
			num(1e6*durQuantile(r.serverSpreads, 0.5), 0), num(1e6*durQuantile(r.serverSpreads, 0.99), 0), num(1e6*durQuantile(r.serverSpreads, 1), 0),
			num(1e6*durQuantile(lags, 0.5), 0), num(1e6*durQuantile(lags, 0.99), 0), r.missing)
	}
	tw.Flush()
	fmt.Fprintln(out, "start_spread: Result.Start, as llm_probe_burst_spread_seconds; server_spread: the simulator's time of having read each request")
	fmt.Fprintln(out, "connections: pooled (kept alive by the server) or new (the server closes each after its answer, as llama.cpp's does; new_conns counts dials)")
}

func printSchedules(out io.Writer, rows []scheduleRow, o options) {
	fmt.Fprintf(out, "## (e) Schedule accuracy, open loop, %v each (schedule.Runner through the engine)\n", o.stepDuration)
	tw := newTable(out)
	fmt.Fprintln(tw, "process\tnominal/s\tplanned\tsent\tskipped\tfailed\tnew_conns\tachieved/s\tvs_nominal_%\tlag_p50_us\tlag_p99_us\tlag_p99.9_us\tlag_max_us\t")
	for _, r := range rows {
		p := r.stats
		lags, failed, dials := lagsOf(p.runs)
		secs := o.stepDuration.Seconds()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%+.2f\t%s\t%s\t%s\t%s\t\n", r.name, num(r.rate, 0),
			p.requests+int(p.skipped.Load()), p.requests, p.skipped.Load(), failed, dials,
			num(float64(p.requests)/secs, 1), 100*(float64(p.requests)/secs/r.rate-1),
			num(1e6*durQuantile(lags, 0.5), 0), num(1e6*durQuantile(lags, 0.99), 0), num(1e6*durQuantile(lags, 0.999), 0),
			num(1e6*durQuantile(lags, 1), 0))
	}
	tw.Flush()
	fmt.Fprintln(out, "Poisson: the realised count itself varies by about ±√N (±2.2 % at 2 000)")
	fmt.Fprintln(out, "lag quantiles are nearest rank below: p99.9 of 2 000 lags is the third largest")
}
