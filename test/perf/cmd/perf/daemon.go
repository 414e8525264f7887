package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonConfig is how many probes the daemon runs and how often each
// sends.
type daemonConfig struct {
	targets, probesPerTarget int
	every                    time.Duration
	duration                 time.Duration
}

func (c daemonConfig) probes() int { return c.targets * c.probesPerTarget }

// daemonConfigs: 100 probes every 2 s (50 requests/s), and 1 000 probes
// every 10 s (100 requests/s: the simulator and the daemon share the
// machine's two cores with this process), each run long enough that every
// probe has results, so every series a probe can have exists.
func daemonConfigs(o options) []daemonConfig {
	return []daemonConfig{
		{targets: 10, probesPerTarget: 10, every: 2 * time.Second, duration: o.daemonDuration},
		{targets: 20, probesPerTarget: 50, every: 10 * time.Second, duration: o.daemonDuration * 3 / 2},
	}
}

// daemonStats is the daemon with many probes configured, probing the
// simulator: its memory and its /metrics.
type daemonStats struct {
	cfg            daemonConfig
	rssMax, rssEnd float64
	// rssSamples are taken every second while probing, before /metrics
	// is scraped; rssAfterScrapes after the timed scrapes.
	rssSamples      []float64
	rssAfterScrapes float64
	cpuPercent      float64
	requests        float64
	text, proto     scrapeStats
}

type scrapeStats struct {
	p50, max time.Duration
	bytes    int
}

const (
	daemonMetricsScrapes   = 20
	acceptProtobuf         = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
	acceptText             = "text/plain;version=0.0.4"
	clockTicksPerSecond    = 100 // USER_HZ on Linux
	daemonStartupAllowance = 15 * time.Second
)

// yaml is the configuration: every probe with SLOs set, so every series
// the daemon can export for a probe exists; target names have room for
// 10,000 targets (the scale section's thousands).
func (c daemonConfig) yaml(simURL string, tokens int) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for t := range c.targets {
		fmt.Fprintf(&b, "  - name: sim-%04d\n    protocol: openai_chat\n    url: %s\n    model: sim-llm\n    timeout: 30s\n    probes:\n", t, simURL)
		for p := range c.probesPerTarget {
			fmt.Fprintf(&b, "      - name: probe-%03d\n        workload: perf\n        schedule: {every: %s, jitter: %s}\n        slo: {ttft: 250ms, tpot: 20ms, objective: 0.99}\n",
				p, c.every, c.every)
		}
	}
	fmt.Fprintf(&b, "workloads:\n  perf:\n    prompts:\n      inline: [%q]\n    max_tokens: %d\n    ignore_eos: true\n", prompt, tokens)
	b.WriteString("gpus:\n  enabled: \"false\"\n")
	return b.String()
}

func measureDaemon(ctx context.Context, o options, sim *simProcess, dc daemonConfig) (daemonStats, error) {
	ds := daemonStats{cfg: dc}
	d, err := startDaemon(ctx, o, sim, fmt.Sprintf("llm-prober-%d.yml", dc.probes()), dc.yaml(sim.url, o.outputTokens), daemonStartupAllowance)
	if err != nil {
		return ds, err
	}
	defer d.stop()
	base, pid := d.base, d.pid
	cpu0, t0 := procCPU(pid), time.Now()
	for end := time.Now().Add(dc.duration); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return ds, ctx.Err()
		case <-time.After(time.Second):
		}
		rss := rssMB(pid)
		ds.rssMax = max(ds.rssMax, rss)
		ds.rssSamples = append(ds.rssSamples, rss)
	}
	ds.cpuPercent = 100 * (procCPU(pid) - cpu0).Seconds() / time.Since(t0).Seconds()
	ds.rssEnd = rssMB(pid)

	body, _, err := scrape(base+"/metrics", acceptText)
	if err != nil {
		return ds, err
	}
	ds.requests = sumSeries(string(body), "llm_probe_requests_total{")
	if ds.text, err = scrapeTimes(base+"/metrics", acceptText); err != nil {
		return ds, err
	}
	if ds.proto, err = scrapeTimes(base+"/metrics", acceptProtobuf); err != nil {
		return ds, err
	}
	ds.rssAfterScrapes = rssMB(pid)
	ds.rssMax = max(ds.rssMax, ds.rssAfterScrapes)
	return ds, nil
}

func scrape(url, accept string) ([]byte, time.Duration, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return b, d, err
}

func scrapeTimes(url, accept string) (scrapeStats, error) {
	var ss scrapeStats
	var ds []time.Duration
	for range daemonMetricsScrapes {
		b, d, err := scrape(url, accept)
		if err != nil {
			return ss, err
		}
		ds = append(ds, d)
		ss.bytes = len(b)
		ss.max = max(ss.max, d)
	}
	ss.p50 = time.Duration(durQuantile(ds, 0.5) * float64(time.Second))
	return ss, nil
}

// sumSeries adds the values of every text-format line starting with prefix.
func sumSeries(text, prefix string) float64 {
	var sum float64
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// procCPU is utime+stime of a process from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicksPerSecond
}

func printDaemon(out io.Writer, rows []daemonStats) {
	fmt.Fprintln(out, "## (c) Daemon against the simulator: RSS, and /metrics over HTTP (20 text + 20 protobuf scrapes, gzip as Prometheus asks)")
	tw := newTable(out)
	fmt.Fprintln(tw, "probes\ttargets\tevery\tprobing_s\trequests\tcpu_%\trss_probing_last_MB\trss_probing_max_MB\trss_after_scrapes_MB\ttext_bytes\ttext_p50_ms\ttext_max_ms\tproto_bytes\tproto_p50_ms\tproto_max_ms\t")
	ms := func(d time.Duration) string { return num(float64(d.Microseconds())/1000, 2) }
	for _, d := range rows {
		maxProbing := 0.0
		for _, r := range d.rssSamples {
			maxProbing = max(maxProbing, r)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t\n", d.cfg.probes(), d.cfg.targets, d.cfg.every,
			d.cfg.duration.Seconds(), d.requests, num(d.cpuPercent, 1),
			num(d.rssEnd, 1), num(maxProbing, 1), num(d.rssAfterScrapes, 1), d.text.bytes, ms(d.text.p50), ms(d.text.max),
			d.proto.bytes, ms(d.proto.p50), ms(d.proto.max))
	}
	tw.Flush()
	for _, d := range rows {
		fmt.Fprintf(out, "%d probes, rss_MB while probing (1/s, before any scrape):", d.cfg.probes())
		for _, r := range d.rssSamples {
			fmt.Fprintf(out, " %.1f", r)
		}
		fmt.Fprintln(out)
	}
}

// daemon is an llm-prober process the harness started.
type daemon struct {
	base string // http://addr
	pid  int
	stop func()
}

// startDaemon writes config (named name in the simulator's directory),
// starts the prober on a free address and waits up to ready for
// /-/ready; stop sends SIGTERM and waits for the process.
func startDaemon(ctx context.Context, o options, sim *simProcess, name, config string, ready time.Duration) (daemon, error) {
	cfgFile := filepath.Join(sim.dir, name)
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		return daemon{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return daemon{}, err
	}
	cmd := exec.CommandContext(ctx, o.bin, "--config.file", cfgFile, "--web.listen-address", addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		return daemon{}, err
	}
	d := daemon{base: "http://" + addr, pid: cmd.Process.Pid, stop: func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}}
	if err := waitHTTP(ctx, d.base+"/-/ready", ready); err != nil {
		d.stop()
		return daemon{}, err
	}
	return d, nil
}
