package shard

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/config"
)

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = ProbeKey(fmt.Sprintf("target-%d", i/4), fmt.Sprintf("probe-%d", i%4))
	}
	return ks
}

// Every key has exactly one owner, and the owners are balanced.
func TestOwnerBalanced(t *testing.T) {
	const n = 4000
	for _, count := range []int{1, 2, 3, 5, 8} {
		per := make([]int, count)
		for _, k := range keys(n) {
			o := Owner(k, count)
			if o < 0 || o >= count {
				t.Fatalf("Owner(%q, %d) = %d", k, count, o)
			}
			per[o]++
		}
		want := n / count
		for i, got := range per {
			// Within 15% of an even split: binomial spread at these
			// sizes is a few percent.
			if d := got - want; d > want*15/100 || -d > want*15/100 {
				t.Errorf("count %d: shard %d owns %d keys, want about %d (%v)", count, i, got, want, per)
			}
		}
	}
}

// Going from N to N+1 shards moves only keys to the new shard, about
// 1/(N+1) of them; going down moves only the removed shard's keys.
func TestMinimalMovement(t *testing.T) {
	const n = 4000
	for count := 1; count < 8; count++ {
		moved := 0
		for _, k := range keys(n) {
			before, after := Owner(k, count), Owner(k, count+1)
			if before != after {
				moved++
				if after != count {
					t.Fatalf("%q moved from %d to %d going from %d to %d shards; only moves to the new shard are needed", k, before, after, count, count+1)
				}
			}
		}
		want := n / (count + 1)
		if d := moved - want; d > want/5 || -d > want/5 {
			t.Errorf("%d→%d shards moved %d keys, want about %d", count, count+1, moved, want)
		}
	}
}

func testConfig(t *testing.T) *config.Config {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  - {name: t%d, protocol: openai_chat, url: 'http://h%d:8000', model: m, server_metrics: {url: 'http://h%d:8000/metrics'}, probes: [{name: a, schedule: {every: 15s}}, {name: b, schedule: {every: 15s}}, {name: c, schedule: {every: 15s}}]}\n", i, i, i)
	}
	cfg, err := config.Parse([]byte(b.String()), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Two replicas run disjoint sets of probes whose union is every probe,
// and each target's server metrics are collected by exactly one.
func TestFilterDisjointUnion(t *testing.T) {
	cfg := testConfig(t)
	for _, count := range []int{1, 2, 3} {
		seen := map[string]int{}
		servers := map[string]int{}
		for i := range count {
			s := Shard{Count: count, Index: i}
			for _, tg := range s.Filter(cfg).Targets {
				for _, p := range tg.Probes {
					seen[tg.Name+"/"+p.Name]++
				}
			}
			for _, st := range s.ServerTargets(cfg.ServerTargets()) {
				servers[st.Name]++
			}
		}
		if len(seen) != cfg.ProbeCount() {
			t.Errorf("count %d: replicas ran %d distinct probes, want %d", count, len(seen), cfg.ProbeCount())
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("count %d: %s runs on %d replicas", count, k, n)
			}
		}
		if len(servers) != len(cfg.Targets) {
			t.Errorf("count %d: server metrics of %d targets collected, want %d", count, len(servers), len(cfg.Targets))
		}
		for k, n := range servers {
			if n != 1 {
				t.Errorf("count %d: %s's server metrics collected by %d replicas", count, k, n)
			}
		}
	}
	if n := cfg.ProbeCount(); n != 30 {
		t.Fatalf("Filter changed the shared config: %d probes", n)
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []Shard{{0, 0}, {2, 2}, {2, -1}} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	if err := (Shard{3, 2}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestInfoCollector(t *testing.T) {
	c := NewInfoCollector(Shard{Count: 3, Index: 1})
	c.SetProbes(7)
	want := `# HELP llm_prober_shard_info This replica's shard (--shard.index) among --shard.count; always 1.
# TYPE llm_prober_shard_info gauge
llm_prober_shard_info{shard_count="3",shard_index="1"} 1
# HELP llm_prober_shard_probes Probes this shard runs after sharding (static and discovered).
# TYPE llm_prober_shard_probes gauge
llm_prober_shard_probes 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if probs, err := testutil.CollectAndLint(c); err != nil || len(probs) > 0 {
		t.Error(err, probs)
	}
}

// The flags' check runs once the defaults are in: --help (where kingpin
// fills in no defaults) shows the help and terminates with 0, an explicit
// bad value is an error, and the defaults alone are valid.
func TestAddFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--help"}},
		{args: []string{"serve", "--help"}},
		{args: []string{}},
		{args: []string{"--shard.count=3", "--shard.index=2"}},
		{args: []string{"--shard.count=0"}, wantErr: "--shard.count must be at least 1, got 0"},
		{args: []string{"--shard.count=2", "--shard.index=2"}, wantErr: "--shard.index must be 0 to 1"},
	} {
		app := kingpin.New("test", "")
		app.UsageWriter(io.Discard)
		// As cmd/llm-prober's run: termination is recorded, and what
		// Parse returns after it is not looked at.
		terminated := -1
		app.Terminate(func(code int) {
			if terminated < 0 {
				terminated = code
			}
		})
		s := AddFlags(app.Command("serve", "").Default())
		_, err := app.Parse(tc.args)
		help := slices.Contains(tc.args, "--help")
		if help {
			if terminated != 0 {
				t.Errorf("%q: help did not terminate with 0 (%d); error %v", tc.args, terminated, err)
			}
			continue
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
		case tc.wantErr == "" && s.Validate() != nil:
			t.Errorf("%q: parsed into an invalid %+v", tc.args, *s)
		}
	}
}
