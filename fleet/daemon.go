package fleet

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/remotewrite"
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
	// Gatherer is what remote write sends: the prober's own registry.
	Gatherer prometheus.Gatherer
	// KubeClient makes the clients of kubernetes_sd_configs;
	// discovery.NewKubeClient (in-cluster or kubeconfig_file) when nil.
	KubeClient discovery.KubeClientFunc
}

// Daemon is the serve command's fleet side: discovery of targets, the
// shard, and the application of both to the engine on every change.
type Daemon struct {
	discovery *discovery.Manager
	pipeline  *Pipeline
	remote    *remotewrite.Manager
}

// NewDaemon wires discovery and sharding between the configuration and
// o.Engine and o.Servers.
func NewDaemon(o Options) *Daemon {
	d := &Daemon{remote: remotewrite.NewManager(o.Logger, o.Gatherer, o.Registry)}
	info := shard.NewInfoCollector(o.Shard)
	o.Registry.MustRegister(info)
	d.discovery = discovery.NewManager(o.Logger, o.Registry, func() { d.pipeline.Refresh() })
	if o.KubeClient != nil {
		d.discovery.SetKubeClient(o.KubeClient)
	}
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
	d.remote.Apply(cfg)
}

// Stop ends discovery, gathers once more for remote write and sends what
// is queued until ctx ends. Stop the engine first, so the last results
// are in that gather.
func (d *Daemon) Stop(ctx context.Context) {
	d.discovery.Stop()
	d.remote.Stop(ctx)
}

// Close is Stop without waiting for receivers, for a daemon that never
// started serving. A second Stop or Close does nothing.
func (d *Daemon) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.Stop(ctx)
}
