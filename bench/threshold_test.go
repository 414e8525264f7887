package bench

import (
	"math"
	"strings"
	"testing"
)

func TestParseThreshold(t *testing.T) {
	for _, tc := range []struct {
		in     string
		metric string
		op     string
		value  float64
	}{
		{"ttft_p95<500ms", "ttft_p95", "<", 0.5},
		{"tpot_p50 <= 20ms", "tpot_p50", "<=", 0.02},
		{"itl_p99<250us", "itl_p99", "<", 250e-6},
		{"itl_max<250µs", "itl_max", "<", 250e-6},
		{"latency_avg<1.5s", "latency_avg", "<", 1.5},
		{"error_rate<1%", "error_rate", "<", 0.01},
		{"error_rate<=0.05", "error_rate", "<=", 0.05},
		{"output_tokens_per_second>200", "output_tokens_per_second", ">", 200},
		{"requests_per_second>=2.5", "requests_per_second", ">=", 2.5},
		{"input_tokens_per_second>0", "input_tokens_per_second", ">", 0},
		{"requests>=100", "requests", ">=", 100},
		{"output_tokens_min>=128", "output_tokens_min", ">=", 128},
	} {
		th, err := ParseThreshold(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if th.Metric != tc.metric || th.Op != tc.op || math.Abs(th.Value-tc.value) > 1e-12 {
			t.Errorf("%q = %s %s %g, want %s %s %g", tc.in, th.Metric, th.Op, th.Value, tc.metric, tc.op, tc.value)
		}
	}
}

func TestParseThresholdErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ttft_p95", "not <metric><op><value>"},
		{"ttft_p95=500ms", "not <metric><op><value>"},
		{"ttft_p96<500ms", `unknown metric "ttft_p96"`},
		{"ttfb_p95<500ms", `unknown metric`},
		{"ttft<500ms", `unknown metric`},
		{"ttft_p95<500", "needs a unit"},
		{"ttft_p95<500m", "not a duration"},
		{"ttft_p95<5min", "not a duration"},
		{"ttft_p95<-5ms", "not a duration"},
		{"error_rate<5", "above 1; write a percentage"},
		{"error_rate<101%", "above 100%"},
		{"error_rate<1ms", "not a percentage or ratio"},
		{"output_tokens_per_second>200ms", "plain number without a unit"},
		{"requests>1%", "plain number without a unit"},
		{"output_tokens_p50>1e999", "out of range"},
	} {
		_, err := ParseThreshold(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
	// Grammar errors list what is allowed.
	_, err := ParseThreshold("bogus<1")
	for _, want := range []string{"ttft", "_p95", "error_rate", "output_tokens_per_second", "< <= > >=", "ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("help lacks %q: %v", want, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	mk := func(i int, level, ttftP95, errRate, tps float64, requests, successes int) *Step {
		s := &Step{Index: i, Mode: ModeConcurrency, Level: level}
		s.Requests, s.Successes, s.ErrorRate = requests, successes, errRate
		s.MeasurementSeconds, s.OutputTokensPerSecond = 1, tps
		if successes > 0 {
			s.TTFT = Summary{Count: successes, P95: ttftP95}
		}
		return s
	}
	steps := []*Step{mk(1, 1, 0.1, 0, 300, 10, 10), mk(2, 4, 0.4, 0.02, 250, 50, 49), mk(3, 8, 0.3, 0.01, 180, 80, 79)}
	parse := func(s string) Threshold {
		th, err := ParseThreshold(s)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	res := Evaluate([]Threshold{
		parse("ttft_p95<500ms"), parse("ttft_p95<350ms"), parse("error_rate<=2%"), parse("error_rate<1%"),
		parse("output_tokens_per_second>200"), parse("requests>=10"),
	}, steps)
	for i, want := range []struct {
		passed bool
		step   int
		value  float64
	}{{true, 2, 0.4}, {false, 2, 0.4}, {true, 2, 0.02}, {false, 2, 0.02}, {false, 3, 180}, {true, 1, 10}} {
		r := res[i]
		if r.Passed != want.passed || r.WorstStep != want.step || r.WorstValue == nil || *r.WorstValue != want.value {
			t.Errorf("%s: passed %v worst step %d value %v, want %v %d %g", r.Text, r.Passed, r.WorstStep, r.WorstValue, want.passed, want.step, want.value)
		}
	}
	// A step without a value (no successful request) fails the threshold.
	steps = append(steps, mk(4, 16, 0, 1, 0, 5, 0))
	r := Evaluate([]Threshold{parse("ttft_p95<500ms")}, steps)[0]
	if r.Passed || !r.Missing {
		t.Errorf("missing TTFT passed: %+v", r)
	}
	// No steps at all: nothing was shown to hold.
	if r := Evaluate([]Threshold{parse("requests>0")}, nil)[0]; r.Passed {
		t.Error("threshold passed without any step")
	}
}

func TestThresholdFormat(t *testing.T) {
	th, _ := ParseThreshold("ttft_p95<500ms")
	if got := th.Format(0.0123); got != "12.30 ms" {
		t.Errorf("Format = %q", got)
	}
	th, _ = ParseThreshold("error_rate<1%")
	if got := th.Format(0.025); got != "2.50%" {
		t.Errorf("Format = %q", got)
	}
}
