package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// maxReportBytes bounds a result file read for merging: a report is
// kilobytes per step; anything far larger is not one.
const maxReportBytes = 256 << 20

// ReadReport decodes and checks one --output file: every step must carry
// the sketches a merge needs, consistent with its counts.
func ReadReport(r io.Reader, name string) (*Report, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxReportBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB; not a bench result", name, maxReportBytes>>20)
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: not a bench --output JSON file: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON document; want one bench --output file", name)
	}
	if rep.Tool.Name != "llm-prober" {
		return nil, fmt.Errorf("%s: not written by llm-prober bench (tool %q)", name, rep.Tool.Name)
	}
	if len(rep.Steps) == 0 {
		return nil, fmt.Errorf("%s: has no steps to merge", name)
	}
	for i, s := range rep.Steps {
		if s == nil {
			return nil, fmt.Errorf("%s: step %d is null", name, i+1)
		}
		where := fmt.Sprintf("%s: step %d (%s)", name, s.Index, s.Label())
		h := s.Histograms
		if h == nil {
			return nil, fmt.Errorf("%s: has no histograms; it was written by a bench without them, so its percentiles cannot be merged exactly — rerun with this version", where)
		}
		for _, c := range []struct {
			name  string
			sk    *Sketch
			count int
		}{
			{"time_to_first_token_seconds", h.TTFT, s.TTFT.Count}, {"time_per_output_token_seconds", h.TPOT, s.TPOT.Count},
			{"inter_token_latency_seconds", h.ITL, s.ITL.Count}, {"request_latency_seconds", h.Latency, s.Latency.Count},
			{"output_tokens_per_request", h.OutputTokens, s.OutputTokensPerRequest.Count}, {"input_tokens_per_request", h.InputTokens, s.InputTokensPerRequest.Count},
		} {
			if err := c.sk.check(); err != nil {
				return nil, fmt.Errorf("%s: histogram %s: %w", where, c.name, err)
			}
			if c.sk.Count != c.count {
				return nil, fmt.Errorf("%s: histogram %s holds %d observations, the summary %d", where, c.name, c.sk.Count, c.count)
			}
		}
		if s.Requests < 0 || s.Successes < 0 || s.Successes > s.Requests || s.OutputTokens < 0 || s.InputTokens < 0 || s.SkippedTotal < 0 {
			return nil, fmt.Errorf("%s: inconsistent counts (%d requests, %d successes)", where, s.Requests, s.Successes)
		}
		if s.Requests > 0 && (s.FirstStart.IsZero() || s.LastEnd.Before(s.FirstStart)) {
			return nil, fmt.Errorf("%s: missing or reversed first_request_start/last_response_end", where)
		}
	}
	return &rep, nil
}

// Merge combines reports of runs that loaded one target at the same time
// from several machines (a Kubernetes Job with parallelism N, each given
// 1/N of the load) into the report of the whole load. Step k of every
// report is merged with step k of the others: counts and tokens add, the
// span is the union's, throughput is recomputed over it, levels add
// (N pods at rate r are rate N·r), and every percentile comes from the
// merged sketches — never an average of percentiles.
func Merge(reports []*Report, names []string) (*Report, error) {
	if len(reports) < 2 {
		return nil, fmt.Errorf("merge needs at least two result files, got %d", len(reports))
	}
	first := reports[0]
	for i, r := range reports[1:] {
		name := names[i+1]
		if r.Capacity != nil && r.Capacity.Method == "search" || first.Capacity != nil && first.Capacity.Method == "search" {
			return nil, fmt.Errorf("%s: a capacity search chooses its levels per run, so its steps do not line up; merge sweeps run with the same levels", name)
		}
		if r.Config.Target != first.Config.Target || r.Config.Probe != first.Config.Probe || r.Config.Model != first.Config.Model || r.Config.Streaming != first.Config.Streaming {
			return nil, fmt.Errorf("%s: measured %s/%s (%s), but %s measured %s/%s (%s); merge runs of one target and probe", name,
				r.Config.Target, r.Config.Probe, r.Config.Model, names[0], first.Config.Target, first.Config.Probe, first.Config.Model)
		}
		if len(r.Steps) != len(first.Steps) {
			return nil, fmt.Errorf("%s: has %d steps, %s has %d; merge runs of the same sweep", name, len(r.Steps), names[0], len(first.Steps))
		}
		for k, s := range r.Steps {
			if s.Mode != first.Steps[k].Mode {
				return nil, fmt.Errorf("%s: step %d is %s, in %s it is %s", name, k+1, s.Mode, names[0], first.Steps[k].Mode)
			}
		}
	}
	out := &Report{Tool: toolInfo(), Config: first.Config, Flags: first.Flags, Merged: slices.Clone(names)}
	for _, r := range reports {
		if out.StartedAt.IsZero() || r.StartedAt.Before(out.StartedAt) {
			out.StartedAt = r.StartedAt
		}
		if r.EndedAt.After(out.EndedAt) {
			out.EndedAt = r.EndedAt
		}
		out.Interrupted = out.Interrupted || r.Interrupted
	}
	for k := range first.Steps {
		parts := make([]*Step, len(reports))
		for i, r := range reports {
			parts[i] = r.Steps[k]
		}
		out.Steps = append(out.Steps, mergeSteps(parts))
	}
	// The runs' flags say what one machine did; the merged levels are
	// the whole load's.
	out.Flags.Levels = nil
	for _, st := range out.Steps {
		out.Flags.Levels = append(out.Flags.Levels, st.Level)
	}
	var ths []Threshold
	for _, text := range first.Flags.Thresholds {
		th, err := ParseThreshold(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[0], err)
		}
		ths = append(ths, th)
	}
	out.Thresholds = Evaluate(ths, out.Steps)
	out.Passed = true
	for _, t := range out.Thresholds {
		out.Passed = out.Passed && t.Passed
	}
	return out, nil
}

func mergeSteps(parts []*Step) *Step {
	f := parts[0]
	m := &Step{Index: f.Index, Mode: f.Mode, Poisson: f.Poisson, Burstiness: f.Burstiness, Phase: f.Phase,
		Skipped: map[string]int{}, StartedAt: f.StartedAt, MeasurementStartedAt: f.MeasurementStartedAt, EndedAt: f.EndedAt}
	m.Outcomes = map[string]int{}
	h := &Histograms{TTFT: &Sketch{Gamma: sketchGamma}, TPOT: &Sketch{Gamma: sketchGamma}, ITL: &Sketch{Gamma: sketchGamma},
		Latency: &Sketch{Gamma: sketchGamma}, OutputTokens: &Sketch{Gamma: sketchGamma}, InputTokens: &Sketch{Gamma: sketchGamma}}
	var good, offered int
	goodput := true
	var lag float64
	for _, p := range parts {
		if m.Mode == ModeTrace {
			m.Level = f.Level
		} else {
			m.Level = roundLevel(m.Level + p.Level)
		}
		m.StartedAt = earlier(m.StartedAt, p.StartedAt)
		m.MeasurementStartedAt = earlier(m.MeasurementStartedAt, p.MeasurementStartedAt)
		if p.EndedAt.After(m.EndedAt) {
			m.EndedAt = p.EndedAt
		}
		m.Interrupted = m.Interrupted || p.Interrupted
		if p.StoppedEarly != "" {
			m.StoppedEarly = p.StoppedEarly
		}
		m.ReportedWindows = max(m.ReportedWindows, p.ReportedWindows)
		m.WarmupRequests += p.WarmupRequests
		m.UnmeasuredRequests += p.UnmeasuredRequests
		m.CancelledRequests += p.CancelledRequests
		for k, v := range p.Skipped {
			m.Skipped[k] += v
		}
		m.SkippedTotal += p.SkippedTotal
		m.WarmupSkipped += p.WarmupSkipped
		// The exact p99 of the union needs every lag; the worst part's
		// is an upper bound, and says which machine lagged.
		lag = max(lag, p.ScheduleLagP99)
		m.Requests += p.Requests
		m.Successes += p.Successes
		for k, v := range p.Outcomes {
			m.Outcomes[k] += v
		}
		for k, v := range p.FirstErrors {
			if _, ok := m.FirstErrors[k]; !ok {
				if m.FirstErrors == nil {
					m.FirstErrors = map[string]string{}
				}
				m.FirstErrors[k] = v
			}
		}
		m.OutputTokens += p.OutputTokens
		m.InputTokens += p.InputTokens
		m.InputTokensUnknown += p.InputTokensUnknown
		if p.Requests > 0 {
			m.FirstStart = earlier(m.FirstStart, p.FirstStart)
			if p.LastEnd.After(m.LastEnd) {
				m.LastEnd = p.LastEnd
			}
		}
		ph := p.Histograms
		h.TTFT, h.TPOT, h.ITL = h.TTFT.merge(ph.TTFT), h.TPOT.merge(ph.TPOT), h.ITL.merge(ph.ITL)
		h.Latency, h.OutputTokens, h.InputTokens = h.Latency.merge(ph.Latency), h.OutputTokens.merge(ph.OutputTokens), h.InputTokens.merge(ph.InputTokens)
		if p.Goodput == nil {
			goodput = false
		} else {
			good += p.Goodput.Good
			offered += p.Goodput.Offered
		}
	}
	m.ScheduleLagP99 = lag
	m.Histograms = h
	if m.Requests > 0 {
		m.ErrorRate = float64(m.Requests-m.Successes) / float64(m.Requests)
	}
	if sp := m.LastEnd.Sub(m.FirstStart).Seconds(); sp > 0 {
		m.MeasurementSeconds = sp
		m.RequestsPerSecond = float64(m.Successes) / sp
		m.OutputTokensPerSecond = float64(m.OutputTokens) / sp
		m.InputTokensPerSecond = float64(m.InputTokens) / sp
	}
	// Parts measured over their completion windows (a quick sweep's
	// maximum-throughput step) ran at the same time on their machines:
	// the union completed their sum in the longest of those windows.
	completions := &CompletionWindow{}
	for _, p := range parts {
		if p.Completions == nil {
			completions = nil
			break
		}
		completions.Seconds = max(completions.Seconds, p.Completions.Seconds)
		completions.Requests += p.Completions.Requests
		completions.OutputTokens += p.Completions.OutputTokens
		completions.InputTokens += p.Completions.InputTokens
	}
	if completions != nil {
		completions.rates()
		completions.apply(&m.Stats)
		m.Completions = completions
	}
	m.TTFT, m.TPOT, m.ITL = h.TTFT.summary(), h.TPOT.summary(), h.ITL.summary()
	m.Latency, m.OutputTokensPerRequest, m.InputTokensPerRequest = h.Latency.summary(), h.OutputTokens.summary(), h.InputTokens.summary()
	if goodput {
		g := &Goodput{Good: good, Offered: offered, Objective: f.Goodput.Objective}
		if offered > 0 {
			g.Ratio = float64(good) / float64(offered)
		}
		if m.MeasurementSeconds > 0 {
			g.GoodPerSecond = float64(good) / m.MeasurementSeconds
		}
		g.Passed = offered > 0 && g.Ratio >= g.Objective && m.StoppedEarly == "" && !m.Interrupted
		m.Goodput = g
	}
	return m
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// MergeFlags are the flags of `llm-prober bench-merge`.
type MergeFlags struct {
	Cmd               *kingpin.CmdClause
	files             *[]string
	output, csv, html *string
}

// AddMergeCommand adds `bench-merge` to app.
func AddMergeCommand(app *kingpin.Application) *MergeFlags {
	c := app.Command("bench-merge", "Merge the --output JSON files of bench runs that loaded one target at once from several machines into one result (docs/bench.md#merging).")
	f := &MergeFlags{Cmd: c}
	f.files = c.Arg("file", "bench --output JSON files, two or more.").Required().Strings()
	f.output = c.Flag("output", "Write the merged result as JSON to this file.").String()
	f.csv = c.Flag("csv", "Append the merged steps to this CSV file.").String()
	f.html = c.Flag("html", "Write the merged result as a self-contained HTML report.").String()
	return f
}

// Main merges the files, prints the summary and writes the outputs; it
// exits 1 when a file cannot be merged or a threshold of the runs fails
// on the merged steps.
func (f *MergeFlags) Main(stdout, stderr io.Writer) int {
	var reports []*Report
	for _, name := range *f.files {
		fh, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "llm-prober bench-merge: %v\n", err)
			return ExitFail
		}
		rep, err := ReadReport(fh, name)
		fh.Close()
		if err != nil {
			fmt.Fprintf(stderr, "llm-prober bench-merge: %v\n", err)
			return ExitFail
		}
		reports = append(reports, rep)
	}
	merged, err := Merge(reports, *f.files)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober bench-merge: %v\n", err)
		return ExitFail
	}
	fmt.Fprintf(stdout, "Merged %s\n", strings.Join(*f.files, ", "))
	writeSummary(stdout, merged)
	writeThresholds(stdout, merged)
	out, err := openOutputs(Options{JSONPath: *f.output, CSVPath: *f.csv, HTMLPath: *f.html})
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober bench-merge: %v\n", err)
		return ExitFail
	}
	defer out.close()
	if err := out.finish(merged); err != nil {
		fmt.Fprintf(stderr, "llm-prober bench-merge: %v\n", err)
		return ExitFail
	}
	if !merged.Passed {
		return ExitFail
	}
	return ExitPass
}
