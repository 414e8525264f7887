package config

import (
	"fmt"
	"slices"

	"github.com/llm-prober/llm-prober/collector"
)

// Metrics chooses which of a probe's metric families it exports, for
// users who want fewer series than the default budget
// (docs/metrics.md, "Series per probe"). Set at the top level, per
// target or per probe; the nearest one set applies whole (a probe's
// metrics: {disable: []} exports everything whatever its target says).
type Metrics struct {
	// Disable names the families not exported (collector.MetricFamilies:
	// phases, schedule_lag, ...); a family not exported costs nothing.
	Disable []string `yaml:"disable"`
}

// DisabledMetrics is the families the probe does not export, after the
// target's and the top level's metrics: were applied.
func (p *Probe) DisabledMetrics() []string {
	if p.Metrics == nil {
		return nil
	}
	return slices.Clone(p.Metrics.Disable)
}

// validateMetrics checks a metrics: block at path (nil: not set there).
func validateMetrics(d *decoder, path string, m *Metrics) {
	if m == nil {
		return
	}
	for i, name := range m.Disable {
		p := fmt.Sprintf("%s.disable[%d]", path, i)
		if err := collector.CheckMetricFamily(name); err != nil {
			d.at(p, "%v", err)
		} else if j := slices.Index(m.Disable, name); j < i {
			d.at(p, "%s is listed twice (also disable[%d]); list each family once", name, j)
		}
	}
}
