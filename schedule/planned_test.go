package schedule

import (
	"math"
	"testing"
	"time"
)

func TestPlannedInterval(t *testing.T) {
	// A Saturday in UTC, so weekday crons start with their weekend gap
	// ahead and daylight saving time plays no part.
	now := time.Date(2025, 3, 1, 10, 0, 30, 0, time.UTC)
	ln1e4 := math.Log(1e4)
	for _, tc := range []struct {
		name string
		spec Spec
		want time.Duration // 0: not ok
	}{
		{"every", Spec{Every: 15 * time.Second}, 15 * time.Second},
		{"every with jitter", Spec{Every: 15 * time.Second, Jitter: 5 * time.Second}, 20 * time.Second},
		{"constant rate", Spec{Rate: 2}, 500 * time.Millisecond},
		{"constant rate per hour", Spec{Rate: 30.0 / 3600}, 2 * time.Minute},
		{"poisson rate", Spec{Rate: 1, Poisson: true}, time.Duration(ln1e4 * float64(time.Second))},
		{"gamma rate", Spec{Rate: 0.1, Burstiness: 0.5}, time.Duration(10 * ln1e4 * float64(time.Second))},
		{"gamma takes precedence over poisson", Spec{Rate: 0.1, Poisson: true, Burstiness: 4}, time.Duration(10 * ln1e4 * float64(time.Second))},
		{"burst with a period", Spec{Burst: 8, Period: 5 * time.Minute}, 5 * time.Minute},
		{"burst every minute", Spec{Burst: 8, Cron: mustCron(t, "* * * * *")}, time.Minute},
		{"burst hourly", Spec{Burst: 8, Cron: mustCron(t, "0 * * * *")}, time.Hour},
		{"burst at uneven minutes", Spec{Burst: 8, Cron: mustCron(t, "0,10,45 * * * *")}, 35 * time.Minute},
		{"burst on weekdays: the weekend", Spec{Burst: 8, Cron: mustCron(t, "0 9-17 * * mon-fri")}, 64 * time.Hour}, // Fri 17:00 → Mon 09:00
		{"burst weekly", Spec{Burst: 8, Cron: mustCron(t, "0 3 * * sun")}, 7 * 24 * time.Hour},
		// The first time is 1 April; the gap to 1 May is followed to its
		// end, though the scan ends after eight days.
		{"burst monthly, followed past the scan", Spec{Burst: 8, Cron: mustCron(t, "0 0 1 * *")}, 30 * 24 * time.Hour},
		{"burst on an impossible date", Spec{Burst: 8, Cron: mustCron(t, "0 0 30 2 *")}, 0},
		{"stages: the longest", Spec{Stages: []Stage{{Rate: 2, Duration: time.Minute}, {Rate: 0.5, Duration: time.Minute}}}, 2 * time.Second},
		{"poisson stages", Spec{Poisson: true, Stages: []Stage{{Rate: 1, Duration: time.Minute}}}, time.Duration(ln1e4 * float64(time.Second))},
		{"stages with a closed loop", Spec{Stages: []Stage{{Rate: 2, Duration: time.Minute}, {Concurrency: 4, Duration: time.Minute}}}, 0},
		{"concurrency", Spec{Concurrency: 4}, 0},
		{"active window", Spec{Every: 15 * time.Second, Active: Window{mustCron(t, "* 9-17 * * *")}}, 0},
		{"trace", Spec{Trace: []time.Duration{0, time.Second}}, 0},
		{"nothing", Spec{}, 0},
	} {
		got, ok := tc.spec.plannedInterval(now)
		if ok != (tc.want > 0) || got != tc.want {
			t.Errorf("%s: got %s, %t; want %s, %t", tc.name, got, ok, tc.want, tc.want > 0)
		}
	}
	if randomGapQuantile != ln1e4 {
		t.Errorf("randomGapQuantile = %v, want ln(1e4) = %v", randomGapQuantile, ln1e4)
	}
}

// The exported form measures cron gaps from the present.
func TestPlannedIntervalNow(t *testing.T) {
	got, ok := Spec{Burst: 1, Cron: mustCron(t, "*/5 * * * *")}.PlannedInterval()
	if !ok || got != 5*time.Minute {
		t.Errorf("got %s, %t; want 5m, true", got, ok)
	}
}
