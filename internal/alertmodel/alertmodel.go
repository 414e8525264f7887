// Package alertmodel predicts what the shipped alert rules
// (alerts/llm-prober-rules.yml) can do for one probe, from its planned mean
// interval between arrivals, its timeout and its SLO objective: how long a
// hard outage takes to page, whether a 2× SLO regression pages within
// 10 minutes, how many requests per hour that would need. check-config and
// the status page print it; the alert backtest (mixin/backtest) compares
// its predictions with the times it measures, so the rule parameters live
// here, in Rules, and must follow the rules file.
//
// Every time is a worst case in steady operation: the incident starts just
// after a run, the evidence arrives as the schedule plans it, and the
// alert waits for the next scrape and the next rule evaluation. Random
// schedules (poisson, gamma) are taken at their mean.
package alertmodel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rules are the parameters of the shipped rules the model depends on, and
// the targets issue 26 sets for them.
type Rules struct {
	// ScrapeInterval and EvalInterval are assumptions about the
	// deployment: Prometheus scrapes the prober every ScrapeInterval and
	// evaluates the rule groups every EvalInterval (the groups set
	// interval: 30s). An alert is seen at most one of each after its
	// condition holds.
	ScrapeInterval time.Duration
	EvalInterval   time.Duration

	// LLMProbeFailing pages when llm_probe_consecutive_failures >=
	// FailingMinCount and the streak (llm_probe_failing_since_timestamp_seconds)
	// is at least FailingMinAge old.
	FailingMinCount int
	FailingMinAge   time.Duration

	// FastBurn pages (LLMProbeSLOErrorBudgetBurnFast); SlowBurn tickets
	// (LLMProbeSLOErrorBudgetBurnSlow). See BurnRule.
	FastBurn BurnRule
	SlowBurn BurnRule
	// A burn-rate alert also needs evidence: its long window must hold at
	// least ceil(EvidenceBase + e + EvidenceSigmas·√e) bad requests, e
	// being the bad requests the objective allows in the window
	// (requests in the window × (1 − objective)). Healthy noise at the
	// objective rarely reaches it; a few bad requests of a slow probe
	// never page on their own.
	EvidenceBase   float64
	EvidenceSigmas float64

	// LLMProbeNotRunning tickets when the probe's last run is older than
	// NotRunningIntervals planned intervals, and at least NotRunningMin.
	NotRunningIntervals float64
	NotRunningMin       time.Duration

	// The targets (issue 26): a hard outage pages within
	// max(HardOutageFloor, HardOutageIntervals × interval + HardOutageSlack);
	// a 2× regression of the SLO pages within RegressionPageWithin for
	// probes at one per RegressionFastProbe or faster, and alerts (page
	// or ticket) within RegressionTicketWithin for slower ones.
	HardOutageFloor        time.Duration
	HardOutageIntervals    float64
	HardOutageSlack        time.Duration
	RegressionFastProbe    time.Duration
	RegressionPageWithin   time.Duration
	RegressionTicketWithin time.Duration
}

// BurnRule is one burn-rate alert: it fires when the ratio of bad requests
// over Window exceeds min(Factor × (1 − objective), MaxRatio) and the
// window holds the evidence Rules asks for.
type BurnRule struct {
	// Name and Severity name the alert in messages: "fast burn", "page".
	Name, Severity string
	Factor         float64
	Window         time.Duration
	// MaxRatio caps the threshold so that low objectives (where Factor ×
	// budget would reach 1) can still fire; 0 means no cap.
	MaxRatio float64
}

// DefaultRules are the rules as shipped.
func DefaultRules() Rules {
	return Rules{
		ScrapeInterval:  15 * time.Second,
		EvalInterval:    30 * time.Second,
		FailingMinCount: 2,
		FailingMinAge:   90 * time.Second,
		// 14.4× over 1 h spends 2% of a 30-day budget: the SRE
		// workbook's page.
		FastBurn: BurnRule{Name: "fast burn", Severity: "page", Factor: 14.4, Window: time.Hour, MaxRatio: 0.125},
		// 3× over 1 d spends 10% of a 30-day budget: the workbook's
		// ticket, capped like the page.
		SlowBurn:               BurnRule{Name: "slow burn", Severity: "ticket", Factor: 3, Window: 24 * time.Hour, MaxRatio: 0.125},
		EvidenceBase:           2,
		EvidenceSigmas:         3,
		NotRunningIntervals:    3,
		NotRunningMin:          time.Minute,
		HardOutageFloor:        3 * time.Minute,
		HardOutageIntervals:    2,
		HardOutageSlack:        2 * time.Minute,
		RegressionFastProbe:    30 * time.Second,
		RegressionPageWithin:   10 * time.Minute,
		RegressionTicketWithin: time.Hour,
	}
}

// Detection is the longest a condition that holds waits to be seen: one
// scrape and one rule evaluation.
func (r Rules) Detection() time.Duration { return r.ScrapeInterval + r.EvalInterval }

// Assumptions says what the predictions assume, for output.
func (r Rules) Assumptions() string {
	return fmt.Sprintf("assuming Prometheus scrapes the prober every %s and evaluates the rules every %s; times are worst cases at the planned mean rate",
		Approx(r.ScrapeInterval), Approx(r.EvalInterval))
}

// Probe is what the model needs of a probe.
type Probe struct {
	// Interval is the planned mean interval between arrivals; 0 when the
	// schedule plans none (a closed loop, whose rate is the server's).
	Interval time.Duration
	// Burst is how many arrivals come together at each run (burst:
	// schedules); 0 or 1 for one at a time.
	Burst int
	// Timeout is the probe's request timeout: how long a hung server
	// holds the first request before it counts as failed.
	Timeout time.Duration
	// Objective is the SLO objective, e.g. 0.99; 0 when there is none.
	Objective float64
}

// Verdict is what the rules can do for one probe.
type Verdict struct {
	Probe Probe
	Rules Rules
	// Known is false when the probe has no planned rate; then only
	// Warnings and the rendering mean anything.
	Known bool
	// RunGap is the mean time between runs (a burst is one run);
	// RequestsPerHour the mean arrivals per hour.
	RunGap          time.Duration
	RequestsPerHour float64

	// HardOutage is how long after a server goes hard down (every request
	// fails at once) LLMProbeFailing pages; HungOutage the same for a
	// server that accepts requests and never answers (the first failure
	// waits for the timeout). HardOutageTarget is the target.
	HardOutage, HungOutage, HardOutageTarget time.Duration
	// NotRunning is how long after the probe stops running
	// LLMProbeNotRunning tickets.
	NotRunning time.Duration

	// HasSLO is true when the probe has an objective; Fast, Slow and
	// Regression are zero otherwise.
	HasSLO     bool
	Fast, Slow Burn
	Regression Regression

	// Warnings are the targets the probe misses, each a sentence.
	Warnings []string
}

// Burn is one burn-rate alert's prediction for a total SLO outage (every
// request bad, e.g. a 2× TTFT regression).
type Burn struct {
	Rule BurnRule
	// Threshold is the bad ratio over the window that fires it.
	Threshold float64
	// RequestsPerWindow is the probe's mean arrivals in the window;
	// Evidence the bad requests it must hold.
	RequestsPerWindow float64
	Evidence          int
	// Possible is false when the window can never hold the evidence (or
	// the threshold is above 1): the alert never fires for this probe.
	Possible bool
	// After is how long after the regression starts the alert fires;
	// 0 when !Possible.
	After time.Duration
}

// Regression is what a sustained 2× SLO regression (every request bad)
// brings, against the target that applies to the probe's rate.
type Regression struct {
	// MustPage is true for probes at one per RegressionFastProbe or
	// faster: they should page within RegressionPageWithin; the others
	// should alert (page or ticket) within RegressionTicketWithin.
	MustPage bool
	Within   time.Duration
	// Pages, PageAfter: the fast-burn page. Alerts, AlertAfter: the first
	// alert of either severity.
	Pages, Alerts         bool
	PageAfter, AlertAfter time.Duration
	// Meets reports whether the target is met.
	Meets bool
	// PagePerHour is the requests per hour from which on a page comes
	// within RegressionPageWithin (0: no rate does); AlertPerHour the
	// same for an alert within RegressionTicketWithin.
	PagePerHour, AlertPerHour int
}

// Predict is DefaultRules().Predict(p).
func Predict(p Probe) Verdict { return DefaultRules().Predict(p) }

// Predict says what the rules can do for p.
func (r Rules) Predict(p Probe) Verdict {
	if p.Burst < 1 {
		p.Burst = 1
	}
	if !(p.Objective > 0 && p.Objective < 1) {
		p.Objective = 0
	}
	v := Verdict{Probe: p, Rules: r, HasSLO: p.Objective > 0}
	if p.Interval <= 0 {
		return v
	}
	v.Known = true
	v.RunGap = p.Interval * time.Duration(p.Burst)
	v.RequestsPerHour = float64(time.Hour) / float64(p.Interval)
	detect := r.Detection()

	// The first failing run comes at most a run gap after the outage
	// starts; FailingMinCount failures need ceil(count / burst) runs, and
	// the streak must be FailingMinAge old.
	runs := (max(r.FailingMinCount, 1) + p.Burst - 1) / p.Burst
	v.HardOutage = v.RunGap + max(time.Duration(runs-1)*v.RunGap, r.FailingMinAge) + detect
	v.HungOutage = v.HardOutage + p.Timeout
	v.HardOutageTarget = max(r.HardOutageFloor, time.Duration(r.HardOutageIntervals*float64(v.RunGap))+r.HardOutageSlack)
	v.NotRunning = max(time.Duration(r.NotRunningIntervals*float64(v.RunGap)), r.NotRunningMin) + detect
	if v.HardOutage > v.HardOutageTarget {
		v.Warnings = append(v.Warnings, fmt.Sprintf("a hard outage pages after ~%s, later than the ~%s the alerts aim for (the longer of %s and %g runs + %s); run the probe more often",
			Approx(v.HardOutage), Approx(v.HardOutageTarget), Approx(r.HardOutageFloor), r.HardOutageIntervals, Approx(r.HardOutageSlack)))
	}

	if !v.HasSLO {
		return v
	}
	v.Fast = r.burn(r.FastBurn, p)
	v.Slow = r.burn(r.SlowBurn, p)
	g := Regression{MustPage: p.Interval <= r.RegressionFastProbe, Pages: v.Fast.Possible, PageAfter: v.Fast.After}
	for _, b := range []Burn{v.Fast, v.Slow} {
		if b.Possible && (!g.Alerts || b.After < g.AlertAfter) {
			g.Alerts, g.AlertAfter = true, b.After
		}
	}
	g.PagePerHour = r.neededPerHour(p.Objective, p.Burst, r.RegressionPageWithin, r.FastBurn)
	g.AlertPerHour = r.neededPerHour(p.Objective, p.Burst, r.RegressionTicketWithin, r.FastBurn, r.SlowBurn)
	if g.MustPage {
		g.Within = r.RegressionPageWithin
		g.Meets = g.Pages && g.PageAfter <= g.Within
	} else {
		g.Within = r.RegressionTicketWithin
		g.Meets = g.Alerts && g.AlertAfter <= g.Within
	}
	v.Regression = g
	if !g.Meets {
		v.Warnings = append(v.Warnings, v.regressionWarning())
	}
	return v
}

// burn predicts rule b for a total SLO outage of p.
func (r Rules) burn(b BurnRule, p Probe) Burn {
	out := Burn{Rule: b, Threshold: b.threshold(p.Objective)}
	out.RequestsPerWindow = float64(b.Window) / float64(p.Interval)
	out.Evidence = r.evidence(out.RequestsPerWindow, p.Objective)
	out.Possible = out.Threshold <= 1 && float64(out.Evidence) <= out.RequestsPerWindow
	if !out.Possible {
		return out
	}
	runs := (out.Evidence + p.Burst - 1) / p.Burst
	evidenceAt := time.Duration(runs) * p.Interval * time.Duration(p.Burst)
	ratioAt := time.Duration(out.Threshold * float64(b.Window))
	out.After = max(ratioAt, evidenceAt) + r.Detection()
	return out
}

func (b BurnRule) threshold(objective float64) float64 {
	t := b.Factor * (1 - objective)
	if b.MaxRatio > 0 {
		t = min(t, b.MaxRatio)
	}
	return t
}

// evidenceBound is EvidenceBase + e + EvidenceSigmas·√e for n requests in
// the window, before rounding up.
func (r Rules) evidenceBound(n, objective float64) float64 {
	e := n * (1 - objective)
	return r.EvidenceBase + e + r.EvidenceSigmas*math.Sqrt(e)
}

func (r Rules) evidence(n, objective float64) int {
	return int(math.Ceil(r.evidenceBound(n, objective)))
}

// maxPerHour bounds the search for a rate: the most a schedule may send
// (10000/s).
const maxPerHour = 10000 * 3600

// neededPerHour is the fewest requests per hour (sent in bursts of burst,
// runs evenly spaced) from which on, at every higher rate, one of rules
// fires within d of a total SLO outage; 0 when no rate up to maxPerHour
// does.
func (r Rules) neededPerHour(objective float64, burst int, d time.Duration, rules ...BurnRule) int {
	ok := func(h int, loose bool) bool {
		interval := float64(time.Hour) / float64(h)
		for _, b := range rules {
			t := b.threshold(objective)
			n := float64(b.Window) / interval
			bound := r.evidenceBound(n, objective)
			ev := math.Ceil(bound)
			runs := math.Ceil(ev / float64(burst))
			if loose {
				// Above the exact values, and falling steadily as
				// the rate rises.
				ev = bound + 1
				runs = ev/float64(burst) + 1
			}
			after := max(t*float64(b.Window), runs*float64(burst)*interval) + float64(r.Detection())
			if t <= 1 && ev <= n && after <= float64(d) {
				return true
			}
		}
		return false
	}
	// The first rate the loose bound allows is found by bisection, and
	// every rate above it is allowed too. Rates just below it may be
	// allowed by the exact evidence: step down through them.
	if !ok(maxPerHour, true) {
		return 0
	}
	lo, hi := 0, maxPerHour // ok(hi, true); ok(lo, true) unknown or false
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid, true) {
			hi = mid
		} else {
			lo = mid
		}
	}
	for hi > 1 && ok(hi-1, false) {
		hi--
	}
	return hi
}

// regressionWarning says which regression target the probe misses.
func (v Verdict) regressionWarning() string {
	g := v.Regression
	obj := Percent(v.Probe.Objective)
	var b strings.Builder
	if g.MustPage {
		fmt.Fprintf(&b, "a 2× regression of the %s objective ", obj)
		if g.Pages {
			fmt.Fprintf(&b, "pages after ~%s, not within %s", Approx(g.PageAfter), Approx(g.Within))
		} else {
			fmt.Fprintf(&b, "never pages (its %s window never holds enough bad requests)", Approx(v.Rules.FastBurn.Window))
		}
		v.needs(&b, g.PagePerHour, "a page within "+Approx(g.Within))
		return b.String()
	}
	fmt.Fprintf(&b, "a 2× regression of the %s objective does not alert within %s", obj, Approx(g.Within))
	if g.Alerts {
		fmt.Fprintf(&b, " (first alert after ~%s)", Approx(g.AlertAfter))
	} else {
		b.WriteString(" (it never alerts)")
	}
	v.needs(&b, g.AlertPerHour, "an alert within "+Approx(g.Within))
	return b.String()
}

// needs appends the rate goal needs: "; a page within 10m needs ≥ 20
// requests/hour (has 12)", or that no rate gets it.
func (v Verdict) needs(b *strings.Builder, perHour int, goal string) {
	if perHour == 0 {
		fmt.Fprintf(b, "; no probe rate gets %s at this objective", goal)
		return
	}
	fmt.Fprintf(b, "; %s needs ≥ %d requests/hour (has %s)", goal, perHour, PerHour(v.RequestsPerHour))
}

// Summary is the verdict in one line, without the probe's name: what a
// hard outage and (with an objective) a 2× regression bring.
func (v Verdict) Summary() string {
	if !v.Known {
		return "no planned rate (a closed loop runs as fast as the server answers), so when its alerts fire cannot be predicted"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "a hard outage pages after ~%s", Approx(v.HardOutage))
	if hung := Approx(v.HungOutage); hung != Approx(v.HardOutage) {
		fmt.Fprintf(&b, " (a hung server ~%s)", hung)
	}
	if !v.HasSLO {
		b.WriteString("; no SLO objective, so no burn-rate alerts")
		return b.String()
	}
	g := v.Regression
	fmt.Fprintf(&b, "; a 2× regression of its %s objective ", Percent(v.Probe.Objective))
	switch {
	case g.Pages:
		fmt.Fprintf(&b, "pages after ~%s", Approx(g.PageAfter))
		if g.Alerts && g.AlertAfter < g.PageAfter {
			fmt.Fprintf(&b, " (tickets after ~%s)", Approx(g.AlertAfter))
		}
	case g.Alerts:
		fmt.Fprintf(&b, "never pages, tickets after ~%s", Approx(g.AlertAfter))
	default:
		b.WriteString("never alerts")
	}
	if !g.Pages || g.PageAfter > v.Rules.RegressionPageWithin {
		within := Approx(v.Rules.RegressionPageWithin)
		if g.PagePerHour == 0 {
			fmt.Fprintf(&b, "; no probe rate pages within %s at this objective", within)
		} else {
			fmt.Fprintf(&b, "; a page within %s needs ≥ %d requests/hour (has %s)", within, g.PagePerHour, PerHour(v.RequestsPerHour))
		}
	}
	return b.String()
}

// Short is the verdict in a few words, for a table cell: "outage pages
// ~11m, 2× SLO ~16m".
func (v Verdict) Short() string {
	if !v.Known {
		return "alert times unknown: no planned rate"
	}
	s := "outage pages ~" + Approx(v.HardOutage)
	if !v.HasSLO {
		return s
	}
	switch g := v.Regression; {
	case g.Pages:
		return s + ", 2× SLO ~" + Approx(g.PageAfter)
	case g.Alerts:
		return s + ", 2× SLO tickets ~" + Approx(g.AlertAfter)
	}
	return s + ", 2× SLO never alerts"
}

// Lines is the verdict in full, a line each: the summary, the stopped
// probe's ticket, the assumptions, then each warning marked WARNING.
func (v Verdict) Lines() []string {
	lines := []string{v.Summary()}
	if v.Known {
		lines = append(lines, fmt.Sprintf("if it stops running, LLMProbeNotRunning tickets after ~%s", Approx(v.NotRunning)))
	}
	lines = append(lines, v.Rules.Assumptions())
	for _, w := range v.Warnings {
		lines = append(lines, "WARNING: "+w)
	}
	return lines
}

// String is Lines joined by newlines.
func (v Verdict) String() string { return strings.Join(v.Lines(), "\n") }

// Approx writes d rounded to what a reader needs: seconds under a minute,
// 5 s under 10 minutes, minutes under two days, then days and hours:
// "45s", "2m15s", "16m", "1h2m", "3d4h".
func Approx(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 10*time.Minute:
		return trimZero(d.Round(5 * time.Second).String())
	case d < 48*time.Hour:
		return trimZero(d.Round(time.Minute).String())
	}
	h := int64(d.Round(time.Hour) / time.Hour)
	if h%24 == 0 {
		return strconv.FormatInt(h/24, 10) + "d"
	}
	return fmt.Sprintf("%dd%dh", h/24, h%24)
}

// trimZero drops the zero seconds and minutes Duration.String writes:
// "16m0s" → "16m", "2h0m0s" → "2h".
func trimZero(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Percent writes an objective as a percentage: 0.999 → "99.9%".
func Percent(objective float64) string {
	return strconv.FormatFloat(math.Round(objective*1e6)/1e4, 'f', -1, 64) + "%"
}

// PerHour writes a rate per hour: whole numbers from 10 on, two
// significant digits below.
func PerHour(h float64) string {
	if h >= 10 {
		return strconv.FormatFloat(math.Round(h), 'f', -1, 64)
	}
	return strconv.FormatFloat(h, 'g', 2, 64)
}
