package simulator

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// addSpecDecode registers vLLM's speculative-decoding counters
// (vllm/v1/spec_decode/metrics.py, SpecDecodingProm: registered only when
// vLLM runs with a speculative config) when mc asks for draft tokens.
func (m *serverMetrics) addSpecDecode(reg prometheus.Registerer, model string, mc MetricsConfig) {
	if mc.SpecDecodeTokens <= 0 {
		return
	}
	labelNames := []string{"model_name", "engine"}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labelNames)
		reg.MustRegister(c)
		return c.WithLabelValues(model, "0")
	}
	m.specDrafts = counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.")
	m.specDraft = counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.")
	m.specAccepted = counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.")
	m.specTokens, m.specAcceptance = mc.SpecDecodeTokens, mc.SpecDecodeAcceptance
}

// observeSpecDecode counts one decode step's draft tokens and the accepted
// part of them. Accepted tokens are whole: carry is the fraction a request
// has not yet counted, returned for its next step, so the counters' ratio
// over many steps is the configured acceptance.
func (m *serverMetrics) observeSpecDecode(carry float64) float64 {
	if m.specDraft == nil {
		return carry
	}
	m.specDrafts.Inc()
	m.specDraft.Add(float64(m.specTokens))
	carry += float64(m.specTokens) * m.specAcceptance
	whole := math.Floor(carry)
	if whole > 0 {
		m.specAccepted.Add(whole)
	}
	return carry - whole
}
