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

// gapName names a cost row by the gap it asked the simulator for; the
// table prints the gaps actually produced beside it.
func gapName(d time.Duration) string {
	if d == 0 {
		return "asked 0 (back to back)"
	}
	return "asked " + d.String()
}

func printCost(out io.Writer, rows []costRow, o options) {
	fmt.Fprintf(out, "## (b) CPU of this process per output token (getrusage; simulator excluded): prober (direct path) and daemon path (engine.Engine + sinks) / raw read-and-discard client, %d interleaved triples of %v windows; median [min, max]\n", o.pairs, o.pairWindow)
	tw := newTable(out)
	fmt.Fprintln(tw, "chunk_gap\tproduced_gap_p50/p90/mean_us(P)\t(D)\t(R)\tstreams\tprober_tok/s\traw_tok/s\tprober_us/tok\tdaemon_us/tok\traw_us/tok\tprober/raw\tdaemon/raw\tdaemon/prober\tfailed\tratios_in_order(P,D)\t")
	gap := func(r costRow, c byte) string {
		g50, g90, mean := r.gaps(c)
		return num(1e6*g50, 0) + "/" + num(1e6*g90, 0) + "/" + num(1e6*mean, 0)
	}
	rng := func(s summary) string { return num(s.median, 2) + " [" + num(s.min, 2) + "-" + num(s.max, 2) + "]" }
	for _, r := range rows {
		pt, dt, rr := r.perToken(true), r.daemonPerToken(), r.perToken(false)
		failed := 0
		var order string
		var dp []float64
		for i, p := range r.pairs {
			failed += p.proberFail + p.rawFails + p.daemonFail
			if i > 0 {
				order += " "
			}
			order += p.order + ":" + num(p.ratio(), 2) + "," + num(p.daemonRatio(), 2)
			dp = append(dp, p.daemonRatio()/p.ratio())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", gapName(r.gap),
			gap(r, 'P'), gap(r, 'D'), gap(r, 'R'), r.streams,
			num(r.tokensPerSecond(true).median, 0), num(r.tokensPerSecond(false).median, 0),
			num(pt.median, 2), num(dt.median, 2), num(rr.median, 2), rng(r.ratios()), rng(r.daemonRatios()), rng(summarize(dp)), failed, order)
	}
	tw.Flush()
	fmt.Fprintln(out, "ratios_in_order: each triple's window order (P prober, D daemon path, R raw) and its prober/raw, daemon/raw")
	fmt.Fprintf(out, "produced_gap: time between consecutive content chunks as the simulator flushed them, median/p90/mean (ground truth of the last %d requests of every window); the asked gap is a timer's wish\n", gapSample)
}

func printBursts(out io.Writer, rows []burstRow, o options) {
	fmt.Fprintf(out, "## (d) Bursts of 64, %d measured per client and period in 2 alternating rounds; spread = first to last of a burst, µs: p50 / p99 / max\n", o.burstCount)
	tw := newTable(out)
	fmt.Fprintln(tw, "client\tconnections\tperiod\tbursts\tsent\tskipped\tfailed\tnew_conns\twrite_spread\tarrival_first_byte\tarrival_headers\tarrival_body_read\tlag_p50\tlag_p99\tmissing\t")
	spread := func(ds []time.Duration) string {
		return num(1e6*durQuantile(ds, 0.5), 0) + " / " + num(1e6*durQuantile(ds, 0.99), 0) + " / " + num(1e6*durQuantile(ds, 1), 0)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.client, r.conns, r.period, r.bursts, r.sent, r.skipped, r.failed, r.dials,
			spread(r.writes), spread(r.firstByte), spread(r.headers), spread(r.received),
			num(1e6*durQuantile(r.lags, 0.5), 0), num(1e6*durQuantile(r.lags, 0.99), 0), r.missing)
	}
	tw.Flush()
	fmt.Fprintln(out, "write_spread: the prober's Result.Start (taken just before the first byte is written), as llm_probe_burst_spread_seconds; raw clients: just before their Write")
	fmt.Fprintln(out, "arrival_*: the simulator's ground truth (monotonic): first read returning the request's bytes, head parsed, body read")
	fmt.Fprintln(out, "barrier: a goroutine per request blocked on a channel the release closes, connections dialled before; one writer: one goroutine writes all in turn")
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
