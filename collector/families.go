package collector

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The series budget of a probe (docs/metrics.md, "Series per probe").
// Classic buckets cost a series per boundary on every probe, so only the
// histogram whose buckets an alert or a recording rule reads keeps them:
// TTFT (the regression alert, the p95 and fleet-outlier rules, with the
// SLO threshold as a boundary). The other histograms are "summary
// histograms": a native histogram where the form has one, and in the
// classic form only their _sum and _count (a summary without quantiles),
// which is what the dashboards' mean fallback reads. Families that only
// some users want can be switched off per probe (metrics: disable).

// Families of a probe's series that metrics: disable can switch off
// (MetricFamilies). The SLO counters, outcomes and TTFT are not among
// them: the alerts and the SLO rules read them.
const (
	FamilyPhases             = "phases"
	FamilyScheduleLag        = "schedule_lag"
	FamilyTokensPerSecond    = "tokens_per_second"
	FamilyInterTokenLatency  = "inter_token_latency"
	FamilyTimePerOutputToken = "time_per_output_token"
	FamilyRequestDuration    = "request_duration"
	FamilyInFlight           = "in_flight"
)

// MetricFamilies lists the families metrics: disable accepts, with the
// metric each one names.
func MetricFamilies() map[string]string {
	return map[string]string{
		FamilyPhases:             "llm_probe_phase_duration_seconds",
		FamilyScheduleLag:        "llm_probe_schedule_lag_seconds",
		FamilyTokensPerSecond:    "llm_probe_output_tokens_per_second",
		FamilyInterTokenLatency:  "llm_probe_inter_token_latency_seconds",
		FamilyTimePerOutputToken: "llm_probe_time_per_output_token_seconds",
		FamilyRequestDuration:    "llm_probe_request_duration_seconds",
		FamilyInFlight:           "llm_probe_in_flight_requests",
	}
}

// familyNames is MetricFamilies' keys in a fixed order: a family's bit
// in a familySet is its index here.
func familyNames() []string {
	return []string{FamilyPhases, FamilyScheduleLag, FamilyTokensPerSecond, FamilyInterTokenLatency,
		FamilyTimePerOutputToken, FamilyRequestDuration, FamilyInFlight}
}

// CheckMetricFamily is nil when name is a family metrics: disable
// accepts, else an error that lists them.
func CheckMetricFamily(name string) error {
	if slices.Contains(familyNames(), name) {
		return nil
	}
	names := familyNames()
	slices.Sort(names)
	return fmt.Errorf("unknown metric family %q: want one of %s", name, strings.Join(names, ", "))
}

// familySet is a set of families, one bit per familyNames index; a
// comparable value, so a reload can tell whether a probe's set changed.
type familySet uint16

// newFamilySet is the set of the named families; unknown names, which
// the config has refused, are ignored.
func newFamilySet(names []string) familySet {
	var set familySet
	for _, n := range names {
		if i := slices.Index(familyNames(), n); i >= 0 {
			set |= 1 << i
		}
	}
	return set
}

func (f familySet) has(name string) bool {
	i := slices.Index(familyNames(), name)
	return i >= 0 && f&(1<<i) != 0
}

// newSummaryHistogram builds a histogram without classic buckets: the
// native histogram where form has one, and in the classic form only the
// +Inf bucket, _sum and _count. A summary without quantiles would save
// the +Inf series, but a metric family must have one type in a scrape,
// and probes of one prober may differ in form (config.HistogramMixWarning).
func newSummaryHistogram(name, form string) prometheus.Histogram {
	if form == HistogramsClassic {
		return newHistogram(name, []float64{math.Inf(1)}, HistogramsClassic)
	}
	return newHistogram(name, nil, HistogramsNative)
}

// observe observes v in h unless the family of h is switched off (nil).
func observe(h prometheus.Observer, v float64) {
	if h != nil {
		h.Observe(v)
	}
}
