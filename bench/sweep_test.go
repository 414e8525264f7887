package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		in   string
		want []float64
	}{
		{ModeConcurrency, "1,4,8", []float64{1, 4, 8}},
		{ModeConcurrency, "1:64:x2", []float64{1, 2, 4, 8, 16, 32, 64}},
		{ModeConcurrency, "1:50:x2", []float64{1, 2, 4, 8, 16, 32}},
		{ModeConcurrency, "1:4:x2", []float64{1, 2, 4}},
		{ModeConcurrency, "2:10:4", []float64{2, 6, 10}},
		{ModeConcurrency, "1:3", []float64{1, 2, 3}},
		{ModeConcurrency, "1:10:x1.5", []float64{1, 2, 3, 5, 8}},
		{ModeConcurrency, " 8 , 1:2 ,8", []float64{8, 1, 2}},
		{ModeConcurrency, "5", []float64{5}},
		{ModeRate, "1:10:1", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{ModeRate, "0.1:0.3:0.1", []float64{0.1, 0.2, 0.3}},
		{ModeRate, "0.5:8:x2", []float64{0.5, 1, 2, 4, 8}},
		{ModeRate, "2.5,5", []float64{2.5, 5}},
	} {
		got, err := ParseSweep(tc.mode, tc.in)
		if err != nil {
			t.Errorf("%s %q: %v", tc.mode, tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %q = %v, want %v", tc.mode, tc.in, got, tc.want)
		}
	}
}

func TestParseSweepErrors(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		in   string
		want string
	}{
		{ModeConcurrency, "", "empty"},
		{ModeConcurrency, "0", "whole number ≥ 1"},
		{ModeConcurrency, "1.5", "whole number ≥ 1"},
		{ModeConcurrency, "-2", "whole number ≥ 1"},
		{ModeConcurrency, "a", "not a number"},
		{ModeConcurrency, "1,,2", "empty item"},
		{ModeConcurrency, "8:1", "ends below its start"},
		{ModeConcurrency, "1:8:x1", "factor"},
		{ModeConcurrency, "1:8:x", "factor"},
		{ModeConcurrency, "1:8:0", "step"},
		{ModeConcurrency, "1:8:1.5", "whole number for concurrency"},
		{ModeConcurrency, "1:2:3:4", "4 parts"},
		{ModeConcurrency, "1:100000:1", "more than 1000 steps"},
		{ModeRate, "0", "> 0"},
		{ModeRate, "NaN", "not a number"},
		{ModeRate, "1:Inf", "not a number"},
		{ModeRate, "2e7", "beyond"},
	} {
		_, err := ParseSweep(tc.mode, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %v, want one containing %q", tc.mode, tc.in, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "want ") {
			t.Errorf("%s %q: error %q does not say what is allowed", tc.mode, tc.in, err)
		}
	}
}

func TestLabel(t *testing.T) {
	if got := Label(ModeRate, 2.5); got != "rate 2.5/s" {
		t.Errorf("Label = %q", got)
	}
	if got := Label(ModeConcurrency, 8); got != "concurrency 8" {
		t.Errorf("Label = %q", got)
	}
}
