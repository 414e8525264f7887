package collector

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// The server's own timings of a probe request (probe.Result.ServerTimings:
// llama.cpp's timings object, Ollama's *_duration fields, TGI's x-*-time
// headers) as histograms beside the prober's, one per phase, the phase
// being the server's own name for the timing. Like the connection phases,
// a phase's histogram is created on its first observation, so a target
// whose server reports nothing exports nothing. docs/metrics.md §1.8 says
// how each differs from the prober's measurement of the same stretch.

// serverTimingPhases is the bounded set of phases exported: the names the
// drivers give (probe.ServerTiming). Another name is not exported, so a
// driver cannot mint label values.
var serverTimingPhases = [...]string{
	// llama.cpp (OpenAI-compatible routes): timings.prompt_ms, predicted_ms.
	"prompt", "predicted",
	// Ollama: load_duration, prompt_eval_duration, eval_duration,
	// total_duration ("total" is TGI's x-total-time as well).
	"load", "prompt_eval", "eval", "total",
	// TGI's /generate headers.
	"validation", "queue", "inference", "time_per_token",
}

const numServerTimingPhases = len(serverTimingPhases)

func serverTimingPhase(name string) int {
	for i, p := range serverTimingPhases {
		if p == name {
			return i
		}
	}
	return -1
}

// maxServerTiming: a timing over an hour is absurd for one probe request
// and is counted invalid rather than observed.
const maxServerTiming = time.Hour

// serverTimingBuckets are the TTFT buckets (OTel's
// gen_ai.server.time_to_first_token) continued to five minutes: prompt
// phases compare with TTFT bucket by bucket, and a model load or a whole
// request's total fits. Per-token phases use the TPOT buckets instead.
func serverTimingBuckets() []float64 {
	return append(ttftBuckets(), 60, 300)
}

func serverTimingPhaseBuckets(phase string) []float64 {
	if phase == "time_per_token" {
		return tpotBuckets()
	}
	return serverTimingBuckets()
}

func newServerTimingDescs(base []string) (timing, invalid *prometheus.Desc) {
	timing = prometheus.NewDesc("llm_probe_server_reported_seconds",
		"Duration of a part of the probe request as the server itself reported it (llama.cpp's timings, Ollama's *_duration fields, TGI's x-*-time headers), by the server's own name for it, for successful requests. The server's clock, beside the prober's, never in place of it.",
		append(slices.Clone(base), "phase"), nil)
	invalid = prometheus.NewDesc("llm_probe_server_timing_invalid_total",
		"Timings a server announced for successful probe requests that could not be used, and so were not observed: missing from its timings object, null, not a number, negative or over an hour.",
		base, nil)
	return timing, invalid
}

// observeServerTimings records the server's timings of a successful
// request; unusable ones are counted, never observed.
func (s *series) observeServerTimings(r *probe.Result, ok bool) {
	if !ok {
		return
	}
	invalid := max(r.ServerTimingsInvalid, 0)
	for _, st := range r.ServerTimings {
		i := serverTimingPhase(st.Name)
		switch {
		case i < 0:
			continue
		case st.Duration < 0 || st.Duration > maxServerTiming:
			invalid++
			continue
		}
		p := s.serverTimings[i].get(func() *phaseHistogram {
			return s.newPhaseHistogram(s.d.serverTiming, serverTimingPhases[i],
				s.histogram("server_timing", serverTimingPhaseBuckets(serverTimingPhases[i])))
		})
		p.h.Observe(st.Duration.Seconds())
	}
	if invalid == 0 {
		return
	}
	c := s.serverTimingInvalid.get(func() *counter { return s.lateCounter(s.d.serverTimingInvalid) })
	c.Add(float64(invalid))
}

func (s *series) collectServerTimings(ch chan<- prometheus.Metric) {
	for i := range s.serverTimings {
		if p := s.serverTimings[i].load(); p != nil {
			ch <- p.w
		}
	}
	if c := s.serverTimingInvalid.load(); c != nil {
		ch <- c
	}
}

// serverTimingSeries are a series' server-timing metrics, created on
// first use.
type serverTimingSeries struct {
	serverTimings [numServerTimingPhases]lazy[phaseHistogram]
	// serverTimingInvalid is exported once first incremented.
	serverTimingInvalid lazy[counter]
}
