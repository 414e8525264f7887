package probe

import "io"

// BeginResult is the Result a driver starts a probe of req with.
func BeginResult(req *Request) *Result {
	_, r := begin(req)
	return r
}

// DecodeOpenAIStream runs what readStream does between two reads, without
// the HTTP exchange: the SSE reader, chunk decoding, the Result's chunks and
// the token settlement at the end. It exists for the parse → Result →
// metrics benchmark in package probe_test (which may import collector).
func DecodeOpenAIStream(body io.Reader, r *Result) {
	d := &openAIDriver{}
	sr := newSSEReader(body, DefaultMaxLineBytes, DefaultMaxResponseBytes)
	st := streamState{cum: make([]int, 0, cap(r.Chunks))}
	var chunk oaiChunk
	for {
		ev, err := sr.next()
		if err != nil {
			r.Outcome = OutcomeIncomplete
			break
		}
		if d.onEvent(ev, r, &st, &chunk) {
			break
		}
	}
	st.finish(r)
}
