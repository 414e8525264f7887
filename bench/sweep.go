package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Mode is what a sweep varies: closed-loop concurrency or open-loop rate.
type Mode string

// Sweep modes.
const (
	ModeConcurrency Mode = "concurrency"
	ModeRate        Mode = "rate"
	// ModeTrace replays --trace; a level is the speed (2: twice as fast).
	ModeTrace Mode = "trace"
)

// maxSteps bounds a sweep: "1:1000000:1" is a typo, not a plan.
const maxSteps = 1000

// ParseSweep reads a list of levels: comma-separated items, each a single
// value, start:end (step 1), start:end:step (additive) or start:end:xF
// (geometric, F > 1). Concurrency levels must be whole numbers ≥ 1; rates
// any positive number of requests per second. The result keeps the order
// written and drops repeats.
func ParseSweep(mode Mode, s string) ([]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("--%s: empty; %s", mode, sweepHelp(mode))
	}
	var levels []float64
	seen := map[float64]bool{}
	for item := range strings.SplitSeq(s, ",") {
		vals, err := parseItem(mode, strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w; %s", mode, s, err, sweepHelp(mode))
		}
		for _, v := range vals {
			if !seen[v] {
				seen[v] = true
				levels = append(levels, v)
			}
		}
		if len(levels) > maxSteps {
			return nil, fmt.Errorf("--%s %q: more than %d steps", mode, s, maxSteps)
		}
	}
	return levels, nil
}

func sweepHelp(mode Mode) string {
	if mode == ModeConcurrency {
		return "want whole numbers ≥ 1 as a list (1,4,8), a range start:end[:step] (1:8:1) or a geometric range start:end:xFACTOR (1:64:x2)"
	}
	return "want requests per second > 0 as a list (1,2.5,5), a range start:end[:step] (1:10:1) or a geometric range start:end:xFACTOR (0.5:8:x2)"
}

func parseItem(mode Mode, item string) ([]float64, error) {
	if item == "" {
		return nil, fmt.Errorf("empty item")
	}
	parts := strings.Split(item, ":")
	if len(parts) > 3 {
		return nil, fmt.Errorf("%q has %d parts", item, len(parts))
	}
	start, err := parseLevel(mode, parts[0])
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 {
		return []float64{start}, nil
	}
	end, err := parseLevel(mode, parts[1])
	if err != nil {
		return nil, err
	}
	if end < start {
		return nil, fmt.Errorf("range %q ends below its start", item)
	}
	step, factor := 1.0, 0.0
	if len(parts) == 3 {
		p := strings.TrimSpace(parts[2])
		if f, ok := strings.CutPrefix(p, "x"); ok {
			factor, err = strconv.ParseFloat(f, 64)
			if err != nil || !(factor > 1) || math.IsInf(factor, 0) {
				return nil, fmt.Errorf("geometric factor %q must be a number > 1", p)
			}
		} else {
			step, err = strconv.ParseFloat(p, 64)
			if err != nil || !(step > 0) || math.IsInf(step, 0) {
				return nil, fmt.Errorf("step %q must be a number > 0", p)
			}
			if mode == ModeConcurrency && step != math.Trunc(step) {
				return nil, fmt.Errorf("step %q must be a whole number for concurrency", p)
			}
		}
	}
	// Each value is computed from the start rather than summed, and the end
	// is included when a step lands on it up to rounding (0.1:0.3:0.1).
	const eps = 1e-9
	var out []float64
	for i := 0; ; i++ {
		var v float64
		if factor > 0 {
			v = start * math.Pow(factor, float64(i))
			if mode == ModeConcurrency {
				v = math.Round(v)
			}
		} else {
			v = start + float64(i)*step
		}
		if v > end*(1+eps) {
			break
		}
		v = roundLevel(v)
		if len(out) == 0 || v != out[len(out)-1] {
			out = append(out, v)
		}
		if len(out) > maxSteps {
			return nil, fmt.Errorf("range %q has more than %d steps", item, maxSteps)
		}
	}
	return out, nil
}

// roundLevel removes float noise (0.30000000000000004) so levels print
// and compare as written.
func roundLevel(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return r
}

func parseLevel(mode Mode, s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	switch mode {
	case ModeConcurrency:
		if v < 1 || v != math.Trunc(v) {
			return 0, fmt.Errorf("concurrency %q must be a whole number ≥ 1", s)
		}
		if v > 1<<20 {
			return 0, fmt.Errorf("concurrency %q is beyond %d", s, 1<<20)
		}
	default:
		if mode == ModeTrace && !(v > 0 && v <= 1e6) {
			return 0, fmt.Errorf("trace speed %q must be > 0 (1 plays the trace as recorded, 2 twice as fast)", s)
		}
		if !(v > 0) {
			return 0, fmt.Errorf("rate %q must be > 0 requests per second", s)
		}
		if v > 1e6 {
			return 0, fmt.Errorf("rate %q is beyond 1e6 requests per second", s)
		}
	}
	return v, nil
}

// FormatLevel prints a level as a user wrote it: "8", "2.5".
func FormatLevel(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Label names a step's level for people: "concurrency 8", "rate 2.5/s".
func Label(mode Mode, level float64) string {
	switch mode {
	case ModeRate:
		return "rate " + FormatLevel(level) + "/s"
	case ModeTrace:
		return "trace ×" + FormatLevel(roundLevel(level))
	}
	return "concurrency " + FormatLevel(level)
}
