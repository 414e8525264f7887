package config

import "fmt"

// Lookup finds the named probe of the named target, or the target's first
// probe when probeName is empty.
func (c *Config) Lookup(targetName, probeName string) (*Target, *Probe, error) {
	var target *Target
	for _, t := range c.Targets {
		if t.Name == targetName {
			target = t
		}
	}
	if target == nil {
		return nil, nil, fmt.Errorf("no target %q in the configuration", targetName)
	}
	if len(target.Probes) == 0 {
		// An expanded target whose server has listed no model yet.
		return nil, nil, fmt.Errorf("target %q has no probes (yet)", targetName)
	}
	if probeName == "" && (target.DiscoverModels == nil || target.Probes[0].Model != "") {
		return target, target.Probes[0], nil
	}
	for _, p := range target.Probes {
		if p.Name == probeName {
			if target.DiscoverModels != nil && p.Model == "" {
				break // a template: it needs a model
			}
			return target, p, nil
		}
	}
	if p, ok := target.discoveredProbe(probeName); ok {
		return target, p, nil
	}
	if target.DiscoverModels != nil {
		return nil, nil, fmt.Errorf("target %q discovers its models: name a probe as <template>@<model>, e.g. %s", targetName,
			DiscoveredProbeName(target.Probes[0].Name, "<model>"))
	}
	return nil, nil, fmt.Errorf("target %q has no probe %q", targetName, probeName)
}

// ProbeCount is how many probes the configuration runs.
func (c *Config) ProbeCount() int {
	n := 0
	for _, t := range c.Targets {
		n += len(t.Probes)
	}
	return n
}
