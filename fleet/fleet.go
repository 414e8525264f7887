// Package fleet turns the loaded configuration into the probes this
// replica runs: the configured targets, expanded by every source of
// targets (discovery, and any other expander such as a model list), then
// cut to this replica's shard. The result goes wherever a reload's
// configuration would (engine.Apply, the server-metrics collector), so
// probes start and stop as targets come and go exactly as on reload.
package fleet

import (
	"sync"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/shard"
)

// Expander adds targets (or probes) to a configuration. It returns a new
// Config and leaves its argument, which is shared, unchanged.
type Expander func(*config.Config) *config.Config

// Applier takes the desired configuration: all is every target after
// expansion, mine those this replica's shard runs.
type Applier func(all, mine *config.Config)

// Pipeline holds the last loaded configuration and applies its expansion
// whenever it or a source of targets changes.
type Pipeline struct {
	shard     shard.Shard
	expanders []Expander
	appliers  []Applier

	// mu serialises applications, so that a discovery refresh and a
	// reload cannot apply out of order.
	mu  sync.Mutex
	cfg *config.Config
}

// New is a pipeline for shard s; expanders run in order.
func New(s shard.Shard, expanders []Expander, appliers ...Applier) *Pipeline {
	return &Pipeline{shard: s, expanders: expanders, appliers: appliers}
}

// SetConfig applies a newly loaded configuration (config.SafeConfig's
// OnChange).
func (p *Pipeline) SetConfig(cfg *config.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	p.apply()
}

// Refresh applies the current configuration again, after a source of
// targets changed. Before the first SetConfig it does nothing.
func (p *Pipeline) Refresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg != nil {
		p.apply()
	}
}

func (p *Pipeline) apply() {
	all := p.cfg
	for _, e := range p.expanders {
		all = e(all)
	}
	mine := p.shard.Filter(all)
	for _, a := range p.appliers {
		a(all, mine)
	}
}
