// Command perf is the performance harness behind `make bench`
// (docs/performance.md; raw runs in test/perf/RESULTS.md). It starts the
// simulator as a separate process and, in this process, drives the real
// probe engine (schedule runner, engine.Probe, the OpenAI chat driver,
// ProbeMetrics), and a minimal raw net/http client beside it as the floor.
// It prints plain-text tables that two runs can be diffed with:
//
//   - series: how many series one openai_chat probe with an SLO costs
//     Prometheus, per histogram form (the daemon's /metrics);
//   - overhead: the prober's TTFT minus the simulator's own time from
//     having read the request to having flushed the first token (ground
//     truth at /debug/requests/{id}), at 1, 16 and 64 streams, with the raw
//     client measured the same way;
//   - cost: this process's CPU per output token (getrusage RUSAGE_SELF, so
//     the simulator is excluded), prober ÷ raw client, in interleaved A/B
//     pairs, asking for 200 µs chunk gaps and back to back, 16 and 64
//     streams, each row with the gaps the simulator really produced;
//   - the daemon with 100 and 1 000 probes configured: RSS and /metrics
//     over HTTP;
//   - bursts of 64 at periods of 1 s and 5 s, pooled and new connections:
//     spread of the prober's writes and of their arrival at the simulator
//     (first byte, head, body), beside two raw clients as floors;
//   - schedule accuracy at 200 requests/s, constant and Poisson;
//   - micro-benchmarks (go test -bench) of the parse → Result → metrics
//     path and of /metrics rendering.
//
// It is a program, not a test, so `make test` compiles and vets it (and
// unit-tests its arithmetic) but never runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bin            string
	goCmd          string
	sections       string
	stepDuration   time.Duration
	warmup         time.Duration
	truthSample    int
	pairs          int
	pairWindow     time.Duration
	costGaps       string
	costStreams    string
	overheadCounts string
	burstCount     int
	burstPeriods   []time.Duration
	traceDir       string
	daemonDuration time.Duration
	profileDir     string
	outputTokens   int
	decode         time.Duration
	ttft           time.Duration

	scaleProbes       string
	scaleIdleEvery    time.Duration
	scaleScrapeEvery  time.Duration
	scaleRequestEvery string
	scaleTokens       int
	scaleWindow       time.Duration
	scaleWarmup       time.Duration
}

// allSections in the order they run and print.
// scale is not among the defaults: it runs for about 12 minutes.
var allSections = []string{"series", "overhead", "cost", "daemon", "bursts", "schedules", "micro", "scale"}

// defaultSections are what make bench runs without -sections.
var defaultSections = []string{"series", "overhead", "cost", "daemon", "bursts", "schedules", "micro"}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "./llm-prober", "llm-prober binary (runs the simulator and the daemon)")
	flag.StringVar(&o.goCmd, "go", "go", "go command for the micro-benchmarks")
	flag.StringVar(&o.sections, "sections", strings.Join(defaultSections, ","), "what to measure: "+strings.Join(allSections, ", "))
	flag.DurationVar(&o.stepDuration, "step-duration", 10*time.Second, "measured time of each overhead and schedule step, per client")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before measuring")
	flag.IntVar(&o.truthSample, "truth-sample", 1000, "requests per overhead step compared with ground truth (evenly sampled)")
	flag.IntVar(&o.pairs, "pairs", 5, "interleaved prober/raw pairs per cost configuration")
	flag.DurationVar(&o.pairWindow, "pair-window", 5*time.Second, "measured time of each client in a cost pair")
	flag.StringVar(&o.costGaps, "cost-gaps", "200us,0", "chunk gaps of the cost rows (0: back to back)")
	flag.StringVar(&o.costStreams, "cost-streams", "16,64", "stream counts of the cost rows")
	flag.StringVar(&o.overheadCounts, "overhead-streams", "1,16,64", "stream counts of the overhead steps")
	flag.IntVar(&o.burstCount, "bursts", 10, "measured bursts of 64 per client and period (the raw floors run at the first period only)")
	burstPeriods := flag.String("burst-periods", "1s,5s", "periods of the burst rows")
	flag.StringVar(&o.traceDir, "trace-dir", "", "write a runtime/trace of three prober bursts into this directory (after the measured ones)")
	flag.DurationVar(&o.daemonDuration, "daemon-duration", 20*time.Second, "how long the 100-probe daemon probes before it is measured (the 1000-probe one: 1.5 times that)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write CPU profiles into this directory: each overhead step's prober window, and one extra window of each client after each cost row's pairs (adds overhead)")
	flag.IntVar(&o.outputTokens, "output-tokens", 100, "max_tokens of every request (ignore_eos, so exactly this many)")
	flag.DurationVar(&o.decode, "decode", 3*time.Millisecond, "simulator time per output token (not for the cost pairs, which set their own)")
	flag.DurationVar(&o.ttft, "ttft", 20*time.Millisecond, "simulator base time to first token")
	flag.StringVar(&o.scaleProbes, "scale-probes", "1000,5000", "scale section: probe counts of the idle daemons")
	flag.DurationVar(&o.scaleIdleEvery, "scale-idle-every", time.Hour, "scale section: schedule of the idle daemons' probes (every and jitter)")
	flag.DurationVar(&o.scaleScrapeEvery, "scale-scrape-every", 15*time.Second, "scale section: scrape interval of the idle daemons' scraped window")
	flag.StringVar(&o.scaleRequestEvery, "scale-request-every", "60s,5s", "scale section: schedules of the 1,000-probe daemons measured for CPU per request")
	flag.IntVar(&o.scaleTokens, "scale-tokens", 16, "scale section: max_tokens of every request")
	flag.DurationVar(&o.scaleWindow, "scale-window", time.Minute, "scale section: each measured window")
	flag.DurationVar(&o.scaleWarmup, "scale-warmup", time.Minute, "scale section: time before measuring (at most the probes' interval)")
	flag.Parse()
	var err error
	if o.burstCount < 2 {
		fmt.Fprintf(os.Stderr, "perf: -bursts %d: want at least 2 (they run in two alternating rounds)\n", o.burstCount)
		os.Exit(2)
	}
	if o.burstPeriods, err = durations("-burst-periods", *burstPeriods); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

func parseSections(s string) (map[string]bool, error) {
	want := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(allSections, f) {
			return nil, fmt.Errorf("unknown section %q (have %s)", f, strings.Join(allSections, ", "))
		}
		want[f] = true
	}
	return want, nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	want, err := parseSections(o.sections)
	if err != nil {
		return err
	}
	header(out, o)
	var sim *simProcess
	mainSim := func() (*simProcess, error) {
		if sim == nil {
			sim, err = startSimulator(ctx, o, o.decode)
		}
		return sim, err
	}
	defer func() {
		if sim != nil {
			sim.stop()
		}
	}()
	step := func(name string, f func() error) error {
		if !want[name] || ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "perf: %s (load average %s) ...\n", name, loadAvg())
		fmt.Fprintf(out, "\nload average before %s: %s\n", name, loadAvg())
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	withHarness := func(f func(h *harness) error) func() error {
		return func() error {
			s, err := mainSim()
			if err != nil {
				return err
			}
			h, err := newHarness(s, o)
			if err != nil {
				return err
			}
			defer h.close()
			return f(h)
		}
	}
	if err := step("series", func() error {
		s, err := mainSim()
		if err != nil {
			return err
		}
		rows, err := measureSeries(ctx, o, s)
		if err == nil {
			printSeries(out, rows)
		}
		return err
	}); err != nil {
		return err
	}
	if err := step("overhead", withHarness(func(h *harness) error {
		streams, err := streamCounts("-overhead-streams", o.overheadCounts)
		if err != nil {
			return err
		}
		rows, err := h.overhead(ctx, streams)
		if err == nil {
			printOverhead(out, rows, o)
		}
		return err
	})); err != nil {
		return err
	}
	if err := step("cost", func() error {
		gaps, streams, err := costRows(o)
		if err != nil {
			return err
		}
		rows, err := measureCost(ctx, o, gaps, streams)
		if err == nil {
			printCost(out, rows, o)
		}
		return err
	}); err != nil {
		return err
	}
	if err := step("daemon", func() error {
		s, err := mainSim()
		if err != nil {
			return err
		}
		var rows []daemonStats
		for _, dc := range daemonConfigs(o) {
			fmt.Fprintf(os.Stderr, "perf: daemon with %d probes ...\n", dc.probes())
			d, err := measureDaemon(ctx, o, s, dc)
			if err != nil {
				return err
			}
			rows = append(rows, d)
		}
		printDaemon(out, rows)
		return nil
	}); err != nil {
		return err
	}
	if err := step("bursts", withHarness(func(h *harness) error {
		rows, err := h.bursts(ctx, 64, "pooled")
		if err != nil {
			return err
		}
		// A server that closes every connection after its answer (as
		// llama.cpp's does): each burst's requests need new connections,
		// as a cron burst finds after an idle hour.
		fmt.Fprintln(os.Stderr, "perf: bursts needing new connections ...")
		closing, err := startSimulator(ctx, o, o.decode, "--fault.close-after-stream")
		if err != nil {
			return err
		}
		defer closing.stop()
		hc, err := newHarness(closing, o)
		if err != nil {
			return err
		}
		defer hc.close()
		cold, err := hc.bursts(ctx, 64, "new")
		if err == nil {
			printBursts(out, append(rows, cold...), o)
		}
		return err
	})); err != nil {
		return err
	}
	if err := step("schedules", withHarness(func(h *harness) error {
		rows, err := h.schedules(ctx, 200)
		if err == nil {
			printSchedules(out, rows, o)
		}
		return err
	})); err != nil {
		return err
	}
	if err := step("micro", func() error { return microBenchmarks(ctx, o, out) }); err != nil {
		return err
	}
	return step("scale", func() error {
		runs, err := scaleRuns(o)
		if err != nil {
			return err
		}
		s, err := mainSim()
		if err != nil {
			return err
		}
		var rows []scaleStats
		for _, r := range runs {
			fmt.Fprintf(os.Stderr, "perf: scale, %d probes every %s ...\n", r.probes, r.every)
			st, err := measureScale(ctx, o, s, r)
			if err != nil {
				return err
			}
			rows = append(rows, st)
		}
		printScale(out, rows, o)
		return nil
	})
}

// costRows parses -cost-gaps and -cost-streams.
func costRows(o options) ([]time.Duration, []int, error) {
	var gaps []time.Duration
	for f := range strings.SplitSeq(o.costGaps, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, nil, fmt.Errorf("-cost-gaps: %w", err)
		}
		gaps = append(gaps, d)
	}
	streams, err := streamCounts("-cost-streams", o.costStreams)
	return gaps, streams, err
}

// durations parses a flag's comma-separated positive durations.
func durations(flagName, s string) ([]time.Duration, error) {
	var ds []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive duration", flagName, f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// streamCounts parses a flag's comma-separated stream counts.
func streamCounts(flagName, s string) ([]int, error) {
	var streams []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a stream count", flagName, f)
		}
		streams = append(streams, n)
	}
	return streams, nil
}

// header prints what the figures depend on: machine, load and settings.
func header(out io.Writer, o options) {
	fmt.Fprintf(out, "llm-prober performance harness  %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, %s, GOMAXPROCS=%d\n", runtime.NumCPU(), cpuModel(), memTotal(), runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "load average at start: %s\n", loadAvg())
	fmt.Fprintf(out, "simulator: separate process, ttft-base %v, decode %v/token (cost pairs: their own), %d output tokens, 1 token per chunk\n", o.ttft, o.decode, o.outputTokens)
	fmt.Fprintf(out, "sections: %s\n", o.sections)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			if _, v, ok := strings.Cut(line, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
			return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return "unknown RAM"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// microBenchmarks runs the Go benchmarks of the hot path and of /metrics
// rendering and copies their result lines.
func microBenchmarks(ctx context.Context, o options, out io.Writer) error {
	fmt.Fprintln(out, "## Micro-benchmarks (go test -bench, this machine)")
	for _, b := range []struct{ pkg, pattern string }{
		{"./probe", "^BenchmarkParseToMetrics$"},
		{"./collector", "^BenchmarkObserve$"},
		{"./collector", "^BenchmarkExposition100Probes$"},
	} {
		cmd := exec.CommandContext(ctx, o.goCmd, "test", "-run", "^$", "-bench", b.pattern, "-benchmem", "-count", "1", b.pkg)
		cmd.Stderr = os.Stderr
		res, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", b.pkg, b.pattern, err, res)
		}
		for line := range strings.SplitSeq(string(res), "\n") {
			if strings.HasPrefix(line, "Benchmark") {
				fmt.Fprintln(out, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return nil
}
