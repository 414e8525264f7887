package collector

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// Requests sent a second time because their pooled connection failed
// before the answer's first byte (probe.Result.Retry). A counter per
// reason, created at its first retry: most servers never close a kept-alive
// connection under a request, and most probes never export one.

func newRetryDesc(base []string) *prometheus.Desc {
	return prometheus.NewDesc("llm_probe_connection_retries_total",
		"Requests sent a second time, on a new connection, because the pooled connection they were first written to failed before the answer's first byte (the server had closed it), by how the first attempt failed. The retry's timings are the ones measured.",
		append(slices.Clone(base), "reason"), nil)
}

// numRetryReasons is len(probe.RetryReasons()).
const numRetryReasons = 4

// countRetry counts one retry of reason (an unknown reason as "other").
func (s *series) countRetry(reason string) {
	reasons := probe.RetryReasons()
	i := slices.Index(reasons, reason)
	if i < 0 {
		i = slices.Index(reasons, probe.RetryOther)
	}
	s.countReason(&s.retries[i], s.d.retry, "reason", reasons[i])
}
