package probe

import (
	"context"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"
)

// On a pooled HTTP/1.x connection Start is taken when the request's write
// begins, after the connection was handed over; on a new connection it
// is taken before the connection is looked for, so that connection setup
// stays inside TTFT.
func TestStartAtWriteOnPooledConnection(t *testing.T) {
	ts := startServer(t, sseHandler(ev(chatDelta("a")), ev(chatFinish("stop")), ev("[DONE]")))
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	for i, wantReused := range []bool{false, true, true} {
		var mu sync.Mutex
		var getConn, gotConn time.Time
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GetConn: func(string) { mu.Lock(); getConn = time.Now(); mu.Unlock() },
			GotConn: func(info httptrace.GotConnInfo) {
				mu.Lock()
				gotConn, reused = time.Now(), info.Reused
				mu.Unlock()
			},
		})
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r := d.Probe(ctx, streamReq())
		cancel()
		wantOutcome(t, r, OutcomeSuccess, "")
		mu.Lock()
		if reused != wantReused || r.Phases.ConnectionReused != wantReused {
			t.Fatalf("request %d: reused %v (phases %v), want %v", i, reused, r.Phases.ConnectionReused, wantReused)
		}
		if wantReused && !r.Start.After(gotConn) {
			t.Errorf("request %d on a pooled connection: Start %v is not after GotConn %v", i, r.Start, gotConn)
		}
		if !wantReused && !r.Start.Before(getConn) {
			t.Errorf("request %d on a new connection: Start %v is not before GetConn %v", i, r.Start, getConn)
		}
		mu.Unlock()
		if r.TTFT <= 0 || r.EndToEnd < r.TTFT {
			t.Errorf("request %d: TTFT %v, end to end %v", i, r.TTFT, r.EndToEnd)
		}
	}
}
