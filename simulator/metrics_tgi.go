package simulator

import (
	"github.com/prometheus/client_golang/prometheus"
)

// newTGIMetrics uses text-generation-inference's router names. TGI labels
// nothing with the model (one router serves one model). Counters keep TGI's
// registered names without a _total suffix.
func newTGIMetrics(reg prometheus.Registerer, e *engine, maxModelLen int) *serverMetrics {
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	// TGI's duration buckets: 35 geometric steps of 1.5 from 0.1 ms.
	durations := prometheus.ExponentialBuckets(0.00015, 1.5, 35)
	// Token buckets: 100 linear steps up to the model's length.
	step := max(float64(maxModelLen)/100, 1)
	tokens := prometheus.LinearBuckets(step, step, 100)

	requests := counter("tgi_request_count", "Total number of requests")
	success := counter("tgi_request_success", "Number of successful requests")
	failure := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tgi_request_failure", Help: "Number of failed requests",
	}, []string{"err"})
	reg.MustRegister(failure)

	m := &serverMetrics{
		ttft:                 sink{},
		itl:                  sink{},
		reqTPOT:              hist("tgi_request_mean_time_per_token_duration", "Mean time per token per request", durations),
		e2e:                  hist("tgi_request_duration", "Request duration", durations),
		queue:                hist("tgi_request_queue_duration", "Time spent in the queue per request", durations),
		prefill:              sink{},
		decode:               sink{},
		inference:            hist("tgi_request_inference_duration", "Request inference duration", durations),
		promptTokensHist:     hist("tgi_request_input_length", "Input token length per request", tokens),
		generationTokensHist: hist("tgi_request_generated_tokens", "Generated tokens per request", tokens),
		promptTokens:         sinkCounter(),
		generationTokens:     sinkCounter(),
	}
	m.onFinish = func(reason string) {
		requests.Inc()
		switch reason {
		case finishAbort:
			failure.WithLabelValues("incomplete").Inc()
		case finishError:
			failure.WithLabelValues("generation").Inc()
		default:
			success.Inc()
		}
	}

	g := &gaugeSet{e: e}
	capacity := float64(e.sched.KVCacheCapacityTokens)
	g.add(prometheus.NewDesc("tgi_queue_size", "Current queue size", nil, nil),
		func(st engineState) float64 { return float64(st.waiting) })
	g.add(prometheus.NewDesc("tgi_batch_current_size", "Current batch size", nil, nil),
		func(st engineState) float64 { return float64(st.running) })
	g.add(prometheus.NewDesc("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", nil, nil),
		func(st engineState) float64 { return kvUsedTokens(e, st) })
	g.add(prometheus.NewDesc("tgi_batch_max_total_tokens", "Maximum amount of tokens in total", nil, nil),
		func(engineState) float64 { return capacity })
	reg.MustRegister(g)
	return m
}
