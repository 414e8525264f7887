// Package bench is the engine of `llm-prober bench`: it sweeps a target
// through closed-loop concurrencies or open-loop rates with the prober's
// own drivers, workloads and schedule package, and reports each step with
// the definitions of docs/metrics.md (docs/bench.md has the details), so
// numbers taken before a deploy mean what the daemon's numbers mean after.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/prometheus/common/version"
)

// Exit codes of a bench run.
const (
	ExitPass        = 0
	ExitFail        = 1 // a threshold failed, or setup went wrong
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Defaults of the settings.
const (
	DefaultDuration        = 60 * time.Second
	DefaultStabilityWindow = 10 * time.Second
	DefaultWarmup          = 10 * time.Second
	DefaultMaxWindows      = 10
	DefaultMaxInFlight     = 1024
	DefaultInterruptDrain  = 5 * time.Second
	DefaultProgressEvery   = 10 * time.Second
)

// Settings are the user's choices of load and measurement.
type Settings struct {
	Mode    Mode
	Levels  []float64
	Poisson bool
	// Duration is each step's measurement time, or each window's length
	// in stability mode.
	Duration time.Duration
	Warmup   time.Duration
	// Requests, when > 0, ends a step (a window in stability mode) once
	// that many measured requests were sent and ended, instead of Duration.
	Requests int
	// Stability, when > 0, is the relative tolerance (0.1 for 10%).
	Stability   float64
	MaxWindows  int
	MaxInFlight int
	Thresholds  []Threshold
	// Seed makes Poisson gaps reproducible; zero is random.
	Seed uint64

	// Burstiness, when > 0, draws rate steps' gaps from a gamma
	// distribution of this shape (1 is Poisson).
	Burstiness float64
	// Trace, with ModeTrace, is replayed at each level's speed.
	Trace *Trace
	// SLO defines a good request; Objective is the goodput a level must
	// reach (0.99 when zero).
	SLO       SLO
	Objective float64
	// Search, when set, finds the capacity instead of running Levels.
	Search *Search
	// QuickSweep, when > 0, runs GuideLLM's sweep instead of Levels: one
	// synchronous step, one at SweepConcurrency, then this many evenly
	// spaced rates between their throughputs.
	QuickSweep       int
	SweepConcurrency int
}

// DefaultObjective is the goodput a level must reach by default.
const DefaultObjective = 0.99

func (s *Settings) objective() float64 {
	if s.Objective > 0 {
		return s.Objective
	}
	return DefaultObjective
}

// Validate reports a usage error in s.
func (s *Settings) Validate() error {
	if s.Mode != ModeConcurrency && s.Mode != ModeRate && s.Mode != ModeTrace {
		return fmt.Errorf("mode %q: want concurrency, rate or trace", s.Mode)
	}
	if len(s.Levels) == 0 && s.Search == nil && s.QuickSweep == 0 {
		return fmt.Errorf("no levels to run; give --concurrency or --rate")
	}
	if s.Poisson && s.Mode != ModeRate && s.QuickSweep == 0 {
		return fmt.Errorf("--poisson shapes open-loop arrivals; use it with --rate")
	}
	if s.Burstiness < 0 || math.IsNaN(s.Burstiness) || math.IsInf(s.Burstiness, 0) {
		return fmt.Errorf("--burstiness must be a number > 0 (1 is Poisson, below 1 burstier, above 1 more regular), got %g", s.Burstiness)
	}
	if s.Burstiness > 0 && s.Mode != ModeRate && s.QuickSweep == 0 {
		return fmt.Errorf("--burstiness shapes open-loop arrivals; use it with --rate")
	}
	if s.Poisson && s.Burstiness > 0 {
		return fmt.Errorf("--poisson and --burstiness both shape the gaps; --burstiness 1 is Poisson")
	}
	if (s.Mode == ModeTrace) != (s.Trace != nil) {
		return fmt.Errorf("trace mode needs a trace (--trace FILE)")
	}
	if s.Mode == ModeTrace && (s.Stability > 0 || s.Requests > 0) {
		return fmt.Errorf("--trace replays the whole trace once per step; --stability and --requests do not apply")
	}
	if s.Objective < 0 || s.Objective > 1 || math.IsNaN(s.Objective) {
		return fmt.Errorf("--objective must be a share between 0%% and 100%%, got %g", s.Objective)
	}
	if err := s.Search.validate(s); err != nil {
		return err
	}
	if s.QuickSweep < 0 || s.QuickSweep > maxSteps {
		return fmt.Errorf("--quick-sweep must be 1 to %d rates, got %d", maxSteps, s.QuickSweep)
	}
	if s.QuickSweep > 0 && (s.Search != nil || s.Mode == ModeTrace) {
		return fmt.Errorf("--quick-sweep is a sweep of its own; it does not combine with --capacity or --trace")
	}
	if s.QuickSweep > 0 && s.SweepConcurrency < 1 {
		return fmt.Errorf("--sweep-concurrency must be ≥ 1, got %d", s.SweepConcurrency)
	}
	if s.Requests < 0 {
		return fmt.Errorf("--requests must be ≥ 1, got %d", s.Requests)
	}
	if s.Requests == 0 && s.Duration <= 0 && s.Mode != ModeTrace {
		return fmt.Errorf("--duration must be positive, got %s", s.Duration)
	}
	if s.Warmup < 0 {
		return fmt.Errorf("--warmup must not be negative, got %s", s.Warmup)
	}
	if s.Stability < 0 || s.Stability >= 1 {
		return fmt.Errorf("--stability must be a percentage between 0%% and 100%%, got %g%%", s.Stability*100)
	}
	if s.Stability > 0 && s.MaxWindows < stabilityWindows {
		return fmt.Errorf("--max-windows must be at least %d with --stability (three windows must agree), got %d", stabilityWindows, s.MaxWindows)
	}
	if s.Mode != ModeConcurrency && s.MaxInFlight < 1 {
		return fmt.Errorf("--max-in-flight must be ≥ 1, got %d", s.MaxInFlight)
	}
	return nil
}

// Options are everything a run needs besides its context.
type Options struct {
	Settings
	// Probe is what each request is sent as: the configured probe's
	// driver, workload, streaming and timeout, as the daemon sends it.
	Probe *engine.Probe
	// Config describes the target for the outputs; it must hold no secret.
	Config ConfigInfo

	JSONPath, CSVPath, RequestsPath, HTMLPath string

	Stdout, Stderr io.Writer
	// Live redraws one progress line on Stderr (a terminal); otherwise a
	// line is printed every ProgressEvery.
	Live           bool
	ProgressEvery  time.Duration
	InterruptDrain time.Duration
	Logger         *slog.Logger
}

// Report is a whole run, as --output writes it.
type Report struct {
	Tool        Tool              `json:"tool"`
	StartedAt   time.Time         `json:"started_at"`
	EndedAt     time.Time         `json:"ended_at"`
	Interrupted bool              `json:"interrupted"`
	Config      ConfigInfo        `json:"config"`
	Flags       FlagsInfo         `json:"flags"`
	Steps       []*Step           `json:"steps"`
	Thresholds  []ThresholdResult `json:"thresholds"`
	// Capacity is the answer of --capacity, or of --quick-sweep with an
	// SLO (the highest sweep rate that met it).
	Capacity *CapacityResult `json:"capacity,omitempty"`
	// Passed: every threshold held on every step (true without
	// thresholds), and the capacity reached --min-capacity.
	Passed bool `json:"passed"`
	// Merged lists the files `llm-prober bench-merge` combined.
	Merged []string `json:"merged,omitempty"`
}

// Tool identifies the build that measured.
type Tool struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

func toolInfo() Tool {
	v := version.Version
	if v == "" {
		v = "unknown" // not stamped: go run, go test
	}
	return Tool{Name: "llm-prober", Version: v, Revision: version.GetRevision(), GoVersion: version.GoVersion}
}

// Run sweeps the levels in order and reports every step; it returns the
// report and the exit code. Output files are opened before the first
// request, so an unwritable path costs no load.
func Run(ctx context.Context, o Options) (*Report, int) {
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(o.Stderr, "llm-prober bench: %v\n", err)
		return nil, ExitUsage
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.InterruptDrain <= 0 {
		o.InterruptDrain = DefaultInterruptDrain
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	out, err := openOutputs(o)
	if err != nil {
		fmt.Fprintf(o.Stderr, "llm-prober bench: %v\n", err)
		return nil, ExitFail
	}
	defer out.close()

	rep := &Report{Tool: toolInfo(), StartedAt: time.Now(), Config: o.Config, Flags: flagsInfo(&o.Settings)}
	ss := &session{o: &o, rep: rep, out: out, prog: &progress{w: o.Stderr, live: o.Live, every: o.ProgressEvery, steps: len(o.Levels)}}
	var failure error
	switch {
	case o.Search != nil:
		ss.prog.steps = 0
		rep.Capacity, failure = ss.search(ctx)
	case o.QuickSweep > 0:
		ss.prog.steps = o.QuickSweep + 2
		rep.Capacity, failure = ss.quickSweep(ctx)
	default:
		for _, level := range o.Levels {
			if ss.step(ctx, o.Mode, level, "", 0) == nil {
				break
			}
		}
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
	}
	rep.EndedAt = time.Now()
	rep.Thresholds = Evaluate(o.Thresholds, rep.Steps)
	rep.Passed = true
	for _, t := range rep.Thresholds {
		rep.Passed = rep.Passed && t.Passed
	}
	if c := rep.Capacity; c != nil && !c.Passed {
		rep.Passed = false
	}
	writeSummary(o.Stdout, rep)
	writeCapacity(o.Stdout, rep)
	writeThresholds(o.Stdout, rep)
	code := ExitPass
	if err := out.finish(rep); err != nil {
		fmt.Fprintf(o.Stderr, "llm-prober bench: %v\n", err)
		code = ExitFail
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(o.Stderr, "llm-prober bench: interrupted; statistics cover what was measured until then")
		return rep, ExitInterrupted
	case failure != nil:
		fmt.Fprintf(o.Stderr, "llm-prober bench: %v\n", failure)
		return rep, ExitFail
	case !rep.Passed:
		if c := rep.Capacity; c != nil && !c.Passed && c.Capacity > 0 && c.MinCapacity > 0 {
			fmt.Fprintf(o.Stderr, "llm-prober bench: capacity %s is below --min-capacity %s\n", FormatLevel(roundLevel(c.Capacity)), FormatLevel(c.MinCapacity))
		}
		return rep, ExitFail
	}
	return rep, code
}

// session is one run's shared state: the report, the outputs and the
// step counter, whichever way the levels are chosen.
type session struct {
	o     *Options
	rep   *Report
	out   *outputs
	prog  *progress
	index int
}

// step runs one level and reports it; nil when the run was interrupted
// (the partial step is in the report).
func (ss *session) step(ctx context.Context, mode Mode, level float64, phase string, trial int) *Step {
	if ctx.Err() != nil {
		return nil
	}
	o := ss.o
	ss.index++
	sr := newStepRun(o, ss.index, mode, level)
	sr.step.Phase, sr.step.Trial = phase, trial
	step := sr.run(ctx, ss.prog)
	ss.rep.Steps = append(ss.rep.Steps, step)
	writeStepTable(o.Stdout, step, ss.prog.steps)
	if step.Stable != nil && !*step.Stable {
		fmt.Fprintf(o.Stderr, "warning: step %d (%s) did not stabilise within %d windows of %s at ±%g%%; its statistics are the last %d windows\n",
			step.Index, step.Label(), o.MaxWindows, windowDesc(&o.Settings), o.Stability*100, step.ReportedWindows)
	}
	if err := ss.out.writeRequests(step); err != nil {
		fmt.Fprintf(o.Stderr, "llm-prober bench: %v\n", err)
	}
	if step.Interrupted {
		ss.rep.Interrupted = true
		return nil
	}
	return step
}

func windowDesc(s *Settings) string {
	if s.Requests > 0 {
		return fmt.Sprintf("%d requests", s.Requests)
	}
	return s.Duration.String()
}

// IsTerminal reports whether f is a character device (a terminal), where
// a progress line can be redrawn in place.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
