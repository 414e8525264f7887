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
}

// AddCommand adds the bench command and its flags to app.
func AddCommand(app *kingpin.Application) *Flags {
	c := app.Command("bench", "Sweep a target through concurrencies or request rates and report TTFT, TPOT, ITL, latency and throughput per step (docs/bench.md).")
	f := &Flags{Cmd: c}
	f.ConfigFile = c.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	f.Target = c.Flag("target", "Name of the target to ").Required().String()
	f.Probe = c.Flag("probe", "Probe whose workload, streaming and timeout to use (default: the target's first).").String()
	f.concurrency = c.Flag("concurrency", "Closed-loop concurrency levels: 1,4,8 or 1:64:x2 (geometric) or 1:8:1 (additive). Default 1 when --rate is not given.").String()
	f.rate = c.Flag("rate", "Open-loop request rates per second: 1,2.5,5 or 1:10:1 or 0.5:8:x2.").String()
	f.poisson = c.Flag("poisson", "Poisson arrivals for --rate (constant spacing otherwise).").Bool()
	f.duration = c.Flag("duration", "Measurement time per step; the window length with --stability (default 10s then).").Default(DefaultDuration.String()).IsSetByUser(&f.durationSet).Duration()
	f.warmup = c.Flag("warmup", "Load run before each step's measurement; its results are discarded (and counted).").Default(DefaultWarmup.String()).Duration()
	f.requests = c.Flag("requests", "End each step (each window with --stability) once this many measured requests were sent and ended, instead of --duration.").Int()
	f.stability = c.Flag("stability", "Repeat measurement windows until three in a row agree within this percentage (throughput and mean latency), e.g. 10%.").String()
	f.maxWindows = c.Flag("max-windows", "At most this many windows per step with --stability.").Default(strconv.Itoa(DefaultMaxWindows)).Int()
	f.maxInFlight = c.Flag("max-in-flight", "With --rate, arrivals finding this many requests in flight are skipped and counted, never queued.").Default(strconv.Itoa(DefaultMaxInFlight)).Int()
	f.thresholds = c.Flag("threshold", "Pass/fail condition checked on every step, e.g. 'ttft_p95<500ms', 'error_rate<1%', 'output_tokens_per_second>200'; repeatable.").Strings()
	f.Output = c.Flag("output", "Write every step and statistic as JSON to this file.").String()
	f.CSV = c.Flag("csv", "Append one row per step to this CSV file (header written when the file is created).").String()
	f.ExportRequests = c.Flag("export-requests", "Write one JSON line per measured request to this file.").String()
	f.seed = c.Flag("seed", "Seed for Poisson gaps and schedule phases (0: random).").Uint64()
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
	switch {
	case *f.concurrency != "" && *f.rate != "":
		return s, fmt.Errorf("--concurrency and --rate are mutually exclusive: a step is either a closed loop or an open loop")
	case *f.rate != "":
		s.Mode = ModeRate
		s.Levels, err = ParseSweep(ModeRate, *f.rate)
	case *f.concurrency != "":
		s.Mode = ModeConcurrency
		s.Levels, err = ParseSweep(ModeConcurrency, *f.concurrency)
	default:
		s.Mode, s.Levels = ModeConcurrency, []float64{1}
	}
	if err != nil {
		return s, err
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
		RequestsPath: *f.ExportRequests,
		Stdout:       stdout,
		Stderr:       stderr,
		Live:         live,
		Logger:       logger,
	})
	return code
}
