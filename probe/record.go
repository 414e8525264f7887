package probe

import (
	"fmt"
	"time"
)

// What every driver records about a streamed answer, in one place so the
// definitions (docs/metrics.md) are applied the same way by all of them.
// Which chunks carry output is each protocol's own question; what follows
// from a chunk carrying output is not.

// maxChunks bounds Result.Chunks so an endless stream of tiny events cannot
// grow memory beyond a few MiB before MaxResponseBytes stops it. It is far
// above any max_tokens a probe asks for.
const maxChunks = 1 << 18

// maxTokensPerChunk rejects absurd per-chunk counts derived from usage: a
// consumer observes ITL once per token, so a hostile count must not turn
// into billions of observations.
const maxTokensPerChunk = 1 << 16

// errTooManyChunks fails a stream with more than maxChunks output chunks.
var errTooManyChunks = fmt.Errorf("more than %d output chunks", maxChunks)

// maxExpectedChunks bounds the room made for a stream's chunks up front:
// an answer that ends early (a stop sequence, no ignore_eos) then wastes
// at most this many Chunks, a longer one grows as before.
const maxExpectedChunks = 4096

// expectChunks makes room for the chunks of a streamed answer to req: one
// per token asked for, plus one (some servers send a final chunk with
// output and usage), so that recording a chunk never grows the slice in
// the common case.
func (r *Result) expectChunks(req *Request) {
	if req.Stream && req.MaxTokens > 0 {
		r.Chunks = make([]Chunk, 0, min(req.MaxTokens+1, maxExpectedChunks))
	}
}

// addChunk records a chunk that carried output (content, reasoning or a
// tool-call fragment), read at `at` and worth tokens output tokens. The
// first one sets TTFT. Past maxChunks it records nothing and returns
// errTooManyChunks, which ends the stream as a protocol error. With a
// CancelAfter whose tokens this chunk reaches it returns errCut, which
// ends the stream as a success (stopOnChunkError).
func (r *Result) addChunk(at time.Time, tokens int) error {
	if len(r.Chunks) >= maxChunks {
		return errTooManyChunks
	}
	since := at.Sub(r.Start)
	if len(r.Chunks) == 0 {
		r.TTFT = since
	}
	r.Chunks = append(r.Chunks, Chunk{At: since, Tokens: tokens})
	return r.noteCut(at, tokens)
}

// end records how the probe ended: o and err, at the arrival of the final
// event or when the failure was read. It returns true, so that an event
// handler can end the stream in one statement.
func (r *Result) end(at time.Time, o Outcome, err error) bool {
	r.Outcome, r.Err, r.EndToEnd = o, err, at.Sub(r.Start)
	return true
}

// countChunkTokens sets the output tokens to the sum of the chunks' counts,
// for a stream whose server gave no total.
func (r *Result) countChunkTokens() {
	n := 0
	for _, c := range r.Chunks {
		n += c.Tokens
	}
	r.OutputTokens, r.OutputTokensSource = n, TokenSourceCounted
}
