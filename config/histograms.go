package config

import (
	"fmt"
	"slices"
	"strings"
)

// HistogramMixWarning is a warning when the probe histograms of one
// prober come in more than one form (targets' or modules' histograms:
// differ), "" when they do not.
//
// A mix is warned about, not refused: every series carries its own form
// in the exposition, and Prometheus 3.x, or 2.x without native
// histograms, stores each series as it comes, so a mix can be what a
// 3.x user wants (one target's history native, another's classic, while
// migrating). But Prometheus 2.x with --enable-feature=native-histograms
// takes the form of a metric family from its first series, and stores
// the targets behind it in the wrong form; the prober cannot know which
// Prometheus scrapes it.
func (c *Config) HistogramMixWarning() string {
	users := map[string][]string{}
	for _, t := range c.Targets {
		users[t.Histograms] = append(users[t.Histograms], "target "+t.Name)
	}
	for _, name := range sortedModules(c.Modules) {
		form := c.Modules[name].Histograms
		users[form] = append(users[form], "module "+name)
	}
	if len(users) < 2 {
		return ""
	}
	forms := make([]string, 0, len(users))
	for form, who := range users {
		forms = append(forms, form+": "+strings.Join(who, ", "))
	}
	slices.Sort(forms)
	return fmt.Sprintf("probe histograms in %d forms (%s): Prometheus 2.x with --enable-feature=native-histograms stores a metric family in the form of its first series, and so some of these targets' histograms in the wrong one (Prometheus 3.x is not affected); unless only Prometheus 3.x scrapes this prober, set histograms: once at the top level (docs/metrics.md 1.6)",
		len(users), strings.Join(forms, "; "))
}
