package probe

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCutCountsTokens: the cut comes at the chunk whose tokens reach k
// (counting every token of a multi-token chunk), calls Before once, and
// ends the stream as a success; a chunk error that is not a cut stays a
// protocol error.
func TestCutCountsTokens(t *testing.T) {
	start := time.Now()
	calls := 0
	r := &Result{Start: start, Streamed: true}
	r.cut = &CancelAfter{Tokens: 5, Before: func() { calls++ }}
	for i, n := range []int{1, 2, 1} {
		if err := r.addChunk(start.Add(time.Duration(i+1)*time.Millisecond), n); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	err := r.addChunk(start.Add(10*time.Millisecond), 3)
	if err == nil || !r.stopOnChunkError(start.Add(10*time.Millisecond), err) {
		t.Fatalf("no cut at 7 tokens: %v", err)
	}
	if r.Outcome != OutcomeSuccess || r.Err != nil || !r.Cut() || calls != 1 ||
		*r.Cancel != (Cancellation{AfterTokens: 5, Tokens: 7, At: 10 * time.Millisecond}) || r.EndToEnd != 10*time.Millisecond {
		t.Errorf("outcome %s (%v), cancellation %+v, Before called %d times, end-to-end %s", r.Outcome, r.Err, r.Cancel, calls, r.EndToEnd)
	}
	other := &Result{Start: start}
	if other.stopOnChunkError(start, errTooManyChunks); other.Outcome != OutcomeProtocolError || other.Cut() {
		t.Errorf("too many chunks: %s, cut %t", other.Outcome, other.Cut())
	}
}

func TestWriteCancelReport(t *testing.T) {
	for release, want := range map[string]string{
		CancelReleased:       "  slot           released: seen free 12.00 ms after the close (3 running before the cut)",
		CancelLeaked:         "  slot           leaked: still held at the release timeout (3 running before the cut)",
		CancelReleaseUnknown: "  slot           unknown: the server's running requests could not be read: HTTP status 503",
	} {
		r := &Result{RequestID: "x", Streamed: true, Outcome: OutcomeSuccess, TTFT: time.Millisecond, EndToEnd: 4 * time.Millisecond,
			Cancel: &Cancellation{AfterTokens: 4, Tokens: 4, At: 4 * time.Millisecond, Release: release, ReleaseAfter: 12 * time.Millisecond, RunningBefore: 3,
				Err: errors.New("HTTP status 503")}}
		var b strings.Builder
		if err := WriteReport(&b, "t", "p", r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "cancelled        after 4 tokens (asked: 4) at 4.00 ms;") || !strings.Contains(b.String(), want+"\n") {
			t.Errorf("%s:\n%s", release, b.String())
		}
	}
}
