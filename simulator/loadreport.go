package simulator

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// The ORCA load report vLLM adds to an answer when the request asks for
// one (vllm/entrypoints/openai/orca_metrics.py @08408b8, and its callers
// in api_server.py): request header endpoint-load-metrics-format text or
// json (any case), response header endpoint-load-metrics. vLLM V1 reads
// the values from its own Prometheus gauges, vllm:num_requests_waiting
// then vllm:kv_cache_usage_perc (registration order), as Python floats;
// it sends no running count. It adds the header only to a complete
// non-streamed answer: a StreamingResponse, and an error, carry none.

const (
	headerLoadMetricsFormat = "endpoint-load-metrics-format"
	headerLoadMetrics       = "endpoint-load-metrics"
)

// LoadReportRecord is the load report the simulator sent with an answer:
// its engine's state at that moment, the ground truth a probe's reading
// is checked against.
type LoadReportRecord struct {
	Format string `json:"format"`
	// Waiting and Running are the engine's queue and batch; Running is
	// not in the header (vLLM sends none) but recorded for tests.
	Waiting      int     `json:"waiting"`
	Running      int     `json:"running"`
	KVCacheUsage float64 `json:"kv_cache_usage"`
	Header       string  `json:"header"`
}

// loadReporter is a front end that can add a load report to a complete
// non-streamed answer.
type loadReporter interface {
	reportLoad(h http.Header)
}

// reportLoad adds vLLM's header when the request asked for it; not as
// llama.cpp, which has none.
func (f *openAIFrontEnd) reportLoad(h http.Header) {
	if f.llamacpp || f.loadFormat == "" {
		return
	}
	st := f.j.s.engine.state()
	v, ok := orcaHeader(f.loadFormat, st)
	if !ok {
		return
	}
	h.Set(headerLoadMetrics, v)
	f.j.entry.update(func(r *RequestRecord) {
		r.LoadReport = &LoadReportRecord{Format: strings.ToLower(f.loadFormat), Waiting: st.waiting, Running: st.running, KVCacheUsage: st.kvUsage, Header: v}
	})
}

// orcaHeader is create_orca_header's value for st; false for a format
// vLLM does not know (it then sends no header).
func orcaHeader(format string, st engineState) (string, bool) {
	named := []struct {
		name string
		v    float64
	}{{"num_requests_waiting", float64(st.waiting)}, {"kv_cache_usage_perc", st.kvUsage}}
	switch strings.ToLower(format) {
	case "text":
		parts := make([]string, len(named))
		for i, m := range named {
			parts[i] = "named_metrics." + m.name + "=" + pyFloat(m.v)
		}
		return "TEXT " + strings.Join(parts, ", "), true
	case "json":
		// json.dumps' default separators, ", " and ": ".
		var b strings.Builder
		b.WriteString(`JSON {"named_metrics": {`)
		for i, m := range named {
			if i > 0 {
				b.WriteString(", ")
			}
			name, _ := json.Marshal(m.name)
			b.Write(name)
			b.WriteString(": ")
			b.WriteString(pyFloat(m.v))
		}
		b.WriteString("}}")
		return b.String(), true
	}
	return "", false
}

// pyFloat formats v as Python's repr(float) does: the shortest digits
// that read back as v, always with a point or an exponent ("3.0",
// "0.42", "1e-05", "1e+16").
func pyFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
