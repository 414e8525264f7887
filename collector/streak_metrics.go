package collector

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// The failure streak of a probe and the gap its schedule plans: what an
// alert needs to page on "this probe has been failing for N arrivals and
// M seconds" without a for: clause, and to tell a probe that stopped
// running from one that merely runs rarely.

type streakDescs struct {
	consecutive, since, planned *prometheus.Desc
}

func newStreakDescs(base []string) streakDescs {
	return streakDescs{
		consecutive: prometheus.NewDesc("llm_probe_consecutive_failures",
			"Arrivals since the probe's last successful run that failed (any outcome but success, wrong_answer and cancelled) or were skipped with reason concurrency_limit or target_concurrency_limit; overdue skips and cancelled requests do not count.",
			base, nil),
		since: prometheus.NewDesc("llm_probe_failing_since_timestamp_seconds",
			"Unix time of the first arrival of the current failure streak (llm_probe_consecutive_failures); 0 while there is none.",
			base, nil),
		planned: prometheus.NewDesc("llm_probe_planned_interval_seconds",
			"The longest gap the probe's schedule plans between two arrivals in normal operation; absent for closed loops and probes with active windows.",
			base, nil),
	}
}

func (d *streakDescs) list() []*prometheus.Desc {
	return []*prometheus.Desc{d.consecutive, d.since, d.planned}
}

// countsAgainstProbe reports whether a skip with reason is a failure of
// the probe: a request of the probe or of its target was still held by
// the server, so a user arriving then would have waited behind it. An
// overdue skip is the prober's own lateness and says nothing about the
// server.
func countsAgainstProbe(reason string) bool {
	return reason == SkipReasonConcurrencyLimit || reason == SkipReasonTargetConcurrencyLimit
}

// streak is a probe's current run of failed arrivals. Count and start
// change together under mu, and a scrape reads them together, so no
// scrape sees a streak of several failures that started at 0 (which an
// alert on time() - since would take for a streak as old as 1970).
type streak struct {
	mu    sync.Mutex
	count int64
	// since is the Unix time of the streak's first arrival; 0 while
	// count is 0.
	since float64
}

// fail adds an arrival at at to the streak. Results of one probe can be
// observed out of order (a request that timed out after later ones were
// skipped), so since is the earliest arrival of the streak, not the
// first one observed.
func (k *streak) fail(at time.Time) {
	t := float64(at.UnixNano()) / 1e9
	k.mu.Lock()
	if k.count == 0 || t < k.since {
		k.since = t
	}
	k.count++
	k.mu.Unlock()
}

func (k *streak) reset() {
	k.mu.Lock()
	k.count, k.since = 0, 0
	k.mu.Unlock()
}

func (k *streak) read() (count int64, since float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.count, k.since
}

// observe takes the outcome of a request that started at start: a
// success or a wrong answer (an answer all the same: the server is up)
// ends the streak, a cancelled request (the prober stopped it; the
// server had not answered yet) leaves it as it is, anything else extends
// it.
func (k *streak) observe(o probe.Outcome, start time.Time) {
	if o == probe.OutcomeCancelled {
		return
	}
	if o == probe.OutcomeSuccess || o == probe.OutcomeWrongAnswer {
		k.reset()
		return
	}
	k.fail(start)
}

// streakSeries are a probe's streak and planned-interval series.
type streakSeries struct {
	s        *series
	failures streak
	// planned is the planned-interval series, nil when the schedule
	// plans no steady gap. A reload that changes only the schedule keeps
	// the probe's series and swaps this one (setPlanned).
	planned atomic.Pointer[constGauge]
}

func (ss *streakSeries) init(s *series, planned time.Duration) {
	ss.s = s
	ss.setPlanned(planned)
}

// setPlanned exports planned as the planned interval, or nothing when it
// is not positive.
func (ss *streakSeries) setPlanned(planned time.Duration) {
	if planned <= 0 {
		ss.planned.Store(nil)
		return
	}
	if cur := ss.planned.Load(); cur != nil && cur.value.GetValue() == planned.Seconds() {
		return
	}
	ss.planned.Store(newConstGauge(ss.s.d.streak.planned, ss.s.labels, planned.Seconds()))
}

// collect sends the streak as read at once, and the planned interval.
func (ss *streakSeries) collect(ch chan<- prometheus.Metric) {
	count, since := ss.failures.read()
	ch <- newConstGauge(ss.s.d.streak.consecutive, ss.s.labels, float64(count))
	ch <- newConstGauge(ss.s.d.streak.since, ss.s.labels, since)
	if p := ss.planned.Load(); p != nil {
		ch <- p
	}
}
