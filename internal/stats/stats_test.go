package stats

import (
	"testing"
	"time"
)

func TestSummariseNearestRank(t *testing.T) {
	values := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- { // unsorted on purpose
		values = append(values, float64(i))
	}
	s := Summarise(values)
	want := Summary{Count: 100, Avg: 50.5, Min: 1, Max: 100, P50: 50, P75: 75, P90: 90, P95: 95, P99: 99}
	if s != want {
		t.Fatalf("Summarise = %+v, want %+v", s, want)
	}
}

func TestSummariseSmallSamples(t *testing.T) {
	if s := Summarise[float64](nil); s != (Summary{}) {
		t.Fatalf("empty sample: %+v", s)
	}
	s := Summarise([]float64{3})
	if s.Count != 1 || s.Min != 3 || s.Max != 3 || s.P50 != 3 || s.P99 != 3 || s.Avg != 3 {
		t.Fatalf("one value: %+v", s)
	}
	// Two values: p50 is the lower (rank ceil(1)=1), p75 and up the upper.
	s = Summarise([]float64{10, 20})
	if s.P50 != 10 || s.P75 != 20 || s.P99 != 20 {
		t.Fatalf("two values: %+v", s)
	}
}

func TestPercentileDurations(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4}
	if got := Percentile(d, 0.5); got != 2 {
		t.Fatalf("p50 = %v", got)
	}
	if got := Percentile(d, 0); got != 1 {
		t.Fatalf("p0 = %v", got)
	}
	if got := Percentile([]time.Duration(nil), 0.5); got != 0 {
		t.Fatalf("empty = %v", got)
	}
}

func TestSummariseFloat32AndDividedBy(t *testing.T) {
	ns := []float32{3e6, 1e6, 2e6, 4e6} // 1–4 ms in nanoseconds
	s := Summarise(ns).DividedBy(1e9)
	want := Summary{Count: 4, Avg: 0.0025, Min: 0.001, Max: 0.004, P50: 0.002, P75: 0.003, P90: 0.004, P95: 0.004, P99: 0.004}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}

func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{
		123456 * time.Nanosecond:   "0.123",
		42*time.Millisecond + 5e4:  "42.05",
		1234567 * time.Microsecond: "1234.6",
		0:                          "0.000",
	} {
		if got := Millis(d); got != want {
			t.Errorf("Millis(%v) = %q, want %q", d, got, want)
		}
	}
}
