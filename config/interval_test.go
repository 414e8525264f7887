package config

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/internal/alertmodel"
)

func TestMeanInterval(t *testing.T) {
	d := func(x time.Duration) model.Duration { return model.Duration(x) }
	fourYears := 1461 * 24 * time.Hour
	for _, c := range []struct {
		name string
		s    Schedule
		want time.Duration
		ok   bool
	}{
		{"every", Schedule{Every: d(15 * time.Second)}, 15 * time.Second, true},
		{"every with jitter", Schedule{Every: d(15 * time.Second), Jitter: d(5 * time.Second)}, 15 * time.Second, true},
		{"rate per minute, poisson", Schedule{Rate: NewRate("30/m"), Distribution: "poisson"}, 2 * time.Second, true},
		{"rate per hour", Schedule{Rate: NewRate("100/h")}, 36 * time.Second, true},
		{"rate per second, gamma", Schedule{Rate: NewRate("2/s"), Distribution: "gamma"}, 500 * time.Millisecond, true},
		{"burst per period", Schedule{Burst: 8, Period: d(time.Minute)}, 7500 * time.Millisecond, true},
		{"burst every minute by cron", Schedule{Burst: 8, Cron: NewCron("* * * * *")}, 7500 * time.Millisecond, true},
		{"hourly cron", Schedule{Burst: 1, Cron: NewCron("0 * * * *")}, time.Hour, true},
		{"every 15 minutes of office hours", Schedule{Burst: 2, Cron: NewCron("*/15 9-16 * * *")}, 24 * time.Hour / 32 / 2, true},
		// 2024-01-01 is a Monday; 1461 days hold 208 weeks and 5 days
		// from a Monday: 208·5 + 5 weekdays.
		{"weekdays at 9", Schedule{Burst: 1, Cron: NewCron("0 9 * * mon-fri")}, fourYears / 1045, true},
		{"leap day", Schedule{Burst: 1, Cron: NewCron("0 0 29 2 *")}, fourYears, true},
		{"never", Schedule{Burst: 1, Cron: NewCron("0 0 30 2 *")}, 0, false},
		// 2/s for 1m and 1/s for 3m: 300 arrivals in 240 s.
		{"rate stages", Schedule{Stages: []*Stage{{Rate: NewRate("2/s"), Duration: d(time.Minute)}, {Rate: NewRate("1/s"), Duration: d(3 * time.Minute)}}}, 800 * time.Millisecond, true},
		{"closed loop", Schedule{Concurrency: 4}, 0, false},
		{"a closed-loop stage", Schedule{Stages: []*Stage{{Rate: NewRate("1/s"), Duration: d(time.Minute)}, {Concurrency: 2, Duration: d(time.Minute)}}}, 0, false},
		{"invalid rate", Schedule{Rate: NewRate("fast")}, 0, false},
		{"nothing", Schedule{}, 0, false},
	} {
		got, ok := c.s.MeanInterval()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: MeanInterval() = %s, %v; want %s, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestAlertModel: what the alert verdict is given: the mean interval and
// burst size of the schedule, the timeout, the objective.
func TestAlertModel(t *testing.T) {
	d := func(x time.Duration) model.Duration { return model.Duration(x) }
	for _, c := range []struct {
		p    Probe
		want alertmodel.Probe
	}{
		{Probe{Schedule: Schedule{Every: d(time.Minute)}, Timeout: d(30 * time.Second), SLO: &SLO{Objective: 0.99}},
			alertmodel.Probe{Interval: time.Minute, Timeout: 30 * time.Second, Objective: 0.99}},
		{Probe{Schedule: Schedule{Burst: 8, Period: d(time.Minute)}},
			alertmodel.Probe{Interval: 7500 * time.Millisecond, Burst: 8}},
		{Probe{Schedule: Schedule{Concurrency: 8}, Timeout: d(time.Second)},
			alertmodel.Probe{Timeout: time.Second}},
	} {
		if got := c.p.AlertModel(); got != c.want {
			t.Errorf("%+v: AlertModel() = %+v, want %+v", c.p.Schedule, got, c.want)
		}
	}
	if v := (&Probe{Schedule: Schedule{Every: d(5 * time.Minute)}}).AlertVerdict(); !v.Known || v.HardOutage != 645*time.Second {
		t.Errorf("AlertVerdict of every 5m: %+v", v)
	}
}
