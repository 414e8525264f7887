package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/internal/alertmodel"
	"github.com/llm-prober/llm-prober/schedule"
)

// Summary describes the schedule in a few words, for the status page and
// check-config: "every 15s", "rate 30/m (poisson)", "burst 8 at * * * * *".
func (s *Schedule) Summary() string {
	var out string
	switch {
	case len(s.Stages) > 0:
		out = strconv.Itoa(len(s.Stages)) + " stages"
	case s.Every > 0:
		out = "every " + s.Every.String()
	case !s.Rate.IsZero():
		out = "rate " + s.Rate.String()
		if s.Distribution == "poisson" {
			out += " (poisson)"
		}
	case s.Concurrency > 0:
		out = "concurrency " + strconv.Itoa(s.Concurrency)
	case s.Burst > 0 && !s.Cron.IsZero():
		out = "burst " + strconv.Itoa(s.Burst) + " at " + s.Cron.String()
	case s.Burst > 0:
		out = "burst " + strconv.Itoa(s.Burst) + " every " + s.Period.String()
	}
	if len(s.Active) > 0 {
		out += ", active " + strings.Join(s.Active.Strings(), " | ")
	}
	return out
}

// AlertModel is what the alert model needs of the probe: its mean
// interval (0 for closed loops), burst size, timeout and objective.
func (p *Probe) AlertModel() alertmodel.Probe {
	m := alertmodel.Probe{Timeout: time.Duration(p.Timeout)}
	if iv, ok := p.Schedule.MeanInterval(); ok {
		m.Interval = iv
		m.Burst = p.Schedule.Burst
	}
	if p.SLO != nil {
		m.Objective = p.SLO.Objective
	}
	return m
}

// AlertVerdict is what the shipped alert rules can do for the probe
// (alertmodel.Predict), for check-config and the status page.
func (p *Probe) AlertVerdict() alertmodel.Verdict {
	return alertmodel.Predict(p.AlertModel())
}

// MeanInterval is the schedule's planned mean interval between arrivals,
// what the alert model (internal/alertmodel) predicts from: every (jitter
// delays each send but keeps the mean); 1/rate for rates of any
// distribution; period/N for a burst of N every period; the mean gap
// between cron times /N for a burst at cron times; for stages, their total
// duration over the arrivals they plan (each stage weighted by its
// duration). It is false for closed loops (concurrency, or a stage of
// it), whose rate is the server's speed, and for schedules that plan
// nothing. Active windows are not counted: it is the mean while active.
func (s *Schedule) MeanInterval() (time.Duration, bool) {
	switch {
	case s.Concurrency > 0:
		return 0, false
	case s.Every > 0:
		return time.Duration(s.Every), true
	case s.Rate.PerSecond() > 0:
		return perSecond(s.Rate.PerSecond()), true
	case s.Burst > 0 && s.Period > 0:
		return time.Duration(s.Period) / time.Duration(s.Burst), true
	case s.Burst > 0 && s.Cron.Schedule() != nil:
		gap, ok := cronMeanGap(s.Cron.Schedule())
		return gap / time.Duration(s.Burst), ok
	case len(s.Stages) > 0:
		var total time.Duration
		var arrivals float64
		for _, st := range s.Stages {
			if st == nil || st.Concurrency > 0 || st.Rate.PerSecond() <= 0 {
				return 0, false
			}
			total += time.Duration(st.Duration)
			arrivals += st.Rate.PerSecond() * time.Duration(st.Duration).Seconds()
		}
		if total <= 0 || arrivals <= 0 {
			return 0, false
		}
		return time.Duration(float64(total) / arrivals), true
	}
	return 0, false
}

// perSecond is the interval of a rate in arrivals per second.
func perSecond(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}

// cronMeanYears is the span cronMeanGap averages over: four years from
// 2024, leap day and every weekday pattern included.
const cronMeanYears = 4

// cronMeanGap is the mean gap between c's times over four years (in UTC):
// the matching days times the matching minutes of a day. False when c
// never matches.
func cronMeanGap(c *schedule.Cron) (time.Duration, bool) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(cronMeanYears, 0, 0)
	first := c.Next(start.Add(-time.Nanosecond))
	if first.IsZero() || !first.Before(end) {
		return 0, false
	}
	// Minutes and hours do not depend on the day: count a matching day's
	// minutes once, then the days on which the first one matches.
	day := time.Date(first.Year(), first.Month(), first.Day(), 0, 0, 0, 0, time.UTC)
	perDay := 0
	for m := range 24 * 60 {
		if c.Matches(day.Add(time.Duration(m) * time.Minute)) {
			perDay++
		}
	}
	offset := first.Sub(day)
	days := 0
	for d := start; d.Before(end); d = d.AddDate(0, 0, 1) {
		if c.Matches(d.Add(offset)) {
			days++
		}
	}
	return end.Sub(start) / time.Duration(days*perDay), true
}
