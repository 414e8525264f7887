package probe

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/): every probe
// sends a traceparent header, so a server that traces incoming requests
// (vLLM's OpenTelemetry tracing, TGI, Triton) records the probe under a
// trace id the prober knows. The trace id is the probe's request id (16
// random bytes in hex, exactly a trace id's shape), so the id in the
// histograms' exemplars, the X-Request-Id header, the server's logs and
// its traces are one value. Each request is its own trace: the prober is
// the root, and the sampled flag asks the server to keep it.

// traceParentHeader is the header's canonical form; http.Header.Set
// would canonicalise "traceparent" to it on every request.
const traceParentHeader = "Traceparent"

// traceFlagsSampled is the only flag W3C version 00 defines.
const traceFlagsSampled = "01"

// traceParent is the traceparent value for a request with id, and the
// span id it names (the probe's client span). An id that is not a valid
// trace id (a caller's own, not 32 lowercase hex digits, or all zeros)
// gets a fresh random trace id instead.
func traceParent(id string) (header, traceID, spanID string) {
	traceID = id
	if !ValidTraceID(id) {
		traceID = newRequestID()
	}
	var s [8]byte
	for {
		_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
		if s != [8]byte{} {    // an all-zero span id is invalid
			break
		}
	}
	spanID = hex.EncodeToString(s[:])
	return "00-" + traceID + "-" + spanID + "-" + traceFlagsSampled, traceID, spanID
}

// ValidTraceID reports whether id is a valid W3C trace id: 32 lowercase
// hex digits, not all zero.
func ValidTraceID(id string) bool {
	return validHexID(id, 32)
}

func validHexID(id string, n int) bool {
	if len(id) != n {
		return false
	}
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isLowerHex(c) {
			return false
		}
		zero = zero && c == '0'
	}
	return !zero
}

// ParseTraceParent returns the trace and parent (span) ids of a
// traceparent value, ok false when it is not one a version-00 sender
// writes. Servers, the simulator among them, read it to join their
// records to the prober's.
func ParseTraceParent(v string) (traceID, spanID string, ok bool) {
	// 00-<32 hex>-<16 hex>-<2 hex>
	if len(v) != 55 || v[:3] != "00-" || v[35] != '-' || v[52] != '-' {
		return "", "", false
	}
	traceID, spanID = v[3:35], v[36:52]
	if !validHexID(traceID, 32) || !validHexID(spanID, 16) {
		return "", "", false
	}
	if !isLowerHex(v[53]) || !isLowerHex(v[54]) {
		return "", "", false
	}
	return traceID, spanID, true
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// setTraceParent puts r's trace context on an outgoing HTTP request,
// creating it on the first attempt; a retried attempt carries the same
// one, as it is the same logical request.
func (r *Result) setTraceParent(h http.Header) {
	if r.traceParent == "" {
		r.traceParent, r.TraceID, r.SpanID = traceParent(r.RequestID)
	}
	h[traceParentHeader] = []string{r.traceParent}
}

// grpcTraceParent is r's traceparent for gRPC metadata.
func (r *Result) grpcTraceParent() string {
	if r.traceParent == "" {
		r.traceParent, r.TraceID, r.SpanID = traceParent(r.RequestID)
	}
	return r.traceParent
}
