package probe

import (
	"net/http"
	"strings"
	"testing"
)

func TestTraceParent(t *testing.T) {
	id := newRequestID()
	h, tid, sid := traceParent(id)
	if tid != id || len(sid) != 16 || h != "00-"+id+"-"+sid+"-01" {
		t.Fatalf("traceParent(%s) = %q %q %q", id, h, tid, sid)
	}
	if gt, gs, ok := ParseTraceParent(h); !ok || gt != tid || gs != sid {
		t.Fatalf("ParseTraceParent(%q) = %q %q %t", h, gt, gs, ok)
	}
	// A caller's own id that is no trace id gets a fresh one.
	if _, tid, _ := traceParent("probe-1"); tid == "probe-1" || !ValidTraceID(tid) {
		t.Fatalf("non-hex id became trace id %q", tid)
	}
	r := &Result{RequestID: id}
	hdr := http.Header{}
	r.setTraceParent(hdr)
	first := hdr.Get("traceparent")
	r.setTraceParent(hdr) // a retried attempt: same context
	if hdr.Get("traceparent") != first || r.TraceID != id {
		t.Fatalf("retry changed the trace context: %q then %q", first, hdr.Get("traceparent"))
	}
}

func FuzzParseTraceParent(f *testing.F) {
	for _, s := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "", "00-",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tid, sid, ok := ParseTraceParent(v)
		if !ok {
			return
		}
		if !ValidTraceID(tid) || !validHexID(sid, 16) || !strings.Contains(v, tid) {
			t.Fatalf("accepted %q as trace %q span %q", v, tid, sid)
		}
	})
}
