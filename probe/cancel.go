package probe

import (
	"errors"
	"fmt"
	"time"
)

// Cancellation probes (docs/metrics.md, "Cancellation"): the driver reads
// a stream until it has AfterTokens output tokens, then stops reading and
// closes it the way a client that gives up does (the HTTP/1.x connection
// is closed, not returned to the pool; an HTTP/2 or gRPC stream is reset),
// so the server sees the disconnect. How long the server then takes to
// free the request's slot is measured outside the driver (engine), from
// the server's own metrics.

// CancelAfter asks a driver to cut a streamed answer.
type CancelAfter struct {
	// Tokens is how many output tokens to read before cutting (≥ 1).
	Tokens int
	// Before, when set, is called once, synchronously, after the chunk
	// that reached Tokens was read and before the stream is closed: the
	// engine reads the server's running requests there, while the
	// request still holds its slot.
	Before func()
}

// Cancellation describes a stream the prober cut on purpose. The driver
// sets AfterTokens, Tokens and At; Release, ReleaseAfter and
// RunningBefore are the engine's measurement of the server letting go.
type Cancellation struct {
	// AfterTokens is what the probe asked for; Tokens is what the chunks
	// read until the cut carried (more when the last chunk carried
	// several tokens).
	AfterTokens, Tokens int
	// At is when the stream was cut, from Result.Start: the arrival of
	// the chunk that reached AfterTokens.
	At time.Duration
	// Release is one of the CancelRelease* values, empty until measured.
	Release string
	// ReleaseAfter is, for CancelReleased, the time from closing the
	// stream to the first reading of the server's running requests that
	// showed the slot free (an upper bound, at most a poll interval late).
	ReleaseAfter time.Duration
	// RunningBefore is the server's running requests read just before
	// the cut (valid unless Release is CancelReleaseUnknown).
	RunningBefore float64
	// Err says why the release is CancelReleaseUnknown: the last failed
	// read of the server's metrics.
	Err error
}

// Results of a cancellation, label values of
// llm_probe_cancellations_total{result}.
const (
	// CancelReleased: the server's running requests fell below their
	// value before the cut (or to zero) within the release timeout.
	CancelReleased = "released"
	// CancelLeaked: they did not, though the server's metrics could be
	// read: the slot was still held when the release timeout ran out.
	CancelLeaked = "leaked"
	// CancelReleaseUnknown: the server's metrics could not be read, or
	// had no running-requests gauge, before the cut or after it.
	CancelReleaseUnknown = "unknown"
)

// CancelResults lists every Cancellation.Release value.
func CancelResults() []string {
	return []string{CancelReleased, CancelLeaked, CancelReleaseUnknown}
}

// errCut ends a stream the probe cut on purpose after CancelAfter.Tokens;
// it is not a failure.
var errCut = errors.New("stream cut after the tokens asked for")

// noteCut counts a chunk's tokens towards req's CancelAfter and, once they
// reach it, records the Cancellation, calls Before and returns errCut.
func (r *Result) noteCut(at time.Time, tokens int) error {
	c := r.cut
	if c == nil || r.Cancel != nil {
		return nil
	}
	r.cutTokens += tokens
	if r.cutTokens < c.Tokens {
		return nil
	}
	r.Cancel = &Cancellation{AfterTokens: c.Tokens, Tokens: r.cutTokens, At: at.Sub(r.Start)}
	if c.Before != nil {
		c.Before()
	}
	return errCut
}

// stopOnChunkError ends the stream after addChunk failed with err: a cut
// is a success (the answer so far is all the probe wanted), anything else
// a protocol error. It returns true, for event handlers.
func (r *Result) stopOnChunkError(at time.Time, err error) bool {
	if errors.Is(err, errCut) {
		return r.end(at, OutcomeSuccess, nil)
	}
	return r.end(at, OutcomeProtocolError, err)
}

// Cut reports whether the probe cut the stream on purpose (CancelAfter):
// its end-to-end time, TPOT and throughput describe the part read, not an
// answer, and are not observed.
func (r *Result) Cut() bool { return r.Cancel != nil }

// writeCancelReport prints a cancellation probe's cut and, once measured,
// what the server did with the slot.
func writeCancelReport(line func(label, format string, args ...any), r *Result) {
	c := r.Cancel
	if c == nil {
		return
	}
	line("cancelled", "after %d %s (asked: %d) at %s; the end-to-end time is the cut's, TPOT and tokens/s are not measured",
		c.Tokens, plural(c.Tokens, "token"), c.AfterTokens, ms(c.At))
	running := fmt.Sprintf("%g running before the cut", c.RunningBefore)
	switch c.Release {
	case CancelReleased:
		line("  slot", "released: seen free %s after the close (%s)", ms(c.ReleaseAfter), running)
	case CancelLeaked:
		line("  slot", "leaked: still held at the release timeout (%s)", running)
	case CancelReleaseUnknown:
		line("  slot", "unknown: the server's running requests could not be read: %v", c.Err)
	}
}
