package bench

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// FlagsInfo are the bench settings as --output records them (seconds).
type FlagsInfo struct {
	Mode             Mode      `json:"mode"`
	Levels           []float64 `json:"levels"`
	Poisson          bool      `json:"poisson"`
	DurationSeconds  float64   `json:"duration_seconds"`
	WarmupSeconds    float64   `json:"warmup_seconds"`
	Requests         int       `json:"requests"`
	StabilityPercent float64   `json:"stability_percent"`
	MaxWindows       int       `json:"max_windows"`
	MaxInFlight      int       `json:"max_in_flight"`
	Thresholds       []string  `json:"thresholds"`
	Seed             uint64    `json:"seed,omitempty"`
	Burstiness       float64   `json:"burstiness,omitempty"`
	Trace            string    `json:"trace,omitempty"`
	TraceRecords     int       `json:"trace_records,omitempty"`
	SLO              []string  `json:"slo,omitempty"`
	Objective        float64   `json:"objective,omitempty"`
	QuickSweep       int       `json:"quick_sweep,omitempty"`
	Search           *Search   `json:"search,omitempty"`
	// SearchBudgetSeconds is Search.Budget in the base unit.
	SearchBudgetSeconds float64 `json:"search_budget_seconds,omitempty"`
}

func flagsInfo(s *Settings) FlagsInfo {
	f := FlagsInfo{
		Mode: s.Mode, Levels: append([]float64{}, s.Levels...), Poisson: s.Poisson,
		DurationSeconds: s.Duration.Seconds(), WarmupSeconds: s.Warmup.Seconds(),
		Requests: s.Requests, StabilityPercent: s.Stability * 100, MaxWindows: s.MaxWindows,
		MaxInFlight: s.MaxInFlight, Seed: s.Seed, Thresholds: []string{},
	}
	for _, t := range s.Thresholds {
		f.Thresholds = append(f.Thresholds, t.Text)
	}
	f.Burstiness, f.SLO, f.QuickSweep, f.Search = s.Burstiness, s.SLO.Texts, s.QuickSweep, s.Search
	if s.SLO.Set() {
		f.Objective = s.objective()
	}
	if s.Search != nil {
		f.SearchBudgetSeconds = s.Search.Budget.Seconds()
	}
	if s.Trace != nil {
		f.Trace, f.TraceRecords = s.Trace.Path, len(s.Trace.Records)
	}
	return f
}

// ---- tables on stdout ----

// writeStepTable prints a step as genai-perf prints a run: one row per
// statistic, avg/min/max/p99/p90/p75/p50 columns, times in ms.
func writeStepTable(w io.Writer, s *Step, steps int) {
	title := fmt.Sprintf("Step %s: %s", stepOf(s.Index, steps), s.Label())
	if s.Poisson {
		title += " (poisson)"
	}
	if s.Burstiness > 0 {
		title += fmt.Sprintf(" (gamma, burstiness %g)", s.Burstiness)
	}
	if s.Phase != "" {
		title += " — " + s.Phase
		if s.Trial > 0 {
			title += fmt.Sprintf(", trial %d", s.Trial)
		}
	}
	if s.StoppedEarly != "" {
		title += " — STOPPED EARLY (" + s.StoppedEarly + ")"
	}
	switch {
	case s.Interrupted:
		title += " — INTERRUPTED, partial"
	case s.Stable != nil && *s.Stable:
		title += fmt.Sprintf(" — stable over the last %d windows", s.ReportedWindows)
	case s.Stable != nil:
		title += " — NOT STABLE"
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// AlignRight suits the numbers; names padded to one width stay left.
	const nameWidth = len("Output sequence length (tokens)")
	fmt.Fprintf(tw, "%-*s\tavg\tmin\tmax\tp99\tp90\tp75\tp50\t\n", nameWidth, "Statistic")
	row := func(name string, sm Summary, f func(float64) string) {
		name = fmt.Sprintf("%-*s", nameWidth, name)
		if sm.Count == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
			f(sm.Avg), f(sm.Min), f(sm.Max), f(sm.P99), f(sm.P90), f(sm.P75), f(sm.P50))
	}
	row("Time to first token (ms)", s.TTFT, formatMS)
	row("Time per output token (ms)", s.TPOT, formatMS)
	row("Inter token latency (ms)", s.ITL, formatMS)
	row("Request latency (ms)", s.Latency, formatMS)
	row("Output sequence length (tokens)", s.OutputTokensPerRequest, tokens)
	row("Input sequence length (tokens)", s.InputTokensPerRequest, tokens)
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Output token throughput (per sec)\t%.2f\n", s.OutputTokensPerSecond)
	fmt.Fprintf(tw, "Request throughput (per sec)\t%.2f\n", s.RequestsPerSecond)
	if c := s.Completions; c != nil {
		fmt.Fprintf(tw, "Throughput measured over\t%d requests completed in the %.2f s measurement window (the drain after it left out)\n", c.Requests, c.Seconds)
	}
	fmt.Fprintf(tw, "Requests\t%d measured (%d successful) over %.2f s, %d warm-up discarded%s\n",
		s.Requests, s.Successes, s.MeasurementSeconds, s.WarmupRequests, extraCounts(s))
	fmt.Fprintf(tw, "Errors\t%s\n", outcomeLine(s))
	fmt.Fprintf(tw, "Skipped arrivals\t%d%s\n", s.SkippedTotal, skippedLine(s))
	if g := s.Goodput; g != nil {
		verdict := "met"
		if !g.Passed {
			verdict = "NOT met"
		}
		fmt.Fprintf(tw, "Goodput\t%.2f%% (%d of %d offered good, %.2f/s); objective %g%% %s\n",
			g.Ratio*100, g.Good, g.Offered, g.GoodPerSecond, g.Objective*100, verdict)
	}
	_ = tw.Flush()
}

func tokens(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func extraCounts(s *Step) string {
	var b strings.Builder
	if s.UnmeasuredRequests > 0 {
		fmt.Fprintf(&b, ", %d after the reported windows", s.UnmeasuredRequests)
	}
	if s.CancelledRequests > 0 {
		fmt.Fprintf(&b, ", %d cancelled on interrupt or early stop", s.CancelledRequests)
	}
	return b.String()
}

func outcomeLine(s *Step) string {
	failed := s.Requests - s.Successes
	if failed == 0 {
		return "0 (0.00%)"
	}
	var parts []string
	for _, o := range probe.Outcomes() {
		if n := s.Outcomes[string(o)]; n > 0 && o != probe.OutcomeSuccess {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	line := fmt.Sprintf("%d (%.2f%%): %s", failed, s.ErrorRate*100, strings.Join(parts, ", "))
	for _, o := range probe.Outcomes() {
		if msg, ok := s.FirstErrors[string(o)]; ok {
			line += fmt.Sprintf("\n\tfirst %s: %s", o, msg)
		}
	}
	return line
}

func skippedLine(s *Step) string {
	if s.SkippedTotal == 0 {
		return ""
	}
	var reasons []string
	for r, n := range s.Skipped {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(reasons)
	return " (" + strings.Join(reasons, ", ") + "; raise --max-in-flight or lower the rate)"
}

// writeSummary prints one row per step, as perf_analyzer's and
// genai-perf's sweep summaries do.
func writeSummary(w io.Writer, rep *Report) {
	if len(rep.Steps) == 0 {
		fmt.Fprintln(w, "\nNo step ran.")
		return
	}
	mode := rep.Steps[0].Mode
	mixed, goodput := false, false
	for _, s := range rep.Steps {
		mixed = mixed || s.Mode != mode
		goodput = goodput || s.Goodput != nil
	}
	levelHead := "Concurrency"
	switch {
	case mixed:
		levelHead = "Level"
	case mode == ModeRate:
		levelHead = "Rate (req/s)"
	case mode == ModeTrace:
		levelHead = "Trace speed"
	}
	goodHead := ""
	if goodput {
		goodHead = "Goodput %\t"
	}
	fmt.Fprintf(w, "\nSummary: %s / %s (%s), %s\n", rep.Config.Target, rep.Config.Probe, rep.Config.Model, rep.Config.Endpoint)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tRequests\tReq/s\tOutput tok/s\tTTFT p50\tTTFT p95\tTTFT p99\tTPOT p50\tTPOT p95\tITL p50\tITL p99\tLatency p50\tLatency p99\tErrors %%\t%s\n", levelHead, goodHead)
	ms := func(sm Summary, v float64) string {
		if sm.Count == 0 {
			return "-"
		}
		return formatMS(v)
	}
	for _, s := range rep.Steps {
		level := FormatLevel(s.Level)
		if mixed {
			level = s.Label()
		}
		switch {
		case s.Interrupted:
			level += " (partial)"
		case s.StoppedEarly != "":
			level += " (" + s.StoppedEarly + ")"
		case s.Stable != nil && !*s.Stable:
			level += " (unstable)"
		}
		good := ""
		if goodput {
			good = "-\t"
			if s.Goodput != nil {
				good = fmt.Sprintf("%.2f\t", s.Goodput.Ratio*100)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n",
			level, s.Requests, s.RequestsPerSecond, s.OutputTokensPerSecond,
			ms(s.TTFT, s.TTFT.P50), ms(s.TTFT, s.TTFT.P95), ms(s.TTFT, s.TTFT.P99),
			ms(s.TPOT, s.TPOT.P50), ms(s.TPOT, s.TPOT.P95),
			ms(s.ITL, s.ITL.P50), ms(s.ITL, s.ITL.P99),
			ms(s.Latency, s.Latency.P50), ms(s.Latency, s.Latency.P99),
			s.ErrorRate*100, good)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "Times in ms. Req/s counts successful requests over the measurement span (docs/bench.md).")
}

// worstLabel names the step where a threshold was worst; steps of a
// quick sweep differ in mode, so the step's own label is used.
func worstLabel(rep *Report, r ThresholdResult) string {
	for _, s := range rep.Steps {
		if s.Index == r.WorstStep {
			return s.Label()
		}
	}
	return Label(rep.Steps[0].Mode, r.WorstLevel)
}

func writeThresholds(w io.Writer, rep *Report) {
	if len(rep.Thresholds) == 0 {
		return
	}
	fmt.Fprintln(w, "\nThresholds")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rep.Thresholds {
		mark := "✓"
		if !r.Passed {
			mark = "✗"
		}
		var detail string
		switch {
		case r.WorstStep == 0:
			detail = "no step ran"
		case r.Missing && r.WorstValue == nil:
			detail = fmt.Sprintf("no value at %s (no successful request)", worstLabel(rep, r))
		default:
			detail = fmt.Sprintf("worst %s at %s", r.Format(*r.WorstValue), worstLabel(rep, r))
			if r.Missing {
				detail += "; some step had no value"
			}
		}
		fmt.Fprintf(tw, "%s %s\t%s\n", mark, r.Text, detail)
	}
	_ = tw.Flush()
}

// ---- files ----

type outputs struct {
	o        *Options
	json     *os.File
	csv      *os.File
	csvNew   bool
	requests *os.File
	reqBuf   *bufio.Writer
	html     *os.File
}

// openOutputs opens every output file before any load is sent.
func openOutputs(o Options) (*outputs, error) {
	out := &outputs{o: &o}
	var err error
	if o.JSONPath != "" {
		if out.json, err = os.Create(o.JSONPath); err != nil {
			return nil, fmt.Errorf("--output: %w", err)
		}
	}
	if o.CSVPath != "" {
		out.csv, err = os.OpenFile(o.CSVPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			out.close()
			return nil, fmt.Errorf("--csv: %w", err)
		}
		fi, err := out.csv.Stat()
		if err != nil {
			out.close()
			return nil, fmt.Errorf("--csv: %w", err)
		}
		out.csvNew = fi.Size() == 0
		if !out.csvNew {
			if err := checkCSVHeader(o.CSVPath); err != nil {
				out.close()
				return nil, err
			}
		}
	}
	if o.RequestsPath != "" {
		if out.requests, err = os.Create(o.RequestsPath); err != nil {
			out.close()
			return nil, fmt.Errorf("--export-requests: %w", err)
		}
		out.reqBuf = bufio.NewWriter(out.requests)
	}
	if o.HTMLPath != "" {
		if out.html, err = os.Create(o.HTMLPath); err != nil {
			out.close()
			return nil, fmt.Errorf("--html: %w", err)
		}
	}
	return out, nil
}

// checkCSVHeader refuses to append rows under another layout's header:
// the columns would silently mean something else.
func checkCSVHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--csv: %w", err)
	}
	defer f.Close()
	head, err := csv.NewReader(f).Read()
	if err != nil {
		return fmt.Errorf("--csv %s: cannot read its header row: %w; choose a new file", path, err)
	}
	if !slices.Equal(head, csvHeader()) {
		return fmt.Errorf("--csv %s: its header row differs from this version's columns; choose a new file so columns keep their meaning", path)
	}
	return nil
}

func (out *outputs) close() {
	for _, f := range []*os.File{out.json, out.csv, out.requests, out.html} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// requestRecord is one line of --export-requests.
type requestRecord struct {
	Step                 int        `json:"step"`
	Mode                 Mode       `json:"mode"`
	Level                float64    `json:"level"`
	Window               int        `json:"window"`
	RequestID            string     `json:"request_id"`
	Start                time.Time  `json:"start"`
	ScheduleLagSeconds   float64    `json:"schedule_lag_seconds"`
	Outcome              string     `json:"outcome"`
	Error                string     `json:"error,omitempty"`
	Status               int        `json:"status"`
	Streamed             bool       `json:"streamed"`
	TTFTSeconds          *float64   `json:"ttft_seconds"`
	TPOTSeconds          *float64   `json:"tpot_seconds"`
	EndToEndSeconds      float64    `json:"e2e_seconds"`
	ChunkOffsetsSeconds  []float64  `json:"chunk_offsets_seconds"`
	ChunkTokens          []int      `json:"chunk_tokens,omitempty"`
	InputTokens          int        `json:"input_tokens"`
	InputTokensSource    string     `json:"input_tokens_source"`
	OutputTokens         int        `json:"output_tokens"`
	OutputTokensSource   string     `json:"output_tokens_source"`
	FinishReason         string     `json:"finish_reason,omitempty"`
	Phases               phasesJSON `json:"phases"`
	ServerTimingsSeconds []timing   `json:"server_timings,omitempty"`
	// Retry is how the first attempt failed when the request was sent
	// again on a new connection (probe.Retry.Reason), RetryError that
	// attempt's error (redacted, clipped); both empty otherwise.
	Retry      string `json:"retry,omitempty"`
	RetryError string `json:"retry_error,omitempty"`
	// ServerLoad is the load report the server sent with the answer
	// (endpoint-load-metrics); nil when none came.
	ServerLoad *serverLoadJSON `json:"server_load,omitempty"`
}

// serverLoadJSON is probe.ServerLoad; a value the report lacked is
// absent, not 0.
type serverLoadJSON struct {
	Waiting      *float64 `json:"requests_waiting,omitempty"`
	Running      *float64 `json:"requests_running,omitempty"`
	KVCacheUsage *float64 `json:"kv_cache_usage_ratio,omitempty"`
	Error        string   `json:"error,omitempty"`
}

func valueIf(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

type phasesJSON struct {
	DNS              *float64 `json:"dns_seconds,omitempty"`
	Connect          *float64 `json:"connect_seconds,omitempty"`
	TLS              *float64 `json:"tls_seconds,omitempty"`
	Write            *float64 `json:"write_seconds,omitempty"`
	FirstByte        *float64 `json:"first_byte_seconds,omitempty"`
	ConnectionReused bool     `json:"connection_reused"`
}

type timing struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

func secondsIf(d time.Duration, ok bool) *float64 {
	if !ok {
		return nil
	}
	v := d.Seconds()
	return &v
}

// encodeRequestRecord is rec's --export-requests line, newline included.
func encodeRequestRecord(s *Step, rec *record, r *probe.Result) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(newRequestRecord(s, rec, r)); err != nil {
		// Unreachable: every field is a plain value. Keep the line
		// count honest anyway.
		return fmt.Appendf(nil, "{\"request_id\":%q,\"error\":%q}\n", r.RequestID, err.Error())
	}
	return b.Bytes()
}

func newRequestRecord(s *Step, rec *record, r *probe.Result) requestRecord {
	out := requestRecord{
		Step: s.Index, Mode: s.Mode, Level: s.Level, Window: rec.window,
		RequestID: r.RequestID, Start: r.Start.UTC(),
		Outcome: string(r.Outcome), Status: r.StatusCode, Streamed: r.Streamed,
		TTFTSeconds:     secondsIf(r.TTFT, r.TTFT > 0),
		EndToEndSeconds: r.EndToEnd.Seconds(),
		InputTokens:     r.InputTokens, InputTokensSource: string(r.InputTokensSource),
		OutputTokens: r.OutputTokens, OutputTokensSource: string(r.OutputTokensSource),
		FinishReason:        r.FinishReason,
		ChunkOffsetsSeconds: make([]float64, len(r.Chunks)),
		Phases: phasesJSON{
			DNS: secondsIf(r.Phases.DNS, r.Phases.HasDNS), Connect: secondsIf(r.Phases.Connect, r.Phases.HasConnect),
			TLS: secondsIf(r.Phases.TLS, r.Phases.HasTLS), Write: secondsIf(r.Phases.Write, r.Phases.HasWrite),
			FirstByte: secondsIf(r.Phases.FirstByte, r.Phases.HasFirstByte), ConnectionReused: r.Phases.ConnectionReused,
		},
	}
	if !rec.planned.IsZero() {
		out.ScheduleLagSeconds = max(r.Start.Sub(rec.planned), 0).Seconds()
	}
	if r.Err != nil {
		out.Error = r.Err.Error()
	}
	if d, ok := r.TPOT(); ok {
		out.TPOTSeconds = secondsIf(d, true)
	}
	uneven := false
	for i, c := range r.Chunks {
		out.ChunkOffsetsSeconds[i] = c.At.Seconds()
		uneven = uneven || c.Tokens != 1
	}
	if uneven {
		for _, c := range r.Chunks {
			out.ChunkTokens = append(out.ChunkTokens, c.Tokens)
		}
	}
	for _, st := range r.ServerTimings {
		out.ServerTimingsSeconds = append(out.ServerTimingsSeconds, timing{Name: st.Name, Seconds: st.Duration.Seconds()})
	}
	if rt := r.Retry; rt != nil {
		// Redacted by the driver; the default patterns once more, as
		// every file output.
		out.Retry, out.RetryError = rt.Reason, redact.Default().String(rt.ErrText())
	}
	if l := r.ServerLoad; l != nil {
		out.ServerLoad = &serverLoadJSON{
			Waiting: valueIf(l.Waiting, l.HasWaiting), Running: valueIf(l.Running, l.HasRunning),
			KVCacheUsage: valueIf(l.KVCacheUsage, l.HasKVCache),
		}
		if l.Err != nil {
			out.ServerLoad.Error = redact.Default().String(l.Err.Error())
		}
	}
	return out
}

// writeRequests appends a finished step's measured requests, so an
// interrupted or failing run still leaves what it measured.
func (out *outputs) writeRequests(s *Step) error {
	if out.reqBuf == nil {
		return nil
	}
	for _, rec := range s.records {
		if _, err := out.reqBuf.Write(rec.export); err != nil {
			return fmt.Errorf("--export-requests: %w", err)
		}
	}
	if err := out.reqBuf.Flush(); err != nil {
		return fmt.Errorf("--export-requests: %w", err)
	}
	return nil
}

// finish writes the JSON report and the CSV rows.
func (out *outputs) finish(rep *Report) error {
	var errs []error
	if out.json != nil {
		enc := json.NewEncoder(out.json)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			errs = append(errs, fmt.Errorf("--output: %w", err))
		}
	}
	if out.csv != nil {
		if err := writeCSV(out.csv, out.csvNew, rep); err != nil {
			errs = append(errs, fmt.Errorf("--csv: %w", err))
		}
	}
	if out.html != nil {
		w := bufio.NewWriter(out.html)
		err := WriteHTML(w, rep)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--html: %w", err))
		}
	}
	for _, f := range []*os.File{out.json, out.csv, out.requests, out.html} {
		if f != nil {
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

var csvSummaries = []string{"ttft_seconds", "tpot_seconds", "itl_seconds", "latency_seconds", "output_tokens"}

func csvHeader() []string {
	h := []string{"timestamp", "version", "target", "probe", "model", "mode", "level", "poisson",
		"interrupted", "stable", "requests", "successes", "error_rate", "warmup_requests", "skipped",
		"measurement_seconds", "requests_per_second", "output_tokens_per_second", "input_tokens_per_second"}
	for _, s := range csvSummaries {
		for _, st := range summaryStats {
			h = append(h, s+"_"+st)
		}
	}
	// Added for capacity searches and quick sweeps; empty otherwise.
	return append(h, "phase", "trial", "stopped_early", "goodput")
}

func writeCSV(f io.Writer, header bool, rep *Report) error {
	w := csv.NewWriter(f)
	if header {
		if err := w.Write(csvHeader()); err != nil {
			return err
		}
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, s := range rep.Steps {
		stable := ""
		if s.Stable != nil {
			stable = strconv.FormatBool(*s.Stable)
		}
		row := []string{s.EndedAt.UTC().Format(time.RFC3339), rep.Tool.Version, rep.Config.Target, rep.Config.Probe, rep.Config.Model,
			string(s.Mode), FormatLevel(s.Level), strconv.FormatBool(s.Poisson), strconv.FormatBool(s.Interrupted), stable,
			strconv.Itoa(s.Requests), strconv.Itoa(s.Successes), num(s.ErrorRate), strconv.Itoa(s.WarmupRequests), strconv.Itoa(s.SkippedTotal),
			num(s.MeasurementSeconds), num(s.RequestsPerSecond), num(s.OutputTokensPerSecond), num(s.InputTokensPerSecond)}
		for _, sm := range []Summary{s.TTFT, s.TPOT, s.ITL, s.Latency, s.OutputTokensPerRequest} {
			for _, st := range summaryStats {
				if v, ok := sm.stat(st); ok {
					row = append(row, num(v))
				} else {
					row = append(row, "")
				}
			}
		}
		trial, goodput := "", ""
		if s.Trial > 0 {
			trial = strconv.Itoa(s.Trial)
		}
		if s.Goodput != nil {
			goodput = num(s.Goodput.Ratio)
		}
		row = append(row, s.Phase, trial, s.StoppedEarly, goodput)
		if err := w.Write(row); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}
