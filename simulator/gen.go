package simulator

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// event is one thing a protocol front-end may put on the wire.
type event struct {
	kind   string // role, reasoning, content, finish, usage, done, malformed, error
	text   string
	tokens int
	// final marks the last output chunk, which carries the finish reason
	// unless a separate finish chunk was asked for.
	final  bool
	status int    // error events
	msg    string // error events: the message, when the front end should not choose one
}

// frontEnd is the protocol-specific part of serving one request: how the
// answer and its errors look on the wire. Timing, scheduling, faults,
// ground truth and metrics are common and live in job.
type frontEnd interface {
	// streamContentType is the Content-Type of a streamed answer.
	streamContentType() string
	// encodeEvent returns the bytes of a streamed event, or nil when the
	// protocol has no such event (for example no role chunk).
	encodeEvent(ev event, p *plan) []byte
	// body is the whole non-streaming answer.
	body(p *plan, text, reasoning string) []byte
	// errorBody is an error answer with its HTTP status.
	errorBody(status int, msg string) []byte
}

// overloader is a front end whose server answers a full waiting queue
// otherwise than vLLM's 503: with its own status and message, or (inStream)
// as an error event in a 200 stream, as TGI's /generate_stream does.
type overloader interface {
	overload(p *plan) (status int, msg string, inStream bool)
}

// keepAliver marks a front end whose streams carry SSE keep-alive
// comments when faults.sse_ping_interval or the sse_ping fault asks.
type keepAliver interface {
	keepAlive()
}

// plan is everything decided about a request before it runs.
type plan struct {
	id              string
	model           string
	stream          bool
	includeUsage    bool
	promptTokens    int
	maxTokens       int
	outputTokens    int // total, reasoning included
	reasoningTokens int
	finishReason    string
	opts            requestOptions
	faults          faultSet
	created         int64
	text            *rand.Rand // output words
	timing          *rand.Rand // jitter
	// answer is the fixed answer's words (answer.go), nil for random
	// words; answerAt is the next one to send.
	answer   []string
	answerAt int
	triton   tritonExtras
	// prefix is the prefix cache's part (prefixcache.go).
	prefix prefixPlan
}

// planLength decides how many tokens an answer has: exactly max_tokens
// with ignore_eos, otherwise a natural length around the configured mean,
// raised to min_tokens and capped by max_tokens.
func planLength(o OutputConfig, maxTokens, minTokens int, ignoreEOS bool, rng *rand.Rand) (n int, reason string) {
	natural := float64(o.MeanTokens) * (1 + o.LengthSpread*(2*rng.Float64()-1))
	nat := max(int(natural+0.5), 1)
	if ignoreEOS {
		return maxTokens, finishLength
	}
	n = max(nat, minTokens)
	if n >= maxTokens {
		return maxTokens, finishLength
	}
	return n, finishStop
}

// job serves one admitted-or-queued request of any HTTP protocol.
type job struct {
	s        *Server
	w        http.ResponseWriter
	rc       *http.ResponseController
	fe       frontEnd
	entry    *truthEntry
	p        *plan
	received time.Time

	ticket       *ticket
	releaseModel func()
	admitted     time.Time
	queueWait    time.Duration // waited in the engine's queue for a free slot
	firstToken   time.Time
	lastToken    time.Time
	// firstReady and lastReady are when the first and the latest token
	// were ready to send, before the write: the server's own clock, as
	// llama.cpp's t_start_generation and t_token_generation.
	firstReady, lastReady time.Time
	sent                  int     // output tokens flushed
	specCarry             float64 // accepted draft tokens not yet counted (metrics_latency.go)
	fired                 map[string]bool
	stalled               bool

	// SSE keep-alive comments: every pingEvery from nextPing on, while
	// the stream is open.
	pingEvery time.Duration
	nextPing  time.Time
}

// errClientGone means a write failed or the request context ended.
var errClientGone = errors.New("client gone")

func (j *job) run(ctx context.Context) {
	p := j.p
	if f, ok := p.faults.get(faultError); ok {
		j.httpError(f.status, "Injected fault: HTTP "+strconv.Itoa(f.status), outcomeHTTPError)
		return
	}
	t, err := j.reserve(ctx)
	if j.releaseModel != nil {
		defer j.releaseModel()
	}
	switch {
	case errors.Is(err, errQueueFull):
		j.overloaded()
		return
	case err != nil:
		j.entry.finish(outcomeClientGone)
		return
	}
	j.ticket = t
	defer j.releaseOnPanic()

	var outcome, reason string
	if p.stream {
		outcome, reason = j.runStream(ctx)
	} else {
		outcome, reason = j.runUnary(ctx)
	}
	// Before the ground truth is finished, so that it says when the slot
	// went; a disconnected request's may go late or never (cancel.go).
	j.s.releaseSlot(j, outcome)
	j.observe(outcome, reason)
}

// reserve makes the model resident, waiting for a load when it is not
// (modelload.go), and places the request in the engine. errQueueFull
// means the request is refused as the server refuses one when its waiting
// queue is full (also for the queue_full fault); another error is ctx's.
func (j *job) reserve(ctx context.Context) (*ticket, error) {
	var forced time.Duration
	if f, ok := j.p.faults.get(faultModelLoad); ok {
		forced = f.dur
	}
	wait, release, err := j.s.model.acquire(ctx, forced)
	if wait > 0 {
		j.entry.update(func(r *RequestRecord) { r.ModelLoadNanos = int64(wait) })
	}
	if err != nil {
		return nil, err
	}
	j.releaseModel = release
	if _, ok := j.p.faults.get(faultQueueFull); ok {
		return nil, errQueueFull
	}
	return j.s.engine.enqueue(j.p.promptTokens)
}

// vllmOverloaded is the simulator's 503 message for a full waiting queue.
const vllmOverloaded = "The server is overloaded: the waiting queue is full."

// overloaded answers a request refused because the waiting queue is full:
// vLLM's 503 unless the front end's server answers otherwise.
func (j *job) overloaded() {
	status, msg, inStream := http.StatusServiceUnavailable, vllmOverloaded, false
	if o, ok := j.fe.(overloader); ok {
		status, msg, inStream = o.overload(j.p)
	}
	if !inStream {
		j.httpError(status, msg, outcomeRejected)
		return
	}
	h := j.w.Header()
	h.Set("Content-Type", j.fe.streamContentType())
	h.Set("Cache-Control", "no-cache")
	j.w.WriteHeader(http.StatusOK)
	j.entry.update(func(r *RequestRecord) {
		r.Status = http.StatusOK
		r.Error = msg
	})
	if j.emit(event{kind: kindError, status: status, msg: msg}) == nil {
		// TGI's OpenAI routes end the stream with [DONE] after the error.
		if t, ok := j.fe.(errorTerminator); ok && t.doneAfterError() {
			_ = j.emit(event{kind: kindDone})
		}
	}
	j.entry.finish(outcomeRejected)
}

// observe records the request in /metrics once it has left the engine.
func (j *job) observe(outcome, reason string) {
	m := j.s.metrics
	end := time.Now()
	j.entry.update(func(r *RequestRecord) {
		if reason != "" {
			r.FinishReason = reason
		}
	})
	j.entry.finish(outcome)
	if j.admitted.IsZero() || (m.reasonedOnly && outcome != outcomeCompleted) {
		return
	}
	m.queue.Observe(j.admitted.Sub(j.received).Seconds())
	m.promptTokens.Add(float64(j.p.promptTokens))
	m.promptTokensHist.Observe(float64(j.p.promptTokens))
	// Counted with the prompt tokens, so that SGLang's cached_tokens_total
	// and prompt_tokens_total (and vLLM's queries and hits) stay in step.
	if j.p.prefix.on && m.prefixQueries != nil {
		m.prefixQueries.Add(float64(j.p.promptTokens))
		m.prefixHits.Add(float64(j.p.prefix.cached))
	}
	m.generationTokens.Add(float64(j.sent))
	m.generationTokensHist.Observe(float64(j.sent))
	m.e2e.Observe(end.Sub(j.received).Seconds())
	if !j.firstToken.IsZero() {
		m.ttft.Observe(j.firstToken.Sub(j.received).Seconds())
		m.prefill.Observe(j.firstToken.Sub(j.admitted).Seconds())
		m.decode.Observe(j.lastToken.Sub(j.firstToken).Seconds())
		m.inference.Observe(j.lastToken.Sub(j.admitted).Seconds())
		if j.sent > 1 {
			m.reqTPOT.Observe(j.lastToken.Sub(j.firstToken).Seconds() / float64(j.sent-1))
		}
	}
	switch outcome {
	case outcomeCompleted:
		m.finished(reason)
	case outcomeErrorEvent:
		m.finished(finishError)
	default:
		m.finished(finishAbort)
	}
}

// httpError answers before any byte of the body was sent.
func (j *job) httpError(status int, msg, outcome string) {
	writeBody(j.w, status, "application/json", j.fe.errorBody(status, msg))
	j.entry.update(func(r *RequestRecord) {
		r.Status = status
		r.Error = msg
	})
	j.entry.finish(outcome)
}

func writeBody(w http.ResponseWriter, status int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	// A failed write means the client left; there is nobody to tell.
	_, _ = w.Write(b)
}

// emit writes one streamed event and flushes it; the ground-truth time is
// taken right after Flush returned.
func (j *job) emit(ev event) error {
	b := j.fe.encodeEvent(ev, j.p)
	if b == nil {
		return nil
	}
	before := time.Now()
	if _, err := j.w.Write(b); err != nil {
		return errClientGone
	}
	if err := j.rc.Flush(); err != nil {
		return errClientGone
	}
	now := time.Now()
	content := ev.tokens > 0 && ev.text != ""
	if c, ok := j.fe.(contentClassifier); ok {
		content = c.carriesContent(ev, j.p)
	}
	j.entry.addChunk(now, ev.kind, ev.tokens, content)
	j.entry.wroteFirst(before, content)
	j.tokensOut(now, ev.tokens)
	return nil
}

// contentClassifier is implemented by front-ends that put some tokens on
// the wire without output text (TGI streams its end-of-sequence token as
// a special token), so ground truth does not count them as content.
type contentClassifier interface {
	carriesContent(ev event, p *plan) bool
}

// tokensOut accounts n output tokens produced at now: TTFT and one ITL
// observation per token (the gap shared by the chunk's tokens).
func (j *job) tokensOut(now time.Time, n int) {
	if n <= 0 {
		return
	}
	if j.firstToken.IsZero() {
		j.firstToken = now
	} else {
		gap := now.Sub(j.lastToken) / time.Duration(n)
		for range n {
			j.s.metrics.observeITL(gap)
		}
		j.specCarry = j.s.metrics.observeSpecDecode(j.specCarry)
	}
	j.lastToken = now
	j.sent += n
}

// sleepUntil waits for a planned time; false when ctx ended first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	return waitFor(ctx, at, nil) == waitReached
}

// admit waits in the queue and then for the prefill; it returns the time
// the first token is ready.
func (j *job) admit(ctx context.Context) (time.Time, bool) {
	// Leaving the queue on cancellation is the caller's deferred release.
	if !j.pause(ctx, time.Time{}, j.ticket.admitted) {
		return time.Time{}, false
	}
	j.admitted = time.Now()
	j.queueWait = j.ticket.queued
	j.entry.update(func(r *RequestRecord) { r.AdmittedUnixNano = j.admitted.UnixNano() })
	if j.p.prefix.on {
		j.p.prefix.cached = j.s.prefix.admit(j.p.prefix.blocks, j.p.promptTokens)
		cached := j.p.prefix.cached
		j.entry.update(func(r *RequestRecord) { r.CachedPromptTokens = cached })
	}
	ready := j.admitted.Add(j.s.engine.prefillTime(j.p.promptTokens-j.p.prefix.cached, j.p.timing))
	if f, ok := j.p.faults.get(faultSlowFirstToken); ok {
		ready = ready.Add(f.dur)
	}
	return ready, j.pause(ctx, ready, nil)
}

// pause waits until at (zero: no deadline) or until done is closed (nil:
// never), writing the SSE keep-alive comments that fall due meanwhile. It
// returns false when ctx ended or a comment could not be written.
func (j *job) pause(ctx context.Context, at time.Time, done <-chan struct{}) bool {
	for {
		if j.pingEvery <= 0 || (!at.IsZero() && !j.nextPing.Before(at)) {
			return waitFor(ctx, at, done) != waitCancelled
		}
		switch waitFor(ctx, j.nextPing, done) {
		case waitCancelled:
			return false
		case waitDone:
			return true
		}
		if j.emit(event{kind: kindPing}) != nil {
			return false
		}
		// After a slow write, the next comment is an interval after this
		// one, not a burst of the missed ones.
		j.nextPing = j.nextPing.Add(j.pingEvery)
		if now := time.Now(); j.nextPing.Before(now) {
			j.nextPing = now.Add(j.pingEvery)
		}
	}
}

type waitResult int

const (
	waitReached waitResult = iota
	waitDone
	waitCancelled
)

// waitFor waits until at (zero: no deadline), done is closed (nil: never)
// or ctx ends, whichever comes first.
func waitFor(ctx context.Context, at time.Time, done <-chan struct{}) waitResult {
	var timer <-chan time.Time
	if !at.IsZero() {
		d := time.Until(at)
		if d <= 0 {
			if ctx.Err() != nil {
				return waitCancelled
			}
			return waitReached
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return waitReached
	case <-done:
		return waitDone
	case <-ctx.Done():
		return waitCancelled
	}
}

// segment is a run of tokens of one kind.
type segment struct {
	kind string
	n    int
}

func (j *job) segments() []segment {
	var segs []segment
	if j.p.reasoningTokens > 0 {
		segs = append(segs, segment{kindReasoning, j.p.reasoningTokens})
	}
	if c := j.p.outputTokens - j.p.reasoningTokens; c > 0 {
		segs = append(segs, segment{kindContent, c})
	}
	return segs
}

// midStream fires the faults due once `sent` tokens were produced; a
// terminal fault returns its outcome. atEnd fires everything left.
func (j *job) midStream(ctx context.Context, sent int, atEnd bool) (terminal string, err error) {
	due := func(kind string) (fault, bool) {
		f, ok := j.p.faults.get(kind)
		if !ok || j.fired[kind] || (f.after > sent && !atEnd) {
			return f, false
		}
		j.fired[kind] = true
		return f, true
	}
	if f, ok := due(faultStall); ok {
		if !j.pause(ctx, time.Now().Add(f.dur), nil) {
			return "", errClientGone
		}
		j.stalled = true
	}
	if _, ok := due(faultMalformed); ok && j.p.stream {
		if err := j.emit(event{kind: kindMalformed}); err != nil {
			return "", err
		}
	}
	// Terminal faults: the first due one ends the stream.
	for _, t := range [...]struct{ kind, outcome string }{
		{faultReset, outcomeReset}, {faultTruncate, outcomeTruncated}, {faultErrorEvent, outcomeErrorEvent},
	} {
		if _, ok := due(t.kind); ok {
			return t.outcome, nil
		}
	}
	return "", nil
}

// tokenLoop paces the output. produce is called for each chunk at its
// planned time; it returns the terminal fault outcome that stopped the
// stream, if any.
func (j *job) tokenLoop(ctx context.Context, ready time.Time, produce func(seg segment, n int, final bool) error) (string, error) {
	next := ready
	produced := 0
	total := j.p.outputTokens
	segs := j.segments()
	for si, seg := range segs {
		for done := 0; done < seg.n; {
			if term, err := j.midStream(ctx, produced, false); err != nil || term != "" {
				return term, err
			}
			if j.stalled {
				// The engine was stuck too: the next token is a full
				// decode step after the stall, not due at once.
				j.stalled = false
				next = time.Now()
			}
			n := min(j.p.opts.tokensPerChunk, seg.n-done)
			// The first token is ready at the end of prefill; each further
			// token costs a decode step at the current batch size.
			steps := n
			if produced == 0 {
				steps = n - 1
			}
			for range steps {
				next = next.Add(j.s.engine.decodeTime(j.p.timing))
			}
			if !j.pause(ctx, next, nil) {
				return "", errClientGone
			}
			// The chunk's last token is ready now, before its write.
			j.lastReady = time.Now()
			if j.firstReady.IsZero() {
				j.firstReady = j.lastReady
			}
			final := produced+n == total && si == len(segs)-1
			if err := produce(seg, n, final); err != nil {
				return "", err
			}
			j.ticket.addTokens(n)
			produced += n
			done += n
			// A slow reader delays the engine too; do not burst to catch up.
			if now := time.Now(); now.Sub(next) > j.s.cfg.Latency.DecodeBase {
				next = now
			}
		}
	}
	return j.midStream(ctx, produced, true)
}

func (j *job) runStream(ctx context.Context) (outcome, reason string) {
	h := j.w.Header()
	h.Set("Content-Type", j.fe.streamContentType())
	h.Set("Cache-Control", "no-cache")
	j.w.WriteHeader(http.StatusOK)
	j.entry.update(func(r *RequestRecord) { r.Status = http.StatusOK })
	if _, ok := j.fe.(keepAliver); ok {
		j.pingEvery = j.s.cfg.Faults.SSEPingInterval
		if f, ok := j.p.faults.get(faultSSEPing); ok {
			j.pingEvery = f.dur
		}
		j.nextPing = time.Now().Add(j.pingEvery)
	}
	roleMode := j.p.opts.roleChunk
	if roleMode == RoleChunkImmediate {
		if j.emit(event{kind: kindRole}) != nil {
			return outcomeClientGone, ""
		}
	}
	// Headers go out at once as on vLLM, so time to first byte is not time
	// to first token (also when the protocol has no role chunk).
	if j.rc.Flush() != nil {
		return outcomeClientGone, ""
	}
	ready, ok := j.admit(ctx)
	if !ok {
		return outcomeClientGone, ""
	}
	separate := j.p.opts.separateFinishChunk
	term, err := j.tokenLoop(ctx, ready, func(seg segment, n int, final bool) error {
		if roleMode == RoleChunkWithFirstToken && j.sent == 0 {
			if err := j.emit(event{kind: kindRole}); err != nil {
				return err
			}
		}
		return j.emit(event{kind: seg.kind, text: j.contentWords(seg.kind, n), tokens: n, final: final && !separate})
	})
	if err != nil {
		return outcomeClientGone, ""
	}
	switch term {
	case outcomeReset:
		j.resetConnection()
		return outcomeReset, ""
	case outcomeTruncated:
		return outcomeTruncated, ""
	case outcomeErrorEvent:
		f, _ := j.p.faults.get(faultErrorEvent)
		if j.emit(event{kind: kindError, status: f.status}) != nil {
			return outcomeClientGone, ""
		}
		if t, ok := j.fe.(errorTerminator); !ok || t.doneAfterError() {
			if j.emit(event{kind: kindDone}) != nil {
				return outcomeClientGone, ""
			}
		}
		return outcomeErrorEvent, ""
	}
	// A stream whose output was all reasoning, or a protocol asked for a
	// separate finish chunk, ends with an empty chunk carrying the reason.
	if separate || j.p.outputTokens == j.p.reasoningTokens {
		if j.emit(event{kind: kindFinish, final: true}) != nil {
			return outcomeClientGone, ""
		}
	}
	if j.p.includeUsage {
		if j.emit(event{kind: kindUsage}) != nil {
			return outcomeClientGone, ""
		}
	}
	if _, noDone := j.p.faults.get(faultNoDone); !noDone && !j.s.cfg.Faults.OmitDone {
		if j.emit(event{kind: kindDone}) != nil {
			return outcomeClientGone, ""
		}
	}
	return outcomeCompleted, j.p.finishReason
}

// errorTerminator is a front end whose server may end a stream right
// after a mid-stream error event, without its terminator (newer
// llama.cpp builds); others send [DONE] after it, as vLLM does.
type errorTerminator interface {
	doneAfterError() bool
}

func (j *job) runUnary(ctx context.Context) (outcome, reason string) {
	ready, ok := j.admit(ctx)
	if !ok {
		return outcomeClientGone, ""
	}
	var text, reasoning []byte
	term, err := j.tokenLoop(ctx, ready, func(seg segment, n int, _ bool) error {
		w := j.contentWords(seg.kind, n)
		if seg.kind == kindReasoning {
			reasoning = append(reasoning, w...)
		} else {
			text = append(text, w...)
		}
		j.tokensOut(time.Now(), n)
		return nil
	})
	if err != nil {
		return outcomeClientGone, ""
	}
	body := j.fe.body(j.p, string(text), string(reasoning))
	record := func(kind string) {
		j.entry.addChunk(time.Now(), kind, j.sent, j.sent > 0)
	}
	switch term {
	case outcomeReset:
		j.resetConnection()
		return outcomeReset, ""
	case outcomeErrorEvent:
		f, _ := j.p.faults.get(faultErrorEvent)
		j.httpError(f.status, "Injected fault: internal error", outcomeErrorEvent)
		return outcomeErrorEvent, ""
	case outcomeTruncated:
		// Promise the whole body, send half, close: the client sees an
		// unexpected EOF.
		j.w.Header().Set("Content-Type", "application/json")
		j.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		j.w.WriteHeader(http.StatusOK)
		_, _ = j.w.Write(body[:len(body)/2])
		j.closeConnection(false)
		return outcomeTruncated, ""
	}
	if _, ok := j.p.faults.get(faultMalformed); ok {
		body = body[:len(body)/2]
	}
	if lr, ok := j.fe.(loadReporter); ok {
		// At the answer's completion, as vLLM builds the header with
		// its JSONResponse, while this request still holds its slot.
		lr.reportLoad(j.w.Header())
	}
	writeBody(j.w, http.StatusOK, "application/json", body)
	if j.rc.Flush() != nil {
		return outcomeClientGone, ""
	}
	j.entry.update(func(r *RequestRecord) { r.Status = http.StatusOK })
	record(kindBody)
	return outcomeCompleted, j.p.finishReason
}

func (j *job) resetConnection() { j.closeConnection(true) }

// closeConnection takes the connection from net/http and closes it; with
// reset, SO_LINGER 0 makes the kernel send RST so the client sees
// "connection reset by peer" rather than a clean EOF.
func (j *job) closeConnection(reset bool) {
	conn, _, err := j.rc.Hijack()
	if err != nil {
		j.s.logger.Debug("cannot hijack connection for fault", "request_id", j.p.id, "err", err)
		return
	}
	if reset {
		c := conn
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		// A *net.TCPConn, or the arrivalConn wrapping one.
		if tcp, ok := c.(interface{ SetLinger(int) error }); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}
