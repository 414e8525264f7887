package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

func us(seconds float64) string {
	if math.IsNaN(seconds) {
		return "-"
	}
	return fmt.Sprintf("%+.0f", seconds*1e6)
}

func perUnit(d time.Duration, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(d.Microseconds()) / float64(n)
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

func printTables(out io.Writer, rows []stepResult, o options) {
	fmt.Fprintln(out, "## Truth: prober read time - simulator flush time (µs; sample of each step's successful requests)")
	tw := newTable(out)
	fmt.Fprintln(tw, "step\tcompared\tmissing\tfailed\tttft_p50\tttft_p99\ttoken_p50\ttoken_p99\ttoken_max\t")
	for _, r := range rows {
		t := r.truth
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.step.name, t.compared, t.missing+t.mismatched, t.failed,
			us(quantile(t.first, 0.5)), us(quantile(t.first, 0.99)),
			us(quantile(t.token, 0.5)), us(quantile(t.token, 0.99)), us(quantile(t.token, 1)))
	}
	tw.Flush()

	fmt.Fprintln(out, "\n## Cost: CPU of this process (getrusage RUSAGE_SELF; simulator excluded), prober vs raw net/http client")
	tw = newTable(out)
	fmt.Fprintln(tw, "step\treqs\ttokens/s\tcpu_%\tcpu_us/req\tcpu_us/tok\traw_reqs\traw_cpu_%\traw_us/tok\tratio\trss_MB\tsim_cpu_%\traw_sim_cpu_%\t")
	for _, r := range rows {
		p, w := r.prober, r.raw
		ptok, rtok := perUnit(p.use.cpu, p.tokens), perUnit(w.use.cpu, w.tokens)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.step.name,
			p.requests, num(float64(p.tokens)/p.use.wall.Seconds(), 0),
			num(100*p.use.cpu.Seconds()/p.use.wall.Seconds(), 0),
			num(perUnit(p.use.cpu, p.requests), 0), num(ptok, 2),
			w.requests, num(100*w.use.cpu.Seconds()/w.use.wall.Seconds(), 0), num(rtok, 2),
			num(ptok/rtok, 2), num(r.rssMB, 1),
			num(100*p.use.simCPU.Seconds()/p.use.wall.Seconds(), 0), num(100*w.use.simCPU.Seconds()/w.use.wall.Seconds(), 0))
	}
	tw.Flush()

	fmt.Fprintln(out, "\n## Schedules: planned vs sent (prober, schedule.Runner)")
	tw = newTable(out)
	fmt.Fprintln(tw, "step\tplanned\tsent\tskipped\tfailed\tnew_conns\tplanned_rate\tachieved_rate\tvs_nominal_%\tlag_p50_us\tlag_p99_us\tpresend_p50_us\tbursts\tspread_p50_us\tspread_max_us\t")
	for _, r := range rows {
		p := r.prober
		var lags, presend []time.Duration
		failed, dials := 0, 0
		for _, run := range p.runs {
			if run.res.Phases.HasConnect {
				dials++
			}
			lags = append(lags, max(run.res.Start.Sub(run.planned), 0))
			presend = append(presend, run.res.Start.Sub(run.called))
			if run.res.Outcome != "success" {
				failed++
			}
		}
		planned := p.requests + int(p.skipped.Load())
		secs := o.stepDuration.Seconds()
		nominal, vs := "-", "-"
		if r.step.kind == poissonRate {
			nominal = num(r.step.rate, 1)
			vs = fmt.Sprintf("%+.2f", 100*(float64(p.requests)/secs/r.step.rate-1))
		}
		spreadP50, spreadMax := "-", "-"
		if len(p.spreads) > 0 {
			spreadP50, spreadMax = num(durQuantile(p.spreads, 0.5)*1e6, 0), num(durQuantile(p.spreads, 1)*1e6, 0)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.step.name,
			planned, p.requests, p.skipped.Load(), failed, dials, nominal, num(float64(p.requests)/secs, 1), vs,
			num(durQuantile(lags, 0.5)*1e6, 0), num(durQuantile(lags, 0.99)*1e6, 0), num(durQuantile(presend, 0.5)*1e6, 0),
			len(p.spreads), spreadP50, spreadMax)
	}
	tw.Flush()
}
