package simulator

import (
	"testing"
	"time"
)

// TestFirstTokenWriteTime: the first output chunk's write-start time lies
// between the request being read and the first token's flush, and the
// client cannot have read that chunk before it.
func TestFirstTokenWriteTime(t *testing.T) {
	ts := startServer(t, fastConfig())
	resp := ts.post(t, "/v1/chat/completions", chatBody(3, map[string]any{"ignore_eos": true}), "X-Request-Id", "gt-write")
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := ts.truth(t, "gt-write")
	if r.FirstTokenWriteUnixNano < r.ReceivedUnixNano || r.FirstTokenWriteUnixNano > r.FirstTokenUnixNano {
		t.Fatalf("received %d, first token write %d, flushed %d: out of order", r.ReceivedUnixNano, r.FirstTokenWriteUnixNano, r.FirstTokenUnixNano)
	}
	// evs[0] is the role chunk, evs[1] the first content.
	if len(evs) < 2 || evs[1].at.UnixNano() < r.FirstTokenWriteUnixNano {
		t.Fatalf("client read the first token before its write began (%d events)", len(evs))
	}
	if d := time.Duration(r.FirstTokenUnixNano - r.FirstTokenWriteUnixNano); d > time.Second {
		t.Errorf("write took %v", d)
	}
}
