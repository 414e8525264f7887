package collector

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// Token counts a server reported that the probe dropped as implausible
// (probe.Result.UsageInvalid: over 2^24, over max_tokens × 4 per choice,
// over 65,536 per chunk received, or over 10^8 tokens/s), by field. A
// counter per field, created with its first drop: an honest server never
// exports one, and the token counters never saw the value.

func newUsageInvalidDesc(base []string) *prometheus.Desc {
	return prometheus.NewDesc("llm_probe_server_usage_invalid_total",
		"Token counts a server reported for a probe request that were implausible for what arrived (over 2^24, over max_tokens x 4 per choice, over 65536 per chunk received, or over 1e8 tokens/s) and so were not counted, by field; a dropped output count is replaced by the chunks counted.",
		append(slices.Clone(base), "field"), nil)
}

// numUsageFields is len(probe.UsageFields()).
const numUsageFields = 4

// countUsageInvalid counts the fields of r's usage the probe dropped; a
// field outside probe.UsageFields() (a driver bug) is not exported, so a
// driver cannot mint label values.
func (s *series) countUsageInvalid(r *probe.Result) {
	fields := probe.UsageFields()
	for _, f := range r.UsageInvalid {
		i := slices.Index(fields, f)
		if i < 0 {
			continue
		}
		s.countReason(&s.usageInvalid[i], s.d.usageInvalid, "field", fields[i])
	}
}

// usageSeries are a series' usage-invalid counters, created on first use.
type usageSeries struct {
	usageInvalid [numUsageFields]lazy[counter]
}
