package probe

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestTLSCertExpiry: an https probe reports its server certificate's
// expiry on a new and on a pooled connection; plain HTTP reports none.
func TestTLSCertExpiry(t *testing.T) {
	h := sseHandler(ev(chatDelta("hi")), ev(chatFinish("stop")), ev("[DONE]"))
	ts := httptest.NewTLSServer(h)
	t.Cleanup(ts.Close)
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.TLS.InsecureSkipVerify = true })
	want := ts.Certificate().NotAfter
	for i, wantReused := range []bool{false, true} {
		r := probeOnce(t, d, streamReq(), 5*time.Second)
		wantOutcome(t, r, OutcomeSuccess, "")
		if r.Phases.ConnectionReused != wantReused {
			t.Fatalf("probe %d: reused %v, want %v", i, r.Phases.ConnectionReused, wantReused)
		}
		if !r.TLSCertExpiry.Equal(want) {
			t.Errorf("probe %d: expiry %v, want %v", i, r.TLSCertExpiry, want)
		}
	}
	plain := startServer(t, h)
	d, _ = newDriver(t, ProtocolOpenAIChat, plain.URL, nil)
	if r := probeOnce(t, d, streamReq(), 5*time.Second); !r.TLSCertExpiry.IsZero() {
		t.Errorf("plain HTTP probe has a certificate expiry %v", r.TLSCertExpiry)
	}
}
