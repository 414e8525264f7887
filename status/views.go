package status

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/alertmodel"
	"github.com/llm-prober/llm-prober/internal/display"
	"github.com/llm-prober/llm-prober/internal/stats"
	"github.com/llm-prober/llm-prober/probe"
)

// The views hold strings formatted in Go: the templates only place them,
// which keeps them simple and rendering cheap.

// maxIndexErrorChars is how much of a failing probe's error "/" shows; the
// probe page shows it whole (as kept, ≤ 1 KiB).
const maxIndexErrorChars = 300

type page struct {
	// Root prefixes every link (Options.Root).
	Root                  string
	Title                 string
	Now                   string
	Version, BuildContext string
	Links                 []Link
}

func (h *Handler) page(title string) page {
	return page{
		Root:         h.opts.Root,
		Title:        title,
		Now:          h.opts.Now().UTC().Format(timeLayout),
		Version:      h.opts.Version,
		BuildContext: h.opts.BuildContext,
		Links:        h.opts.Links,
	}
}

type notFoundView struct {
	page
	Message string
}

type indexView struct {
	page
	ConfigLoaded bool
	HistoryN     int
	Targets      []targetView
	GPU          *gpuView
}

type targetView struct {
	Name, Protocol, Endpoint, Model string
	// Server is nil when the target has no server_metrics.
	Server *serverView
	Probes []probeRow
}

type serverView struct {
	URL, Kind string
	Up        bool
	// State is "up", "down" or "not scraped yet"; When when it was scraped.
	State, When, Err string
	Models           []serverModelView
}

type serverModelView struct {
	Model, Waiting, Running, KVCache, Batch string
}

type probeRow struct {
	Name, Link string
	Schedule   string
	// Alerting is what the shipped alert rules can do for the probe.
	Alerting alertingView
	// Known is false when the history keeps nothing for the probe.
	Known, HasResults, OK bool
	Outcome, When, Ago    string
	LastTTFT              string
	Success, Count        string
	TTFTP50, TTFTP95      string
	Err                   string
	// Charts are the sparklines of the kept results: TTFT and TPOT, or
	// end-to-end for a probe whose answers are not streamed.
	Charts []sparkView
}

// alertingView is the alert model's verdict on a probe
// (config.Probe.AlertVerdict): Short for the index's table, Summary,
// NotRunning and Assumptions for the probe page, Title (the summary and
// the warnings) as the short form's tooltip.
type alertingView struct {
	Short, Summary, NotRunning, Assumptions, Title string
	Warnings                                       []string
}

func alertingOf(pc *config.Probe) alertingView {
	v := pc.AlertVerdict()
	a := alertingView{Short: v.Short(), Summary: v.Summary(), Assumptions: v.Rules.Assumptions(), Warnings: v.Warnings}
	switch {
	case len(pc.Schedule.Active) > 0:
		// Its gaps include the closed windows: no planned interval is
		// exported, and LLMProbeNotRunning does not watch it.
		a.NotRunning = "LLMProbeNotRunning does not watch a probe with active windows."
	case v.Known:
		a.NotRunning = fmt.Sprintf("If it stops running, LLMProbeNotRunning tickets after ~%s.", alertmodel.Approx(v.NotRunning))
	}
	a.Title = a.Summary
	for _, w := range v.Warnings {
		a.Title += "\nWARNING: " + w
	}
	return a
}

type gpuView struct {
	// Message replaces the table when there is nothing to show.
	Message string
	When    string
	OK      bool
	Devices []gpuDeviceView
}

type gpuDeviceView struct {
	Index, Name, UUID, Utilization, Memory, Temperature, Power string
}

func (h *Handler) indexView(cfg *config.Config, st state) indexView {
	v := indexView{page: h.page("llm-prober"), ConfigLoaded: cfg != nil, HistoryN: h.opts.History.PerProbe()}
	if cfg == nil {
		return v
	}
	now := h.opts.Now()
	servers := map[string]*collector.ServerSnapshot{}
	for i := range st.servers {
		servers[st.servers[i].Target] = &st.servers[i]
	}
	v.Targets = make([]targetView, 0, len(cfg.Targets))
	var sc chartScratch
	for _, t := range cfg.Targets {
		tv := targetView{Name: t.Name, Protocol: t.Protocol, Endpoint: display.Endpoint(t.Endpoint()), Model: t.Model}
		if t.ServerMetrics != nil {
			tv.Server = serverViewOf(servers[t.Name], t.ServerMetrics, now)
		}
		tv.Probes = make([]probeRow, 0, len(t.Probes))
		for _, pc := range t.Probes {
			tv.Probes = append(tv.Probes, h.probeRow(t, pc, now, &sc))
		}
		v.Targets = append(v.Targets, tv)
	}
	if st.gpu != nil {
		v.GPU = gpuViewOf(st.gpu, now)
	}
	return v
}

func (h *Handler) probeRow(t *config.Target, pc *config.Probe, now time.Time, sc *chartScratch) probeRow {
	row := probeRow{Name: pc.Name, Link: h.opts.Root + ProbePath(t.Name, pc.Name), Schedule: scheduleOf(pc), Alerting: alertingOf(pc)}
	s, ok := h.opts.History.Summary(t.Name, pc.Name)
	if !ok {
		return row
	}
	row.Known = true
	if s.Count == 0 {
		return row
	}
	row.HasResults = true
	row.OK = s.Last.OK()
	row.Outcome = string(s.Last.Outcome)
	row.When = s.Last.Start.UTC().Format(clockLayout)
	row.Ago = ago(now, s.Last.Start)
	row.LastTTFT = durOrDash(s.LastTTFT, s.LastTTFT > 0)
	row.Success = fmt.Sprintf("%.1f%%", 100*s.SuccessRatio())
	row.Count = fmt.Sprintf("%d/%d", s.Successes, s.Count)
	row.TTFTP50 = durOrDash(s.TTFTP50, s.TTFTCount > 0)
	row.TTFTP95 = durOrDash(s.TTFTP95, s.TTFTCount > 0)
	if !row.OK {
		row.Err = truncate(s.Last.Err, maxIndexErrorChars)
	}
	row.Charts = charts(pc, h.opts.History.Points(t.Name, pc.Name, sc.pts[:0]), sc)
	return row
}

// charts draws a probe's sparklines: TTFT and TPOT against the probe's
// SLO thresholds, or end-to-end when the probe's answers are not
// streamed (they have neither).
func charts(pc *config.Probe, pts []PlotPoint, sc *chartScratch) []sparkView {
	sc.pts = pts
	if !pc.Streaming() {
		return []sparkView{sparkline(metricEndToEnd, pts, 0, sc)}
	}
	var ttft, tpot time.Duration
	if pc.SLO != nil {
		ttft, tpot = time.Duration(pc.SLO.TTFT), time.Duration(pc.SLO.TPOT)
	}
	return []sparkView{sparkline(metricTTFT, pts, ttft, sc), sparkline(metricTPOT, pts, tpot, sc)}
}

// scheduleOf describes a probe's schedule in a few words.
func scheduleOf(pc *config.Probe) string { return pc.Schedule.Summary() }

func serverViewOf(s *collector.ServerSnapshot, cfg *config.ServerMetrics, now time.Time) *serverView {
	v := &serverView{URL: display.Endpoint(cfg.URL), Kind: cfg.Kind, State: "not scraped yet"}
	if s == nil || s.CollectedAt.IsZero() {
		return v
	}
	v.URL, v.Kind, v.Up = s.URL, s.Kind, s.Up
	v.When = s.CollectedAt.UTC().Format(clockLayout) + " (" + ago(now, s.CollectedAt) + ")"
	if !s.Up {
		v.State, v.Err = "down", s.Err
		return v
	}
	v.State = "up"
	for _, m := range s.Models {
		name := m.Model
		if name == "" {
			name = "(all)"
		}
		v.Models = append(v.Models, serverModelView{
			Model:   name,
			Waiting: numOrDash(m.Waiting, m.HasWaiting),
			Running: numOrDash(m.Running, m.HasRunning),
			KVCache: pctOrDash(m.KVCacheUsage, m.HasKVCache),
			Batch:   numOrDash(m.BatchSize, m.HasBatch),
		})
	}
	return v
}

func gpuViewOf(g *collector.GPUSnapshot, now time.Time) *gpuView {
	enabled := g.Enabled
	if enabled == "" {
		enabled = "auto"
	}
	switch {
	case !g.Loaded && g.ApplyErr != "":
		return &gpuView{Message: "No GPU metrics (gpus.enabled is " + enabled + "): " + g.ApplyErr}
	case !g.Loaded && enabled == "false":
		return &gpuView{Message: "No GPU metrics (gpus.enabled is false)."}
	case !g.Loaded:
		return &gpuView{Message: "No GPU metrics (gpus.enabled is " + enabled + "; NVML is not available on this host)."}
	case g.CollectedAt.IsZero():
		return &gpuView{Message: "NVML is loaded; no collection has finished yet."}
	}
	v := &gpuView{When: g.CollectedAt.UTC().Format(clockLayout) + " (" + ago(now, g.CollectedAt) + ")", OK: g.OK}
	if len(g.Devices) == 0 {
		v.Message = "NVML is loaded but reports no GPUs (or none selected by gpus.devices)."
		return v
	}
	for _, d := range g.Devices {
		dv := gpuDeviceView{
			Index:       strconv.Itoa(d.Index),
			Name:        d.Name,
			UUID:        d.UUID,
			Utilization: pctOrDash(d.Utilization, d.HasUtilization),
			Temperature: "–",
			Memory:      "–",
			Power:       "–",
		}
		if d.HasMemory {
			dv.Memory = fmt.Sprintf("%.1f / %.1f GiB", d.MemoryUsed/(1<<30), d.MemoryTotal/(1<<30))
		}
		if d.HasTemperature {
			dv.Temperature = fmt.Sprintf("%.0f °C", d.Temperature)
		}
		switch {
		case d.HasPower && d.HasPowerLim:
			dv.Power = fmt.Sprintf("%.0f / %.0f W", d.Power, d.PowerLimit)
		case d.HasPower:
			dv.Power = fmt.Sprintf("%.0f W", d.Power)
		}
		v.Devices = append(v.Devices, dv)
	}
	return v
}

type probeView struct {
	page
	Target, Probe, Protocol, Endpoint, Model string
	Schedule                                 string
	HistoryN                                 int
	Known                                    bool
	Summary                                  probeRow
	Results                                  []resultRow
	// Waterfall is the phases of the chosen result (?result=<request
	// id>), the newest by default; nil without results. Gone is true when
	// the result asked for is no longer kept (the newest is shown).
	Waterfall *waterfallView
	Gone      bool
}

type resultRow struct {
	// Time is short; Stamp the full timestamp.
	Time, Stamp, Ago, Outcome, RequestID, Status string
	OK                                           bool
	DNS, Connect, TLS, Write, FirstByte          string
	Connection                                   string
	TTFT, TPOT, ITLP50, ITLMax, EndToEnd         string
	Input, Output, Finish                        string
	Err                                          string
	Answer                                       *AnswerCheck
	Log                                          []logRow
	// Open shows the newest failure's debug log unfolded.
	Open bool
	// Selected marks the result the waterfall shows.
	Selected bool
}

type logRow struct {
	Time, Msg string
}

// probeView builds a probe's page, the waterfall showing the result with
// request id chosen (the newest when ""); false when the running
// configuration has no such probe.
func (h *Handler) probeView(cfg *config.Config, target, probeName, chosen string) (probeView, bool) {
	if cfg == nil {
		return probeView{}, false
	}
	var t *config.Target
	var pc *config.Probe
	for _, ct := range cfg.Targets {
		if ct.Name != target {
			continue
		}
		for _, cp := range ct.Probes {
			if cp.Name == probeName {
				t, pc = ct, cp
			}
		}
	}
	if pc == nil {
		return probeView{}, false
	}
	now := h.opts.Now()
	v := probeView{
		page:     h.page(target + " / " + probeName + " — llm-prober"),
		Target:   target,
		Probe:    probeName,
		Protocol: t.Protocol,
		Endpoint: display.Endpoint(t.Endpoint()),
		Model:    t.Model,
		Schedule: scheduleOf(pc),
		HistoryN: h.opts.History.PerProbe(),
		Summary:  h.probeRow(t, pc, now, new(chartScratch)),
	}
	recs, ok := h.opts.History.Recent(target, probeName)
	v.Known = ok
	v.Results = make([]resultRow, 0, len(recs))
	opened := false
	for i := range recs {
		row := resultRowOf(&recs[i], now)
		if !row.OK && !opened {
			row.Open, opened = true, true
		}
		v.Results = append(v.Results, row)
	}
	if len(recs) > 0 {
		sel := 0
		if chosen != "" {
			sel, v.Gone = 0, true
			for i := range recs {
				if recs[i].RequestID == chosen {
					sel, v.Gone = i, false
					break
				}
			}
		}
		v.Results[sel].Selected = true
		v.Waterfall = waterfall(&recs[sel], now)
	}
	return v, true
}

func resultRowOf(r *Record, now time.Time) resultRow {
	p := r.Phases
	row := resultRow{
		Time:      shortTime(r.Start, now),
		Stamp:     r.Start.UTC().Format(timeLayout),
		Ago:       ago(now, r.Start),
		Outcome:   string(r.Outcome),
		OK:        r.OK(),
		RequestID: r.RequestID,
		Status:    "–",
		DNS:       msOrDash(p.DNS, p.HasDNS),
		Connect:   msOrDash(p.Connect, p.HasConnect),
		TLS:       msOrDash(p.TLS, p.HasTLS),
		Write:     msOrDash(p.Write, p.HasWrite),
		FirstByte: msOrDash(p.FirstByte, p.HasFirstByte),
		TTFT:      msOrDash(r.TTFT, r.TTFT > 0),
		TPOT:      msOrDash(r.TPOT, r.HasTPOT),
		ITLP50:    msOrDash(r.ITLP50, r.ITLCount > 0),
		ITLMax:    msOrDash(r.ITLMax, r.ITLCount > 0),
		EndToEnd:  msOrDash(r.EndToEnd, r.EndToEnd > 0),
		Input:     tokens(r.InputTokens, r.InputTokensSource),
		Output:    tokens(r.OutputTokens, r.OutputTokensSource),
		Finish:    r.FinishReason,
		Err:       r.Err,
	}
	row.Answer = r.Answer
	if r.StatusCode != 0 {
		row.Status = strconv.Itoa(r.StatusCode)
	}
	if p.ConnectionReused {
		row.Connection = "reused"
	} else if p.HasConnect || p.HasWrite {
		row.Connection = "new"
	}
	if r.Retry != "" {
		// The pooled connection failed first; the measured attempt is the
		// one on a new connection.
		row.Connection = "new (retried: " + r.Retry + ")"
	}
	if !r.Streamed && r.OK() {
		row.TTFT = "not streamed"
	}
	if row.Finish == "" {
		row.Finish = "–"
	}
	for _, l := range r.Log {
		row.Log = append(row.Log, logRow{Time: l.At.UTC().Format(timeLayout), Msg: l.Msg})
	}
	return row
}

// shortTime is the time of day, with the date only when it is not today
// (UTC): a page of results usually spans minutes.
func shortTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05.000")
	}
	return t.Format("01-02 15:04:05.000")
}

const (
	timeLayout  = "2006-01-02 15:04:05.000Z07:00"
	clockLayout = "15:04:05Z07:00"
)

// dur prints a duration in milliseconds with precision that suits its size.
func dur(d time.Duration) string {
	if d < 10*time.Second {
		return stats.Millis(d) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

func durOrDash(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	return dur(d)
}

// msOrDash is milliseconds without the unit, for tables that name it in
// the header.
func msOrDash(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	return stats.Millis(d)
}

func numOrDash(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func pctOrDash(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
}

func tokens(n int, src probe.TokenSource) string {
	if src == probe.TokenSourceNone {
		return "–"
	}
	return strconv.Itoa(n) + " (" + string(src) + ")"
}

// ago is a short relative time ("4s ago").
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h ago"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
	}
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return strings.TrimSpace(s[:j]) + "…"
		}
		i++
	}
	return s
}
