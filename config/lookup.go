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
	if probeName == "" {
		return target, target.Probes[0], nil
	}
	for _, p := range target.Probes {
		if p.Name == probeName {
			return target, p, nil
		}
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
