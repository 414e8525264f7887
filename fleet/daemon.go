package fleet

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/shard"
)

// Options is what the daemon's fleet side is wired to.
type Options struct {
	Logger *slog.Logger
	// Registry takes the shard and discovery metrics.
	Registry prometheus.Registerer
	Shard    shard.Shard
	Engine   *engine.Engine
	Servers  *collector.ServerMetrics
	// Expanders run after discovery, e.g. per-model probes.
	Expanders []Expander
}

// Daemon is the serve command's fleet side: discovery of targets, the
// shard, and the application of both to the engine on every change.
type Daemon struct {
	discovery *discovery.Manager
	pipeline  *Pipeline
}

// NewDaemon wires discovery and sharding between the configuration and
// o.Engine and o.Servers.
func NewDaemon(o Options) *Daemon {
	d := &Daemon{}
	info := shard.NewInfoCollector(o.Shard)
	o.Registry.MustRegister(info)
	d.discovery = discovery.NewManager(o.Logger, o.Registry, func() { d.pipeline.Refresh() })
	d.pipeline = New(o.Shard, append([]Expander{d.discovery.Expand}, o.Expanders...),
		func(_, mine *config.Config) {
			o.Engine.Apply(mine)
			info.SetProbes(mine.ProbeCount())
		},
		func(all, _ *config.Config) {
			o.Servers.SetTargets(o.Shard.ServerTargets(all.ServerTargets()))
		})
	return d
}

// SetConfig applies a newly loaded configuration (SafeConfig.OnChange).
// Discovery is set up first, outside the pipeline's lock: its sources'
// first reads are in the configuration applied right after.
func (d *Daemon) SetConfig(cfg *config.Config) {
	d.discovery.Apply(cfg)
	d.pipeline.SetConfig(cfg)
}

// Stop ends discovery; the engine is stopped by its owner.
func (d *Daemon) Stop() {
	d.discovery.Stop()
}
