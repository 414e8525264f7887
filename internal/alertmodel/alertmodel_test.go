package alertmodel

import (
	"math"
	"strings"
	"testing"
	"time"
)

const s = time.Second

// TestPredict checks the model against values worked out by hand from the
// formulas in the comments (scrape 15 s + evaluation 30 s = 45 s detection).
func TestPredict(t *testing.T) {
	slowFailing := DefaultRules()
	slowFailing.FailingMinAge = 10 * time.Minute
	for _, c := range []struct {
		name  string
		rules Rules
		probe Probe
		// hard, hung, target, notRunning: the hard-outage numbers.
		hard, hung, target, notRunning time.Duration
		// fastThreshold, fastEvidence, fastAfter (0: never), slowAfter.
		fastThreshold        float64
		fastEvidence         int
		fastAfter, slowAfter time.Duration
		meets                bool
		pagePerHour          int
		alertPerHour         int
		warnings             int
	}{
		{
			// hard 2+max(2,90)+45; target max(180, 2·2+120); not
			// running max(3·2, 60)+45. Fast: min(14.4·0.01, 0.125)
			// = 0.125 → 450 s; n = 1800, e = 18, evidence
			// ceil(2+18+3·√18 = 32.73) = 33 → 66 s; after 450+45.
			// Slow: 0.03 → 2592 s; n = 43200, e = 432, evidence
			// ceil(2+432+62.35) = 497 → 994 s; after 2592+45.
			// Page within 10m: evidence 5 at 33/h (545 s + 45),
			// 5 at 32/h (562 s + 45 > 600). Alert within 1h:
			// 3 at 4/h (2700 s), 3 at 3/h (3600 s + 45 > 3600).
			name: "every 2s, 99%", rules: DefaultRules(),
			probe: Probe{Interval: 2 * s, Timeout: 30 * s, Objective: 0.99},
			hard:  137 * s, hung: 167 * s, target: 180 * s, notRunning: 105 * s,
			fastThreshold: 0.125, fastEvidence: 33, fastAfter: 495 * s, slowAfter: 2637 * s,
			meets: true, pagePerHour: 33, alertPerHour: 4,
		},
		{
			// hard 30+90+45, hung +60; target max(180, 60+120).
			// Fast: 0.0144 → 51.84 s; n = 120, e = 0.12, evidence
			// ceil(2.12+1.04) = 4 → 120 s; after 120+45. Slow:
			// 0.003 → 259.2 s; n = 2880, e = 2.88, evidence
			// ceil(2+2.88+5.09) = 10 → 300 s; after 300+45.
			name: "every 30s, 99.9%", rules: DefaultRules(),
			probe: Probe{Interval: 30 * s, Timeout: 60 * s, Objective: 0.999},
			hard:  165 * s, hung: 225 * s, target: 180 * s, notRunning: 135 * s,
			fastThreshold: 0.0144, fastEvidence: 4, fastAfter: 165 * s, slowAfter: 345 * s,
			meets: true, pagePerHour: 20, alertPerHour: 4,
		},
		{
			// hard 300+300+45; target 600+120; not running 900+45.
			// Fast: n = 12, e = 0.012, evidence ceil(2.012+0.33) =
			// 3 → 900 s; after 945. Slow: n = 288, e = 0.288,
			// evidence ceil(2.288+1.61) = 4 → 1200 s; after 1245.
			// Slower than one per 30 s: the target is an alert
			// within 1h, met by the page at 945 s. Page within 10m:
			// 3 at 20/h (540 s + 45), 3 at 19/h (568 s + 45).
			name: "every 5m, 99.9%", rules: DefaultRules(),
			probe: Probe{Interval: 300 * s, Timeout: 60 * s, Objective: 0.999},
			hard:  645 * s, hung: 705 * s, target: 720 * s, notRunning: 945 * s,
			fastThreshold: 0.0144, fastEvidence: 3, fastAfter: 945 * s, slowAfter: 1245 * s,
			meets: true, pagePerHour: 20, alertPerHour: 4,
		},
		{
			name: "every 5m, no SLO", rules: DefaultRules(),
			probe: Probe{Interval: 300 * s, Timeout: 60 * s},
			hard:  645 * s, hung: 705 * s, target: 720 * s, notRunning: 945 * s,
		},
		{
			// A burst of 8 every minute: the first failing burst
			// holds both failures; the streak waits its 90 s.
			// hard 60+max(0, 90)+45; target max(180, 120+120); not
			// running max(180, 60)+45.
			name: "burst 8 every 1m", rules: DefaultRules(),
			probe: Probe{Interval: 7500 * time.Millisecond, Burst: 8, Timeout: 30 * s},
			hard:  195 * s, hung: 225 * s, target: 240 * s, notRunning: 225 * s,
		},
		{
			// hard 7200+7200+45; target 14400+120. Fast: n = 0.5
			// cannot hold 3 bad requests: never. Slow: n = 12,
			// e = 0.12, evidence 4 → 28800 s; after 28845: no
			// alert within 1h, a warning.
			name: "every 2h, 99%", rules: DefaultRules(),
			probe: Probe{Interval: 7200 * s, Timeout: 30 * s, Objective: 0.99},
			hard:  14445 * s, hung: 14475 * s, target: 14520 * s, notRunning: 21645 * s,
			fastThreshold: 0.125, fastEvidence: 3, slowAfter: 28845 * s,
			pagePerHour: 33, alertPerHour: 4, warnings: 1,
		},
		{
			// Fast: min(2.88, 0.125) → 450 s; n = 360, e = 72,
			// evidence ceil(2+72+25.46) = 100 → 1000 s; after 1045:
			// no page within 10m, and no rate gets one (the bad
			// share of the evidence tends to 20% > 555/3600). Alert
			// within 1h: evidence 8 at 9/h (3200 s + 45), 8 at 8/h
			// (3600 s + 45). Slow: 0.125 → 10800 s; n = 8640,
			// e = 1728, evidence ceil(2+1728+124.7) = 1855 →
			// 18550 s; after 18595.
			name: "every 10s, 80%", rules: DefaultRules(),
			probe: Probe{Interval: 10 * s, Objective: 0.8},
			hard:  145 * s, hung: 145 * s, target: 180 * s, notRunning: 105 * s,
			fastThreshold: 0.125, fastEvidence: 100, fastAfter: 1045 * s, slowAfter: 18595 * s,
			pagePerHour: 0, alertPerHour: 9, warnings: 1,
		},
		{
			// A rule set whose streak must be 10 minutes old misses
			// the hard-outage target: 10+600+45 > max(180, 140).
			name: "slow LLMProbeFailing", rules: slowFailing,
			probe: Probe{Interval: 10 * s, Timeout: 5 * s},
			hard:  655 * s, hung: 660 * s, target: 180 * s, notRunning: 105 * s,
			warnings: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.rules.Predict(c.probe)
			if !v.Known {
				t.Fatal("not Known")
			}
			for _, d := range []struct {
				what      string
				got, want time.Duration
			}{
				{"HardOutage", v.HardOutage, c.hard},
				{"HungOutage", v.HungOutage, c.hung},
				{"HardOutageTarget", v.HardOutageTarget, c.target},
				{"NotRunning", v.NotRunning, c.notRunning},
				{"Fast.After", v.Fast.After, c.fastAfter},
				{"Slow.After", v.Slow.After, c.slowAfter},
			} {
				if d.got != d.want {
					t.Errorf("%s = %s, want %s", d.what, d.got, d.want)
				}
			}
			if v.HasSLO != (c.probe.Objective > 0) {
				t.Errorf("HasSLO = %v", v.HasSLO)
			}
			if math.Abs(v.Fast.Threshold-c.fastThreshold) > 1e-12 || v.Fast.Evidence != c.fastEvidence {
				t.Errorf("fast threshold %g evidence %d, want %g %d", v.Fast.Threshold, v.Fast.Evidence, c.fastThreshold, c.fastEvidence)
			}
			if v.Fast.Possible != (c.fastAfter > 0) || v.Slow.Possible != (c.slowAfter > 0) {
				t.Errorf("possible: fast %v slow %v", v.Fast.Possible, v.Slow.Possible)
			}
			g := v.Regression
			if g.Meets != c.meets || g.PagePerHour != c.pagePerHour || g.AlertPerHour != c.alertPerHour {
				t.Errorf("regression meets %v, page %d/h, alert %d/h; want %v, %d/h, %d/h", g.Meets, g.PagePerHour, g.AlertPerHour, c.meets, c.pagePerHour, c.alertPerHour)
			}
			if len(v.Warnings) != c.warnings {
				t.Errorf("warnings %q, want %d", v.Warnings, c.warnings)
			}
		})
	}
}

// TestNeededPerHour checks the search against every rate: from the rate
// it returns on, each one meets the target, and the one below does not.
func TestNeededPerHour(t *testing.T) {
	r := DefaultRules()
	for _, obj := range []float64{0.8, 0.9, 0.95, 0.99, 0.999, 0.9999} {
		for _, burst := range []int{1, 4} {
			for _, c := range []struct {
				within time.Duration
				rules  []BurnRule
			}{
				{10 * time.Minute, []BurnRule{r.FastBurn}},
				{time.Hour, []BurnRule{r.FastBurn, r.SlowBurn}},
			} {
				need := r.neededPerHour(obj, burst, c.within, c.rules...)
				meets := func(h int) bool {
					p := Probe{Interval: time.Duration(float64(time.Hour) / float64(h)), Burst: burst, Objective: obj}
					for _, b := range c.rules {
						if x := r.burn(b, p); x.Possible && x.After <= c.within {
							return true
						}
					}
					return false
				}
				const top = 20000
				if need == 0 {
					for h := 1; h <= top; h++ {
						if meets(h) {
							t.Fatalf("objective %g burst %d within %s: no rate, yet %d/h meets", obj, burst, c.within, h)
						}
					}
					continue
				}
				if need > 1 && meets(need-1) {
					t.Errorf("objective %g burst %d within %s: need %d/h, yet %d/h meets", obj, burst, c.within, need, need-1)
				}
				for h := need; h <= top; h++ {
					if !meets(h) {
						t.Fatalf("objective %g burst %d within %s: need %d/h, yet %d/h does not meet", obj, burst, c.within, need, h)
					}
				}
			}
		}
	}
}

func TestSummaryAndLines(t *testing.T) {
	v := Predict(Probe{Interval: 5 * time.Minute, Timeout: time.Minute, Objective: 0.999})
	want := "a hard outage pages after ~11m (a hung server ~12m); a 2× regression of its 99.9% objective pages after ~16m; a page within 10m needs ≥ 20 requests/hour (has 12)"
	if got := v.Summary(); got != want {
		t.Errorf("Summary:\n got %s\nwant %s", got, want)
	}
	lines := v.Lines()
	if len(lines) != 3 || !strings.Contains(lines[1], "LLMProbeNotRunning tickets after ~16m") || !strings.Contains(lines[2], "every 15s") || !strings.Contains(lines[2], "every 30s") {
		t.Errorf("Lines: %q", lines)
	}

	v = Predict(Probe{Interval: 2 * time.Hour, Objective: 0.99})
	want = "a hard outage pages after ~4h1m; a 2× regression of its 99% objective never pages, tickets after ~8h1m; a page within 10m needs ≥ 33 requests/hour (has 0.5)"
	if got := v.Summary(); got != want {
		t.Errorf("Summary:\n got %s\nwant %s", got, want)
	}
	wantWarning := "WARNING: a 2× regression of the 99% objective does not alert within 1h (first alert after ~8h1m); an alert within 1h needs ≥ 4 requests/hour (has 0.5)"
	if got := v.String(); !strings.HasSuffix(got, "\n"+wantWarning) {
		t.Errorf("String:\n%s\nlacks %s", got, wantWarning)
	}

	v = Predict(Probe{Interval: 10 * time.Second, Objective: 0.8})
	wantWarning = "a 2× regression of the 80% objective pages after ~17m, not within 10m; no probe rate gets a page within 10m at this objective"
	if len(v.Warnings) != 1 || v.Warnings[0] != wantWarning {
		t.Errorf("Warnings %q, want %q", v.Warnings, wantWarning)
	}

	for p, want := range map[Probe]string{
		{Interval: 5 * time.Minute, Objective: 0.999}: "outage pages ~11m, 2× SLO ~16m",
		{Interval: 2 * time.Hour, Objective: 0.99}:    "outage pages ~4h1m, 2× SLO tickets ~8h1m",
		{Interval: 5 * time.Second}:                   "outage pages ~2m20s",
		{}:                                            "alert times unknown: no planned rate",
	} {
		if got := Predict(p).Short(); got != want {
			t.Errorf("Short of %+v = %q, want %q", p, got, want)
		}
	}

	v = Predict(Probe{})
	if v.Known || !strings.Contains(v.Summary(), "closed loop") || len(v.Warnings) != 0 {
		t.Errorf("closed loop: %+v %q", v, v.Summary())
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                             "0s",
		45 * s:                        "45s",
		137 * s:                       "2m15s",
		120 * s:                       "2m",
		945 * s:                       "16m",
		3735 * s:                      "1h2m",
		2 * time.Hour:                 "2h",
		47*time.Hour + 59*time.Minute: "47h59m",
		50 * time.Hour:                "2d2h",
		72 * time.Hour:                "3d",
	} {
		if got := Approx(d); got != want {
			t.Errorf("Approx(%s) = %q, want %q", d, got, want)
		}
	}
	for obj, want := range map[float64]string{0.99: "99%", 0.999: "99.9%", 0.9995: "99.95%", 0.95: "95%", 0.99999: "99.999%"} {
		if got := Percent(obj); got != want {
			t.Errorf("Percent(%g) = %q, want %q", obj, got, want)
		}
	}
	for h, want := range map[float64]string{1800: "1800", 514.2857: "514", 12: "12", 0.5: "0.5", 7.2: "7.2"} {
		if got := PerHour(h); got != want {
			t.Errorf("PerHour(%g) = %q, want %q", h, got, want)
		}
	}
}
