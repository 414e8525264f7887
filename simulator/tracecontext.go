package simulator

// The simulator keeps the W3C trace id each request arrived with in its
// ground truth, as a tracing server would record the span, so tests can
// join a prober's exemplar (which carries the trace id) to the server's
// view of the same request.

// headerTraceParent is W3C Trace Context's header (and gRPC metadata key).
const headerTraceParent = "traceparent"

// traceIDOf is the trace id of a version-00 traceparent value; "" when v
// is not one. Only a well-formed value is recorded, so a test that finds
// the id has checked the header's shape too.
func traceIDOf(v string) string {
	if len(v) != 55 || v[:3] != "00-" || v[35] != '-' || v[52] != '-' {
		return ""
	}
	if !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:]) ||
		allZero(v[3:35]) || allZero(v[36:52]) {
		return ""
	}
	return v[3:35]
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
