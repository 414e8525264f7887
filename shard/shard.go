// Package shard splits the probes of one configuration among the replicas
// of a StatefulSet, as Prometheus' hashmod relabelling splits scrape
// targets, but with rendezvous (highest random weight) hashing: when the
// replica count changes from N to N+1 only about 1/(N+1) of the probes
// move, all of them to the new replica, where hashmod would move most.
package shard

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
)

// Shard is this replica's place among Count replicas.
type Shard struct {
	Count, Index int
}

// Validate says what is wrong with flags that cannot work together.
func (s Shard) Validate() error {
	if s.Count < 1 {
		return fmt.Errorf("--shard.count must be at least 1, got %d", s.Count)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("--shard.index must be 0 to %d (--shard.count - 1), got %d; in a StatefulSet use the pod's ordinal", s.Count-1, s.Index)
	}
	return nil
}

// AddFlags defines --shard.count and --shard.index on cmd, checked when
// cmd is parsed. The check is an action, not a pre-action: kingpin runs
// pre-actions before it fills in defaults when --help is given, so a
// pre-action would see --shard.count 0 and fail the help itself.
func AddFlags(cmd *kingpin.CmdClause) *Shard {
	s := &Shard{}
	cmd.Flag("shard.count", "Replicas sharing the probes; each runs those its --shard.index owns.").Default("1").IntVar(&s.Count)
	cmd.Flag("shard.index", "This replica's shard, 0 to --shard.count-1 (a StatefulSet pod's ordinal).").Default("0").IntVar(&s.Index)
	cmd.Action(func(*kingpin.ParseContext) error { return s.Validate() })
	return s
}

// Enabled reports whether there is more than one shard.
func (s Shard) Enabled() bool { return s.Count > 1 }

// Owner is the shard that runs key among count shards: the one whose
// weight for the key is highest. The weight hashes the key with the
// shard's number, so it depends on nothing else: every replica computes
// the same owner without talking to the others.
func Owner(key string, count int) int {
	best, bestW := 0, uint64(0)
	for i := range count {
		if w := weight(key, i); i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

func weight(key string, i int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	h.Write(b[:])
	// FNV's low bits mix poorly for keys that differ only at the end;
	// a finaliser (splitmix64's) spreads every input bit over the output.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ProbeKey is what a probe is sharded by: its target and name, so the
// probes of one target spread over the replicas.
func ProbeKey(target, probe string) string { return target + "\x00" + probe }

// OwnsProbe reports whether this shard runs the probe.
func (s Shard) OwnsProbe(target, probe string) bool {
	return !s.Enabled() || Owner(ProbeKey(target, probe), s.Count) == s.Index
}

// OwnsTarget reports whether this shard collects the target's own
// server metrics: exactly one replica does, so they are not scraped N
// times.
func (s Shard) OwnsTarget(target string) bool {
	return !s.Enabled() || Owner(target, s.Count) == s.Index
}

// Filter is cfg with only this shard's probes; a target left without a
// probe is left out. cfg itself is not changed (it is shared). Server
// metrics are filtered separately (ServerTargets), because the shard that
// owns a target's server metrics need not own any of its probes.
func (s Shard) Filter(cfg *config.Config) *config.Config {
	if !s.Enabled() {
		return cfg
	}
	out := *cfg
	out.Targets = nil
	for _, t := range cfg.Targets {
		var probes []*config.Probe
		for _, p := range t.Probes {
			if s.OwnsProbe(t.Name, p.Name) {
				probes = append(probes, p)
			}
		}
		if len(probes) == 0 {
			continue
		}
		ct := *t
		ct.Probes = probes
		out.Targets = append(out.Targets, &ct)
	}
	return &out
}

// ServerTargets is the server-metrics targets of ts that this shard owns.
func (s Shard) ServerTargets(ts []collector.ServerTarget) []collector.ServerTarget {
	var out []collector.ServerTarget
	for _, t := range ts {
		if s.OwnsTarget(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// InfoCollector exposes llm_prober_shard_info and the number of probes
// this shard runs, so a dashboard can check that the replicas together
// run every probe once.
type InfoCollector struct {
	info   prometheus.Gauge
	probes prometheus.Gauge
}

// NewInfoCollector is s's info metric, set to 1, and a probe count set by
// SetProbes.
func NewInfoCollector(s Shard) *InfoCollector {
	c := &InfoCollector{
		info: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "llm_prober_shard_info",
			Help:        "This replica's shard (--shard.index) among --shard.count; always 1.",
			ConstLabels: prometheus.Labels{"shard_index": strconv.Itoa(s.Index), "shard_count": strconv.Itoa(s.Count)},
		}),
		probes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_prober_shard_probes",
			Help: "Probes this shard runs after sharding (static and discovered).",
		}),
	}
	c.info.Set(1)
	return c
}

// SetProbes records how many probes this shard runs.
func (c *InfoCollector) SetProbes(n int) { c.probes.Set(float64(n)) }

// Describe implements prometheus.Collector.
func (c *InfoCollector) Describe(ch chan<- *prometheus.Desc) {
	c.info.Describe(ch)
	c.probes.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *InfoCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- c.info
	ch <- c.probes
}
