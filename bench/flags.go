package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/llm-prober/llm-prober/engine"
)

// Flags are the flags of `llm-prober bench` (docs/bench.md), as the
// command line gave them.
type Flags struct {
	Cmd                         *kingpin.CmdClause
	ConfigFile, Target, Probe   *string
	concurrency, rate           *string
	poisson                     *bool
	duration, warmup            *time.Duration
	durationSet                 bool
	requests                    *int
	stability                   *string
	maxWindows, maxInFlight     *int
	thresholds                  *[]string
	Output, CSV, ExportRequests *string
	seed                        *uint64

	burstiness                        *float64
	burstinessSet                     bool
	trace, traceSpeed                 *string
	traceBlock                        *int
	slos                              *[]string
	objective                         *string
	capacity                          *string
	searchStart, searchMin, searchMax *float64
	searchStartSet, searchMinSet      bool
	searchMaxSet                      bool
	precision                         *string
	trials                            *int
	budget                            *time.Duration
	minCapacity                       *float64
	quickSweep, sweepConcurrency      *int
	stabilitySet, warmupSet           bool
	HTML                              *string
}

// AddCommand adds the bench command and its flags to app.
func AddCommand(app *kingpin.Application) *Flags {
	c := app.Command("bench", "Sweep a target through concurrencies, request rates or a trace, or search the highest load meeting an SLO (--capacity); report TTFT, TPOT, ITL, latency, throughput and goodput per step (docs/bench.md).")
	f := &Flags{Cmd: c}
	f.ConfigFile = c.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	f.Target = c.Flag("target", "Name of the target to bench.").Required().String()
	f.Probe = c.Flag("probe", "Probe whose workload, streaming and timeout to use (default: the target's first).").String()
	f.concurrency = c.Flag("concurrency", "Closed-loop concurrency levels: 1,4,8 or 1:64:x2 (geometric) or 1:8:1 (additive). Default 1 when --rate is not given.").String()
	f.rate = c.Flag("rate", "Open-loop request rates per second: 1,2.5,5 or 1:10:1 or 0.5:8:x2.").String()
	f.poisson = c.Flag("poisson", "Poisson arrivals for --rate (constant spacing otherwise).").Bool()
	f.duration = c.Flag("duration", "Measurement time per step; the window length with --stability (default 10s then).").Default(DefaultDuration.String()).IsSetByUser(&f.durationSet).Duration()
	f.warmup = c.Flag("warmup", "Load run before each step's measurement; its results are discarded (and counted). Default 0 with --trace.").Default(DefaultWarmup.String()).IsSetByUser(&f.warmupSet).Duration()
	f.requests = c.Flag("requests", "End each step (each window with --stability) once this many measured requests were sent and ended, instead of --duration.").Int()
	f.stability = c.Flag("stability", "Repeat measurement windows until three in a row agree within this percentage (throughput and mean latency), e.g. 10%. Default 10% with --capacity.").IsSetByUser(&f.stabilitySet).String()
	f.maxWindows = c.Flag("max-windows", "At most this many windows per step with --stability.").Default(strconv.Itoa(DefaultMaxWindows)).Int()
	f.maxInFlight = c.Flag("max-in-flight", "With --rate, arrivals finding this many requests in flight are skipped and counted, never queued.").Default(strconv.Itoa(DefaultMaxInFlight)).Int()
	f.thresholds = c.Flag("threshold", "Pass/fail condition checked on every step, e.g. 'ttft_p95<500ms', 'error_rate<1%', 'output_tokens_per_second>200'; repeatable.").Strings()
	f.Output = c.Flag("output", "Write every step and statistic as JSON to this file.").String()
	f.CSV = c.Flag("csv", "Append one row per step to this CSV file (header written when the file is created).").String()
	f.ExportRequests = c.Flag("export-requests", "Write one JSON line per measured request to this file.").String()
	f.seed = c.Flag("seed", "Seed for Poisson gaps and schedule phases (0: random).").Uint64()
	f.burstiness = c.Flag("burstiness", "With --rate: gamma-distributed gaps of this shape, mean 1/rate (1 is Poisson, below 1 burstier, above 1 more regular).").IsSetByUser(&f.burstinessSet).Float64()
	f.trace = c.Flag("trace", "Replay this JSONL trace ({\"timestamp\": ms, \"input_length\", \"output_length\", \"hash_ids\"} per line) instead of --rate/--concurrency.").String()
	f.traceSpeed = c.Flag("trace-speed", "Trace replay speeds, one step each (2 plays the trace twice as fast), same syntax as --rate.").Default("1").String()
	f.traceBlock = c.Flag("trace-block-tokens", "Tokens per trace hash_ids block (Mooncake's traces: 512).").Default(strconv.Itoa(DefaultTraceBlockTokens)).Int()
	f.slos = c.Flag("slo", "Per-request objective defining a good request for goodput, e.g. 'ttft<500ms', 'tpot<50ms', 'latency<10s'; repeatable.").Strings()
	f.objective = c.Flag("objective", "Goodput a level must reach: the share of requests that succeed and meet every --slo.").Default("99%").String()
	f.capacity = c.Flag("capacity", "Search the highest load meeting --slo at --objective: rate (open loop), concurrency (closed loop) or trace (replay speed).").Enum(string(ModeRate), string(ModeConcurrency), string(ModeTrace))
	f.searchStart = c.Flag("search-start", "First level the capacity search tries.").Default("1").IsSetByUser(&f.searchStartSet).Float64()
	f.searchMin = c.Flag("search-min", "Lowest level the search goes down to before it gives up (default: start/16, concurrency 1).").IsSetByUser(&f.searchMinSet).Float64()
	f.searchMax = c.Flag("search-max", "Highest level the search goes up to (default: 10000 rate, 4096 concurrency, 1000 trace speed).").IsSetByUser(&f.searchMaxSet).Float64()
	f.precision = c.Flag("search-precision", "Stop bisecting a rate or speed once the bracket is this narrow relative to its low end.").Default("5%").String()
	f.trials = c.Flag("trials", "Repeat the capacity search; the capacity is the median, with the spread reported.").Default("1").Int()
	f.budget = c.Flag("budget", "Time budget of the capacity search (0: none); a step that could not end within it is not started.").Default("0").Duration()
	f.minCapacity = c.Flag("min-capacity", "Exit 1 when the capacity found is below this level (CI gate).").Float64()
	f.quickSweep = c.Flag("quick-sweep", "GuideLLM's sweep: a synchronous step, one at --sweep-concurrency, then this many evenly spaced rates between their throughputs.").Int()
	f.sweepConcurrency = c.Flag("sweep-concurrency", "Concurrency of --quick-sweep's maximum-throughput step.").Default("64").Int()
	f.HTML = c.Flag("html", "Write a self-contained HTML report (curves, distributions, timeline) to this file.").String()
	return f
}

// Settings turns the flags into run settings; an error is a usage error.
func (f *Flags) Settings() (Settings, error) {
	s := Settings{
		Poisson:     *f.poisson,
		Duration:    *f.duration,
		Warmup:      *f.warmup,
		Requests:    *f.requests,
		MaxWindows:  *f.maxWindows,
		MaxInFlight: *f.maxInFlight,
		Seed:        *f.seed,
	}
	var err error
	if s.Objective, err = parsePercent("--objective", *f.objective); err != nil {
		return s, err
	}
	if s.SLO, err = ParseSLO(*f.slos); err != nil {
		return s, err
	}
	if f.burstinessSet {
		if !(*f.burstiness > 0) {
			return s, fmt.Errorf("--burstiness %g: want a number > 0 (1 is Poisson, below 1 burstier, above 1 more regular)", *f.burstiness)
		}
		s.Burstiness = *f.burstiness
	}
	s.QuickSweep, s.SweepConcurrency = *f.quickSweep, *f.sweepConcurrency
	switch {
	case *f.trace != "" && (*f.concurrency != "" || *f.rate != ""):
		return s, fmt.Errorf("--trace replays the trace's own arrivals; it does not combine with --concurrency or --rate")
	case *f.trace != "":
		s.Mode = ModeTrace
		if !f.warmupSet {
			// The trace's start is part of the trace: a warm-up would
			// replay and discard it.
			s.Warmup = 0
		}
		if *f.capacity == "" {
			s.Levels, err = ParseSweep(ModeTrace, *f.traceSpeed)
		}
	case *f.capacity != "" && (*f.concurrency != "" || *f.rate != ""):
		return s, fmt.Errorf("--capacity chooses its own levels; give --search-start and --search-max instead of --concurrency or --rate")
	case *f.capacity != "":
		s.Mode = Mode(*f.capacity)
	case *f.concurrency != "" && *f.rate != "":
		return s, fmt.Errorf("--concurrency and --rate are mutually exclusive: a step is either a closed loop or an open loop")
	case *f.rate != "":
		s.Mode = ModeRate
		s.Levels, err = ParseSweep(ModeRate, *f.rate)
	case *f.concurrency != "":
		s.Mode = ModeConcurrency
		s.Levels, err = ParseSweep(ModeConcurrency, *f.concurrency)
	case s.QuickSweep > 0:
		s.Mode = ModeRate
	default:
		s.Mode, s.Levels = ModeConcurrency, []float64{1}
	}
	if err != nil {
		return s, err
	}
	if *f.capacity != "" {
		if (*f.capacity == string(ModeTrace)) != (*f.trace != "") {
			return s, fmt.Errorf("--capacity trace searches the replay speed of --trace; give both, or search rate or concurrency")
		}
		if s.Search, err = f.search(s.Mode); err != nil {
			return s, err
		}
		if !f.stabilitySet && s.Mode != ModeTrace {
			*f.stability = "10%"
		}
	}
	if *f.stability != "" {
		p := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(*f.stability), "%"))
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v < 100) {
			return s, fmt.Errorf("--stability %q: want a percentage between 0 and 100 such as 10%%", *f.stability)
		}
		s.Stability = v / 100
		if !f.durationSet {
			s.Duration = DefaultStabilityWindow
		}
	}
	for _, t := range *f.thresholds {
		th, err := ParseThreshold(t)
		if err != nil {
			return s, fmt.Errorf("--threshold: %w", err)
		}
		s.Thresholds = append(s.Thresholds, th)
	}
	if *f.trace != "" {
		// Read now: a trace that cannot be replayed is a usage error,
		// found before the configuration is read or anything is sent.
		if *f.traceBlock < 1 {
			return s, fmt.Errorf("--trace-block-tokens must be ≥ 1, got %d", *f.traceBlock)
		}
		if s.Trace, err = LoadTrace(*f.trace, *f.traceBlock); err != nil {
			return s, err
		}
	}
	return s, s.Validate()
}

// Main is `llm-prober bench`: it checks the flags (ExitUsage), opens the
// target's probe as the daemon would send it (ExitFail when it cannot),
// runs the sweep and returns the exit code.
func (f *Flags) Main(ctx context.Context, logger *slog.Logger, stdout, stderr io.Writer) int {
	s, err := f.Settings()
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober bench: %v\n", err)
		return ExitUsage
	}
	p, err := engine.Load(*f.ConfigFile, *f.Target, *f.Probe, logger)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober bench: %v\n", err)
		return ExitFail
	}
	defer p.Close()
	if c := p.ProbeConfig.Cancel; c != nil {
		// Its streams end where the probe cuts them: every latency and
		// throughput figure would describe the cut, not the server.
		fmt.Fprintf(stderr, "llm-prober bench: probe %s/%s has cancel: (cut after %d tokens), so its latencies would describe cut streams; bench a probe without cancel:\n",
			p.TargetConfig.Name, p.ProbeConfig.Name, c.AfterTokens)
		return ExitUsage
	}
	live := false
	if file, ok := stderr.(*os.File); ok {
		live = IsTerminal(file)
	}
	_, code := Run(ctx, Options{
		Settings:     s,
		Probe:        p.Probe,
		Config:       Describe(*f.ConfigFile, p.Config, p.TargetConfig, p.ProbeConfig),
		JSONPath:     *f.Output,
		CSVPath:      *f.CSV,
		HTMLPath:     *f.HTML,
		RequestsPath: *f.ExportRequests,
		Stdout:       stdout,
		Stderr:       stderr,
		Live:         live,
		Logger:       logger,
	})
	return code
}

// search reads the capacity-search flags, filling mode-dependent defaults.
func (f *Flags) search(mode Mode) (*Search, error) {
	sr := &Search{Start: *f.searchStart, Min: *f.searchMin, Max: *f.searchMax, Trials: *f.trials, Budget: *f.budget, MinCapacity: *f.minCapacity}
	var err error
	if sr.Precision, err = parsePercent("--search-precision", *f.precision); err != nil {
		return nil, err
	}
	if !f.searchMinSet {
		sr.Min = roundLevel(sr.Start / 16)
		if mode == ModeConcurrency {
			sr.Min = 1
		}
	}
	if !f.searchMaxSet {
		sr.Max = map[Mode]float64{ModeRate: 10000, ModeConcurrency: 4096, ModeTrace: 1000}[mode]
		sr.Max = max(sr.Max, sr.Start)
	}
	return sr, nil
}

// parsePercent reads "99%" or "0.99" as a share in [0, 1].
func parsePercent(flag, v string) (float64, error) {
	t := strings.TrimSpace(v)
	pct, isPct := strings.CutSuffix(t, "%")
	x, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if isPct {
		x /= 100
	}
	if err != nil || !(x > 0 && x <= 1) {
		return 0, fmt.Errorf("%s %q: want a percentage such as 99%% (or a share such as 0.99), above 0 and at most 100%%", flag, v)
	}
	return x, nil
}
