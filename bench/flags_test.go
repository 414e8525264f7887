package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

func settingsOf(t *testing.T, args ...string) Settings {
	t.Helper()
	app := kingpin.New("llm-prober", "")
	f := AddCommand(app)
	if _, err := app.Parse(append([]string{"bench", "--target", "x"}, args...)); err != nil {
		t.Fatal(err)
	}
	s, err := f.Settings()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The defaults a capacity search and a trace replay fill in.
func TestSearchAndTraceFlagDefaults(t *testing.T) {
	s := settingsOf(t, "--capacity", "rate", "--slo", "ttft<500ms", "--search-start", "4")
	if s.Mode != ModeRate || s.Search == nil || s.Search.Min != 0.25 || s.Search.Max != 10000 || s.Search.Precision != 0.05 || s.Search.Trials != 1 {
		t.Errorf("search %+v", s.Search)
	}
	if s.Stability != 0.1 || s.Duration != DefaultStabilityWindow || s.Objective != 0.99 || s.SLO.TTFT != 0.5 {
		t.Errorf("stability %g, duration %s, objective %g, slo %+v", s.Stability, s.Duration, s.Objective, s.SLO)
	}
	s = settingsOf(t, "--capacity", "concurrency", "--slo", "tpot<=50ms", "--objective", "0.9", "--stability", "20%", "--budget", "5m", "--min-capacity", "8")
	if s.Search.Min != 1 || s.Search.Max != 4096 || s.Stability != 0.2 || s.Objective != 0.9 || s.Search.Budget != 5*time.Minute || s.Search.MinCapacity != 8 {
		t.Errorf("search %+v, stability %g, objective %g", s.Search, s.Stability, s.Objective)
	}
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 1, "output_length": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = settingsOf(t, "--trace", trace, "--trace-speed", "1,2")
	if s.Mode != ModeTrace || len(s.Levels) != 2 || s.Warmup != 0 || s.Trace == nil || s.Trace.BlockTokens != DefaultTraceBlockTokens {
		t.Errorf("trace settings: mode %s levels %v warmup %s", s.Mode, s.Levels, s.Warmup)
	}
	if s = settingsOf(t, "--trace", trace, "--warmup", "2s"); s.Warmup != 2*time.Second {
		t.Errorf("explicit warm-up with a trace: %s", s.Warmup)
	}
	if s = settingsOf(t, "--rate", "5", "--burstiness", "0.5"); s.Burstiness != 0.5 || s.Poisson {
		t.Errorf("burstiness %g poisson %v", s.Burstiness, s.Poisson)
	}
	if s = settingsOf(t, "--quick-sweep", "5"); s.QuickSweep != 5 || s.SweepConcurrency != 64 {
		t.Errorf("quick sweep %d at %d", s.QuickSweep, s.SweepConcurrency)
	}
}
