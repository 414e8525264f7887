package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The scale section (issue 30, items 3 and 4): a daemon with thousands of
// probes whose schedules keep it nearly idle, measured for its idle CPU,
// then scraped every 15 s as Prometheus would for its RSS and scrape
// times; and a daemon of 1,000 probes sending 16-token requests every
// 60 s and every 5 s, for the CPU each request costs.

// scaleRun is one daemon the scale section starts.
type scaleRun struct {
	probes, perTarget int
	every             time.Duration
	// scrapeEvery is the scrape interval of the scraped window; 0: the
	// run measures requests only.
	scrapeEvery time.Duration
}

// scaleStats is what one scaleRun measured.
type scaleStats struct {
	run scaleRun
	// CPU over the unscraped window, as a share of one core; requests
	// answered in it (any outcome).
	cpuPercent float64
	requests   float64
	window     time.Duration
	// The scraped window: RSS sampled every second, its scrapes.
	rssBefore, rssMax, rssEnd float64
	scrapedCPUPercent         float64
	scrapes                   []time.Duration
	scrapeBytes               int
}

// scaleConfig is the daemon configuration of r: daemonConfig.yaml's
// probes (each every r.every with as much jitter, so they spread over the
// interval, with SLOs so that every series a probe can have exists),
// r.perTarget to a target.
func scaleConfig(r scaleRun, simURL string, tokens int) string {
	c := daemonConfig{targets: max(1, r.probes/r.perTarget), probesPerTarget: min(r.probes, r.perTarget), every: r.every}
	return c.yaml(simURL, tokens)
}

// measureScale starts the daemon of r and measures it: first for window
// unscraped (CPU and requests), then, when r.scrapeEvery is set, for
// window scraped every r.scrapeEvery with gzipped text (RSS every second,
// CPU, the scrapes). The requests are counted by a scrape before and
// after the unscraped window, outside it.
func measureScale(ctx context.Context, o options, sim *simProcess, r scaleRun) (scaleStats, error) {
	st := scaleStats{run: r, window: o.scaleWindow}
	d, err := startDaemon(ctx, o, sim, fmt.Sprintf("llm-prober-scale-%d-%d-%s.yml", r.probes, r.perTarget, r.every),
		scaleConfig(r, sim.url, o.scaleTokens), daemonStartupAllowance+time.Duration(r.probes)*time.Millisecond)
	if err != nil {
		return st, err
	}
	defer d.stop()
	base, pid := d.base, d.pid
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// The warm-up lets every probe run once (the jitter spreads first
	// runs over an interval) and the start-up's garbage settle.
	if err := sleep(min(r.every, o.scaleWarmup)); err != nil {
		return st, err
	}
	count := func() (float64, error) {
		body, _, err := scrape(base+"/metrics", acceptText)
		return sumSeries(string(body), "llm_probe_requests_total{"), err
	}
	n0, err := count()
	if err != nil {
		return st, err
	}
	// Let the counting scrape's garbage be collected outside the window.
	if err := sleep(2 * time.Second); err != nil {
		return st, err
	}
	cpu0, t0 := procCPU(pid), time.Now()
	if err := sleep(o.scaleWindow); err != nil {
		return st, err
	}
	st.cpuPercent = 100 * (procCPU(pid) - cpu0).Seconds() / time.Since(t0).Seconds()
	n1, err := count()
	if err != nil {
		return st, err
	}
	st.requests = n1 - n0
	if r.scrapeEvery == 0 {
		return st, nil
	}

	st.rssBefore = rssMB(pid)
	cpu0, t0 = procCPU(pid), time.Now()
	next := t0
	for end := t0.Add(o.scaleWindow); time.Now().Before(end); {
		if !time.Now().Before(next) {
			b, d, err := scrape(base+"/metrics", acceptText)
			if err != nil {
				return st, err
			}
			st.scrapes = append(st.scrapes, d)
			st.scrapeBytes = len(b)
			next = next.Add(r.scrapeEvery)
		}
		st.rssMax = max(st.rssMax, rssMB(pid))
		if err := sleep(time.Second); err != nil {
			return st, err
		}
	}
	st.scrapedCPUPercent = 100 * (procCPU(pid) - cpu0).Seconds() / time.Since(t0).Seconds()
	st.rssEnd = rssMB(pid)
	st.rssMax = max(st.rssMax, st.rssEnd)
	return st, nil
}

// scaleRuns are the section's daemons: each of -scale-probes with one
// request per probe per -scale-idle-every (idle), scraped every
// -scale-scrape-every; then 1,000 probes (on 1,000 targets) at each of
// -scale-request-every, unscraped.
func scaleRuns(o options) ([]scaleRun, error) {
	var runs []scaleRun
	for f := range strings.SplitSeq(o.scaleProbes, ",") {
		if strings.TrimSpace(f) == "" {
			continue // -scale-probes '': no idle daemons
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-scale-probes: %q is not a positive number of probes", f)
		}
		// 10 probes per target, as BenchmarkExpositionScale has them.
		runs = append(runs, scaleRun{probes: n, perTarget: 10, every: o.scaleIdleEvery, scrapeEvery: o.scaleScrapeEvery})
	}
	for f := range strings.SplitSeq(o.scaleRequestEvery, ",") {
		if strings.TrimSpace(f) == "" {
			continue // -scale-request-every '': no request runs
		}
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-scale-request-every: %q is not a positive duration such as 60s", f)
		}
		// One probe per target, as issue 30 has them: each target
		// has its own connections, idle between the probe's runs.
		runs = append(runs, scaleRun{probes: 1000, perTarget: 1, every: d})
	}
	return runs, nil
}

// printScale prints the runs; CPU per request is the window's CPU time
// over its requests, and again less the idle CPU of the same number of
// probes when an idle run measured it.
func printScale(out io.Writer, rows []scaleStats, o options) {
	fmt.Fprintf(out, "## (g) Scale: idle daemons scraped every %s (gzipped text), and CPU per %d-token request; window %s\n", o.scaleScrapeEvery, o.scaleTokens, o.scaleWindow)
	idle := map[int]float64{}
	for _, s := range rows {
		if s.run.every == o.scaleIdleEvery {
			idle[s.run.probes] = s.cpuPercent
		}
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "probes\tevery\trequests\trequests_per_s\tcpu_%\tcpu_ms_per_request\tcpu_ms_per_request_less_idle\tscrapes\tscrape_p50_ms\tscrape_max_ms\tscrape_bytes\tscraped_cpu_%\trss_before_MB\trss_max_MB\trss_end_MB\t")
	for _, s := range rows {
		perReq, lessIdle := "-", "-"
		cpuMS := s.cpuPercent / 100 * s.window.Seconds() * 1000
		if s.requests > 0 {
			perReq = num(cpuMS/s.requests, 2)
			if i, ok := idle[s.run.probes]; ok && s.run.every != o.scaleIdleEvery {
				lessIdle = num((s.cpuPercent-i)/100*s.window.Seconds()*1000/s.requests, 2)
			}
		}
		p50, mx := "-", "-"
		if len(s.scrapes) > 0 {
			p50 = num(durQuantile(s.scrapes, 0.5)*1000, 1)
			var m time.Duration
			for _, d := range s.scrapes {
				m = max(m, d)
			}
			mx = num(float64(m.Microseconds())/1000, 1)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.run.probes, s.run.every, s.requests,
			num(s.requests/s.window.Seconds(), 1), num(s.cpuPercent, 2), perReq, lessIdle, len(s.scrapes), p50, mx, s.scrapeBytes,
			num(s.scrapedCPUPercent, 1), num(s.rssBefore, 1), num(s.rssMax, 1), num(s.rssEnd, 1))
	}
	tw.Flush()
}
