package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/llm-prober/llm-prober/internal/display"
)

// The server's load as it reported it in the answer: an ORCA load report
// (the xDS OrcaLoadReport, cncf/xds xds/data/orca/v3/orca_load_report.proto)
// in the endpoint-load-metrics response header, which vLLM sends when the
// request carries endpoint-load-metrics-format: text or json
// (vllm/entrypoints/openai/orca_metrics.py @08408b8). vLLM samples its
// own gauges (vllm:num_requests_waiting, vllm:kv_cache_usage_perc) while
// building the answer, so the report is the server's load at the moment
// of this request, with no scrape. It is untrusted input: bounded, and a
// bad report is dropped with a reason, never failing the probe.

// Header names of the ORCA exchange.
const (
	HeaderLoadMetricsFormat = "endpoint-load-metrics-format"
	HeaderLoadMetrics       = "endpoint-load-metrics"
)

// Bounds on a load report.
const (
	// MaxServerLoadHeaderBytes caps the header read; vLLM's is under 100
	// bytes.
	MaxServerLoadHeaderBytes = 4096
	// MaxServerLoadMetrics caps the metrics one report may carry; vLLM
	// sends two.
	MaxServerLoadMetrics = 64
	// maxServerLoadCount bounds a queue length: beyond it the number is
	// not a count of requests.
	maxServerLoadCount = 1e9
	// maxServerLoadErrBytes bounds ServerLoad.Err's text.
	maxServerLoadErrBytes = 256
)

// The named metrics the prober reads (named_metrics.<name> in the text
// form, named_metrics: {<name>: …} in JSON); every other one is ignored.
const (
	loadWaiting = "num_requests_waiting"
	loadRunning = "num_requests_running"
	loadKVCache = "kv_cache_usage_perc"
)

// ServerLoad is the load report of one answer. A value the report did
// not carry has its Has* false: vLLM @08408b8 sends waiting and KV cache
// usage, not running.
type ServerLoad struct {
	// Waiting and Running are requests queued and being processed.
	Waiting, Running float64
	// KVCacheUsage is the fraction of the KV cache in use, 0 to 1 (vLLM's
	// kv_cache_usage_perc is a fraction despite its name).
	KVCacheUsage                       float64
	HasWaiting, HasRunning, HasKVCache bool
	// Err says why the report, or a part of it, could not be used; the
	// values that could be read are kept. Nil for a clean report.
	Err error
}

// Present reports whether the report carried any usable value.
func (l *ServerLoad) Present() bool {
	return l != nil && (l.HasWaiting || l.HasRunning || l.HasKVCache)
}

// LogDetails logs at debug level what a result's one "Probe done" line
// leaves out: the first attempt of a retried request, with its error (a
// retry of reason other says nothing else of what failed), and the
// server's load report. The error was redacted when recorded.
func LogDetails(logger *slog.Logger, r *Result) {
	if rt := r.Retry; rt != nil {
		logger.Debug("Sent again on a new connection: the pooled one failed before any answer",
			"request_id", r.RequestID, "retry_reason", rt.Reason, "retry_err", rt.ErrText())
	}
	if l := r.ServerLoad; l != nil {
		args := []any{"request_id", r.RequestID, "load", ServerLoadSummary(l)}
		if l.Err != nil {
			args = append(args, "err", l.Err)
		}
		logger.Debug("Server load reported with the answer", args...)
	}
}

// serverLoadOf reads the load report of an answer's head; nil when it
// carried none.
func serverLoadOf(h http.Header) *ServerLoad {
	vs := h.Values(HeaderLoadMetrics)
	if len(vs) == 0 {
		return nil
	}
	l := ParseServerLoad(vs[0])
	if len(vs) > 1 && l.Err == nil {
		l.Err = fmt.Errorf("%s: the answer carried %d of these headers; read the first", HeaderLoadMetrics, len(vs))
	}
	return l
}

// ParseServerLoad parses one endpoint-load-metrics header value: "TEXT "
// followed by comma-separated key=value pairs, or "JSON " followed by an
// OrcaLoadReport object. A value without the prefix is read as JSON when
// it starts with '{', else as text (some servers omit the prefix). It
// never fails: what could not be used is named in the result's Err.
func ParseServerLoad(v string) *ServerLoad {
	l := &ServerLoad{}
	if len(v) > MaxServerLoadHeaderBytes {
		l.Err = fmt.Errorf("%s: %d bytes, over the %d-byte limit; ignored", HeaderLoadMetrics, len(v), MaxServerLoadHeaderBytes)
		return l
	}
	v = strings.TrimSpace(v)
	body, isJSON := v, strings.HasPrefix(v, "{")
	f, rest, _ := strings.Cut(v, " ")
	switch strings.ToUpper(f) {
	case "TEXT":
		body, isJSON = rest, false
	case "JSON":
		body, isJSON = rest, true
	}
	var err error
	if isJSON {
		err = l.parseJSON(body)
	} else {
		err = l.parseText(body)
	}
	if err != nil {
		l.Err = fmt.Errorf("%s: %s", HeaderLoadMetrics, display.Cut(err.Error(), maxServerLoadErrBytes))
	}
	return l
}

// parseText reads "a=1, named_metrics.b=2": the map fields of the report
// are flattened into the top level as <map>.<key>.
func (l *ServerLoad) parseText(s string) error {
	var errs []error
	for i, pair := range strings.Split(s, ",") {
		if i == MaxServerLoadMetrics {
			errs = append(errs, fmt.Errorf("more than %d metrics; read the first %d", MaxServerLoadMetrics, MaxServerLoadMetrics))
			break
		}
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		key, val, ok := strings.Cut(pair, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q is not key=value", clipValue(pair)))
			continue
		}
		name, named := strings.CutPrefix(strings.TrimSpace(key), "named_metrics.")
		if !named || !known(name) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a number", name, clipValue(val)))
			continue
		}
		if err := l.set(name, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parseJSON reads {"named_metrics": {"b": 2}, …}; other fields of the
// report (cpu_utilization, …) are ignored.
func (l *ServerLoad) parseJSON(s string) error {
	var report struct {
		NamedMetrics map[string]json.RawMessage `json:"named_metrics"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&report); err != nil {
		// Python's json.dumps writes NaN and Infinity, which are not JSON.
		return fmt.Errorf("not a JSON load report: %v", err)
	}
	if len(report.NamedMetrics) > MaxServerLoadMetrics {
		return fmt.Errorf("%d named metrics, over the limit of %d; ignored", len(report.NamedMetrics), MaxServerLoadMetrics)
	}
	var errs []error
	// Map order is random: set the names in a fixed order, so that the
	// same report always gives the same Err.
	for _, name := range []string{loadWaiting, loadRunning, loadKVCache} {
		raw, ok := report.NamedMetrics[name]
		if !ok {
			continue
		}
		var f float64
		if err := json.Unmarshal(bytes.TrimSpace(raw), &f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a number", name, clipValue(string(raw))))
			continue
		}
		if err := l.set(name, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func known(name string) bool {
	return name == loadWaiting || name == loadRunning || name == loadKVCache
}

// set keeps one value after checking it is plausible for its metric.
func (l *ServerLoad) set(name string, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return fmt.Errorf("%s: %v is not a finite non-negative number", name, f)
	}
	switch name {
	case loadKVCache:
		if f > 1 {
			return fmt.Errorf("%s: %v is over 1; it is a fraction of the KV cache", name, f)
		}
		l.KVCacheUsage, l.HasKVCache = f, true
	case loadWaiting, loadRunning:
		if f > maxServerLoadCount {
			return fmt.Errorf("%s: %v is not a plausible number of requests", name, f)
		}
		if name == loadWaiting {
			l.Waiting, l.HasWaiting = f, true
		} else {
			l.Running, l.HasRunning = f, true
		}
	}
	return nil
}

// clipValue bounds a piece of the header quoted in an error.
func clipValue(s string) string {
	return display.Cut(strings.TrimSpace(s), 32)
}
