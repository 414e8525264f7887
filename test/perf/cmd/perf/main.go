// Command perf is the performance harness behind `make bench`
// (docs/performance.md). It starts the simulator as a separate process and,
// in this process, drives the real probe engine (schedule runner, OpenAI
// chat driver, ProbeMetrics) at several load steps, then the same load with
// a minimal raw HTTP client as the floor. It prints plain-text tables that
// two runs can be diffed with:
//
//   - truth: prober read times minus the simulator's flush times
//     (ground truth at /debug/requests/{id});
//   - cost: this process's CPU (getrusage RUSAGE_SELF, so the simulator is
//     excluded) per request and per output token, against the raw client;
//   - schedules: achieved vs planned rate, schedule lag, burst spread;
//   - the daemon with 100 probes configured: RSS and /metrics over HTTP;
//   - micro-benchmarks (go test -bench) of the parse → Result → metrics
//     path and of /metrics rendering.
//
// It is a program, not a test, so `make test` compiles and vets it but
// never runs it.
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
	"strings"
	"syscall"
	"time"
)

type options struct {
	bin            string
	goCmd          string
	stepDuration   time.Duration
	warmup         time.Duration
	steps          string
	truthSample    int
	daemon         bool
	daemonDuration time.Duration
	micro          bool
	profileDir     string
	outputTokens   int
	decode         time.Duration
	ttft           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "./llm-prober", "llm-prober binary (runs the simulator and the 100-probe daemon)")
	flag.StringVar(&o.goCmd, "go", "go", "go command for the micro-benchmarks")
	flag.DurationVar(&o.stepDuration, "step-duration", 10*time.Second, "measured time of each step, per client")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measured window")
	flag.StringVar(&o.steps, "steps", "c1,c16,c64,c256,rate200,burst64", "load steps: cN (N concurrent streams), rateR (open-loop Poisson R req/s), burstN (N at once every second)")
	flag.IntVar(&o.truthSample, "truth-sample", 1000, "requests per step compared with ground truth (evenly sampled)")
	flag.BoolVar(&o.daemon, "daemon", true, "also run the daemon with 100 probes (RSS, /metrics over HTTP)")
	flag.DurationVar(&o.daemonDuration, "daemon-duration", 20*time.Second, "how long the 100-probe daemon runs before it is measured")
	flag.BoolVar(&o.micro, "micro", true, "also run the micro-benchmarks (go test -bench)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write a CPU profile of each step's prober window into this directory (adds overhead: not for the table)")
	flag.IntVar(&o.outputTokens, "output-tokens", 100, "max_tokens of every request (ignore_eos, so exactly this many)")
	flag.DurationVar(&o.decode, "decode", 3*time.Millisecond, "simulator time per output token")
	flag.DurationVar(&o.ttft, "ttft", 20*time.Millisecond, "simulator base time to first token")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	steps, err := parseSteps(o.steps)
	if err != nil {
		return err
	}
	header(out, o)

	sim, err := startSimulator(ctx, o)
	if err != nil {
		return err
	}
	defer sim.stop()

	h, err := newHarness(sim, o)
	if err != nil {
		return err
	}
	defer h.close()

	var rows []stepResult
	for _, st := range steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "perf: step %s ...\n", st.name)
		r, err := h.runStep(ctx, st)
		if err != nil {
			return fmt.Errorf("step %s: %w", st.name, err)
		}
		rows = append(rows, r)
	}
	if len(rows) > 0 {
		printTables(out, rows, o)
	}

	if o.daemon && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "perf: 100-probe daemon ...")
		d, err := measureDaemon(ctx, o, sim)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		printDaemon(out, d)
	}
	if o.micro && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "perf: micro-benchmarks ...")
		if err := microBenchmarks(ctx, o, out); err != nil {
			return fmt.Errorf("micro-benchmarks: %w", err)
		}
	}
	return nil
}

// header prints what the figures depend on: machine, load and settings.
func header(out io.Writer, o options) {
	fmt.Fprintf(out, "llm-prober performance harness  %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, %s, GOMAXPROCS=%d\n", runtime.NumCPU(), cpuModel(), memTotal(), runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "load average at start: %s\n", loadAvg())
	fmt.Fprintf(out, "simulator: separate process, ttft-base %v, decode %v/token, %d output tokens, 1 token per chunk\n", o.ttft, o.decode, o.outputTokens)
	fmt.Fprintf(out, "steps: %s; %v measured per step and client after %v warm-up\n\n", o.steps, o.stepDuration, o.warmup)
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
	fmt.Fprintln(out, "\n## Micro-benchmarks (go test -bench, this machine)")
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
