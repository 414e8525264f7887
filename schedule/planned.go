package schedule

import "time"

// randomGapQuantile is the factor by which the longest planned gap of
// random (poisson, gamma) arrivals exceeds their mean gap: an exponential
// gap exceeds mean × ln(10⁴) with probability 10⁻⁴, so one gap in ten
// thousand is longer. Gamma gaps get the same factor, so that all random
// spacings of a rate read alike; burstier shapes exceed it more often.
const randomGapQuantile = 9.210340371976184 // ln(10⁴)

// cronScan is how far ahead of now the gaps between cron times are
// looked at. Eight days include every weekday and weekend of a weekly
// pattern; a gap that starts inside the scan is followed to its end,
// however far (a monthly or yearly expression). Each step advances at
// least a minute, so the scan takes at most 11,520 steps.
const cronScan = 8 * 24 * time.Hour

// PlannedInterval is the longest gap the schedule plans between two
// arrivals in normal operation, so that an arrival missing for longer
// means the probe is not running as planned:
//
//   - every: the interval plus its jitter;
//   - rate with constant spacing: 1/rate;
//   - rate with poisson or gamma spacing: the mean gap × ln(10⁴), which
//     a Poisson gap exceeds with probability 10⁻⁴;
//   - burst: its period, or with cron the longest gap between consecutive
//     cron times from now over about eight days;
//   - stages: the longest of their gaps.
//
// ok is false when the schedule plans no steady gap: a closed loop
// (concurrency, in any stage) sends when its previous request ends,
// active windows pause the schedule for as long as they are closed, and a
// trace replay ends. Cron gaps are measured in the local time zone, as the
// runner fires them.
func (s Spec) PlannedInterval() (time.Duration, bool) {
	return s.plannedInterval(time.Now())
}

// plannedInterval is PlannedInterval with cron gaps measured from now.
func (s Spec) plannedInterval(now time.Time) (time.Duration, bool) {
	if len(s.Active) > 0 {
		return 0, false
	}
	if len(s.Stages) == 0 {
		return s.mode().plannedGap(now)
	}
	var longest time.Duration
	for _, st := range s.Stages {
		gap, ok := s.stageMode(st).plannedGap(now)
		if !ok {
			return 0, false
		}
		longest = max(longest, gap)
	}
	return longest, longest > 0
}

// plannedGap is the longest gap m plans between arrivals; false for a
// closed loop, a trace, or a mode that sends nothing.
func (m mode) plannedGap(now time.Time) (time.Duration, bool) {
	var gap time.Duration
	switch {
	case m.concurrency > 0, len(m.trace) > 0:
		return 0, false
	case m.burst > 0 && m.cron != nil:
		gap = m.cron.longestGap(now)
	case m.burst > 0:
		gap = m.period
	case m.rate > 0 && (m.poisson || m.burstiness > 0):
		gap = time.Duration(float64(time.Second) / m.rate * randomGapQuantile)
	case m.rate > 0:
		gap = time.Duration(float64(time.Second) / m.rate)
	case m.every > 0:
		gap = m.every + m.jitter
	}
	return gap, gap > 0
}

// longestGap is the longest time between consecutive times of c from now
// over cronScan, each gap followed to its end; zero when c matches at most
// once (an impossible date matches never).
func (c *Cron) longestGap(now time.Time) time.Duration {
	t := c.Next(now)
	if t.IsZero() {
		return 0
	}
	limit := t.Add(cronScan)
	var longest time.Duration
	for t.Before(limit) {
		next := c.Next(t)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(t))
		t = next
	}
	return longest
}
