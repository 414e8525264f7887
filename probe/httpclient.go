package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/llm-prober/llm-prober/internal/redact"
)

// This file is the HTTP half shared by every HTTP-based driver: one
// transport per target, request headers, timing and phases, the stall
// detector, status handling and error classification.

var (
	// errStreamStalled is the cancel cause set by the stall detector.
	errStreamStalled = errors.New("stream stalled")
	// errBuildRequest: net/http refused to build the request.
	errBuildRequest = errors.New("cannot build the HTTP request")
	// errDrained is the cancel cause when draining after the final event
	// takes longer than drainGrace.
	errDrained = errors.New("drain grace period over")
)

const (
	// drainGrace bounds how long we keep reading after the final event so
	// the connection can go back to the pool (net/http reuses it only when
	// the body was read to EOF).
	drainGrace = 250 * time.Millisecond
	// errorBodyBytes is how much of a non-200 body is read for the message.
	errorBodyBytes = 4096
	// maxErrorMessage bounds the server text quoted in Result.Err.
	maxErrorMessage = 300
	// maxResponseHeaderBytes bounds a response head (status line and
	// headers); beyond it the probe is a protocol_error.
	maxResponseHeaderBytes = 64 << 10
)

type httpTarget struct {
	opts   TargetOptions
	base   *url.URL
	client *http.Client
	tr     *http.Transport
	// fresh sends the retry of a request whose pooled connection failed,
	// over a new connection that is not pooled afterwards.
	fresh   *http.Client
	freshTr *http.Transport
	logger  *slog.Logger
	// policy is what is secret for this target (targetPolicy).
	policy *redact.Policy
	// auth runs http_client_config's authentication, when configured.
	auth *authorizer
}

// idleConnTimeout is how long a target's idle connection is kept for the
// next request. net/http's usual 90 s made a probe every 60 s with full
// jitter (gaps up to 2 min) dial one request in eight again, and on TLS
// targets handshake again, a cost that is the prober's, not the
// server's; 5 min is what prometheus/common's HTTP client keeps for the
// same reason. A server with a shorter keep-alive (uvicorn's 5 s, so
// vLLM's) still closes first: that cost is the server's choice, and the
// phase metrics show it.
const idleConnTimeout = 5 * time.Minute

func newHTTPTarget(opts TargetOptions, logger *slog.Logger) (*httpTarget, error) {
	base, err := parseBaseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", opts.Name, err)
	}
	tlsOpts := opts.TLS
	tlsCfg, err := promconfig.NewTLSConfig(&tlsOpts)
	if err != nil {
		return nil, fmt.Errorf("target %q: TLS settings: %w", opts.Name, err)
	}
	dialer := &net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		// No proxy from the environment: a prober measures the path to
		// the server, and an unnoticed HTTP_PROXY would change it. A
		// proxy is used when configured (setProxy).
		Proxy:               nil,
		DialContext:         dialGated(dialer.DialContext), // held requests: release.go
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: opts.ConnectTimeout,
		// A custom dialer and TLS config switch HTTP/2 off unless forced;
		// servers that negotiate h2 over TLS get it.
		ForceAttemptHTTP2: true,
		DisableKeepAlives: opts.NewConnectionPerProbe,
		// Transparent gzip would buffer the stream; we also send
		// Accept-Encoding: identity explicitly.
		DisableCompression: true,
		// Bench runs up to 64 concurrent probes against one target.
		MaxIdleConns:           128,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// ResponseHeaderTimeout stays 0: a streaming server may send its
		// head only with the first token, after long queueing. The probe
		// deadline (ctx) bounds it.
	}
	setProxy(tr, opts)
	client := &http.Client{
		Transport: tr,
		// A redirect on a POST to an inference API is a misconfigured URL;
		// following it would hide that and change what is measured.
		// follow_redirects turns it on for a target that needs it.
		CheckRedirect: checkRedirect(opts),
	}
	freshTr := tr.Clone()
	freshTr.DisableKeepAlives = true
	fresh := &http.Client{Transport: freshTr, CheckRedirect: client.CheckRedirect}
	t := &httpTarget{opts: opts, base: base, client: client, tr: tr, fresh: fresh, freshTr: freshTr, logger: logger,
		auth: newAuthorizer(opts, dialer), policy: targetPolicy(opts)}
	return t, nil
}

func (t *httpTarget) close() {
	t.tr.CloseIdleConnections()
	t.freshTr.CloseIdleConnections()
	if t.auth != nil {
		t.auth.close()
	}
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	return hex.EncodeToString(b[:])
}

// begin starts every probe: the Result for req (nil is an empty request),
// with req's ID or a new one. The caller defers done(r).
func begin(req *Request) (*Request, *Result) {
	if req == nil {
		req = &Request{}
	}
	r := &Result{RequestID: req.ID, Streamed: req.Stream, outputBound: outputBound(req)}
	if req.CaptureAnswer {
		r.answer = &answerText{}
	}
	r.expectChunks(req)
	if req.Stream && req.CancelAfter != nil && req.CancelAfter.Tokens > 0 {
		r.cut = req.CancelAfter
	}
	if r.RequestID == "" {
		r.RequestID = newRequestID()
	}
	return req, r
}

// redact removes secrets from err's message. When something was removed,
// the returned error no longer unwraps to the original (whose message holds
// the secret) but still answers errors.Is for it.
func (t *httpTarget) redact(err error) error {
	if err == nil {
		return nil
	}
	p := t.policy
	if t.auth != nil {
		p = p.With(t.auth.secrets()...)
	}
	return p.Error(err)
}

// exchange is one request/response in flight.
type exchange struct {
	t      *httpTarget
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	trace  *traceRecorder
	resp   *http.Response
	body   *watchedBody
	idle   *stallWatch
	start  time.Time
	// auth is the headers http_client_config's authentication set.
	auth http.Header
}

// send builds and sends a POST of body to endpoint and waits for the
// response head. It sets r.Start, r.Phases and r.StatusCode. On failure,
// including a non-200 status, it sets r.Outcome, r.Err and r.EndToEnd and
// returns nil; otherwise the caller reads ex.body and calls ex.finish.
func (t *httpTarget) send(ctx context.Context, r *Result, endpoint string, body []byte, stream bool) *exchange {
	ex := &exchange{t: t, parent: ctx}
	ex.ctx, ex.cancel = context.WithCancelCause(ctx)
	if t.auth != nil {
		// Credentials first, an OAuth2 token fetch included, so that
		// none of it falls inside the measured time.
		began := time.Now()
		var err error
		ex.auth, err = t.auth.authorize(ex.ctx, endpoint, func(req *http.Request) { t.setHeaders(req, r.RequestID, stream) })
		if err != nil {
			t.auth.failed(ctx, r, began, err)
			ex.cancel(nil)
			return nil
		}
	}
	release := releaseOf(ctx)
	resp, gotConn, err := ex.attempt(t.client, r, endpoint, body, stream, release)
	if err != nil && release != nil && !ex.trace.wasReleased() && !errors.Is(err, errBuildRequest) && waitRelease(ex.ctx, release) {
		// Preparing failed before the release (no connection could be
		// made, say): nothing was written. Send at the release as an
		// unprepared request would, and measure that.
		resp, gotConn, err = ex.attempt(t.client, r, endpoint, body, stream, nil)
	}
	if err != nil && ex.staleConnection(err) {
		// A POST is not replayable, so net/http does not retry it when a
		// pooled connection turns out dead after the request was written
		// (llama.cpp's server closes kept-alive connections after each
		// stream). Nothing of an answer arrived, so the server did not
		// take the request: send it once more, on a new connection, and
		// measure that attempt.
		r.Retry = &Retry{Reason: retryReason(err), Err: t.redact(unwrapURLError(err))}
		resp, gotConn, err = ex.attempt(t.fresh, r, endpoint, body, stream, nil)
	}
	if errors.Is(err, errBuildRequest) {
		ex.cancel(nil)
		r.Outcome, r.Err = OutcomeProtocolError, err
		return nil
	}
	if err != nil {
		r.EndToEnd = time.Since(ex.start)
		if !gotConn && context.Cause(ex.ctx) == nil {
			r.Outcome, r.Err = OutcomeConnectError, fmt.Errorf("connecting: %w", unwrapURLError(err))
		} else {
			r.Outcome, r.Err = ex.classify(err, "waiting for the response head")
		}
		ex.cancel(nil)
		return nil
	}
	ex.resp = resp
	r.StatusCode = resp.StatusCode
	r.RateLimit = parseRateLimit(resp.Header, resp.StatusCode, time.Now())
	if t.opts.ServerLoadReport {
		r.ServerLoad = serverLoadOf(resp.Header)
	}
	if resp.TLS != nil {
		// Set on pooled connections too: the state of the handshake that
		// opened the connection.
		r.TLSCertExpiry = EarliestExpiry(resp.TLS.PeerCertificates)
	}
	// The stall detector is armed once the head has arrived: from here on
	// the server has accepted the request and owes us bytes.
	// A stall is named only while the probe's own deadline has not passed:
	// on a loaded machine both timers may have fired by the time the
	// reader wakes, and the one that came first is the outcome.
	ex.idle = newStallWatch(t.opts.StreamIdleTimeout, func() {
		if ex.parent.Err() == nil {
			ex.cancel(errStreamStalled)
		}
	})
	ex.body = &watchedBody{r: resp.Body, stall: ex.idle}
	if !ex.checkStatus(r) || !ex.checkBody(r) {
		r.EndToEnd = time.Since(ex.start)
		ex.finish()
		return nil
	}
	return ex
}

// attempt sends one POST over client and waits for the response head; it
// sets r.Start, r.Phases and ex's trace and start for this attempt.
// gotConn reports whether a connection was obtained. A request that
// cannot be built is reported as errBuildRequest. With a release, the
// request is held until it is closed (release.go) and Start is when it
// was let through.
func (ex *exchange) attempt(client *http.Client, r *Result, endpoint string, body []byte, stream bool, release <-chan struct{}) (*http.Response, bool, error) {
	ex.trace = &traceRecorder{}
	ct := ex.trace.clientTrace()
	if release != nil {
		ex.trace.holdHooks(ex.ctx, ct, release, !ex.t.opts.NewConnectionPerProbe)
	} else {
		ex.trace.stampWrites(ct)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ex.ctx, ct),
		http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		r.Start = time.Now()
		ex.start = r.Start
		return nil, true, errBuildRequest
	}
	ex.t.setHeaders(req, r.RequestID, stream)
	r.setTraceParent(req.Header)
	for k, v := range ex.auth {
		req.Header[k] = v
	}
	// Start is taken after the request is fully built, immediately before
	// handing it to the transport. TTFT therefore includes getting a
	// connection (DNS, connect, TLS when none is pooled) and writing the
	// request, as the TTFT definition requires, but none of our own
	// marshalling. The phases are exported separately for both views.
	// A held request, and one written on a pooled HTTP/1.x connection,
	// take Start when their write begins instead (stampWrites).
	r.Start = time.Now()
	ex.start = r.Start
	resp, err := client.Do(req)
	if at, ok := ex.trace.released(); ok {
		r.Start, ex.start = at, at
	}
	var gotConn bool
	r.Phases, gotConn = ex.trace.phases()
	return resp, gotConn, err
}

// staleConnection reports whether err is a pooled connection failing
// before the first byte of an answer, with the probe's time not over:
// the one failure that is retried.
func (ex *exchange) staleConnection(err error) bool {
	if errors.Is(err, errBuildRequest) || ex.parent.Err() != nil || context.Cause(ex.ctx) != nil {
		return false
	}
	ex.trace.mu.Lock()
	defer ex.trace.mu.Unlock()
	return ex.trace.reused && ex.trace.resp.IsZero()
}

// retryReason classifies the failure of a first attempt.
func retryReason(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return RetryEOF
	case errors.Is(err, syscall.ECONNRESET):
		return RetryReset
	case errors.Is(err, syscall.EPIPE):
		return RetryBrokenPipe
	}
	return RetryOther
}

// answerReader reads answers in an HTTP driver's protocol: a stream, or
// one JSON document (a non-streamed answer, or a JSON answer to a
// streaming request: an error, or a server that ignored the request).
type answerReader interface {
	readStream(ex *exchange, r *Result)
	readBody(ex *exchange, r *Result, wantedStream bool)
}

// roundTrip is one probe of an HTTP driver: it sends body, built by the
// driver, to endpoint and reads the answer with a, as a stream when one
// was asked for (stream) and came. buildErr, the error building body,
// makes the probe a protocol_error without sending anything. eventStream
// asks for text/event-stream rather than application/json.
func (t *httpTarget) roundTrip(ctx context.Context, r *Result, endpoint string, body []byte, buildErr error, stream, eventStream bool, a answerReader) {
	if buildErr != nil {
		r.Start = time.Now()
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("building the request body: %w", buildErr)
		return
	}
	ex := t.send(ctx, r, endpoint, body, eventStream)
	if ex == nil {
		return
	}
	defer ex.finish()
	if ex.streamed(stream) {
		a.readStream(ex, r)
	} else {
		a.readBody(ex, r, stream)
	}
}

func (t *httpTarget) setHeaders(req *http.Request, id string, stream bool) {
	h := req.Header
	h.Set("Content-Type", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	h.Set("Accept-Encoding", "identity")
	h.Set("User-Agent", "llm-prober")
	if t.opts.ServerLoadReport {
		// Before the configured headers, so that one can ask for json.
		h.Set(HeaderLoadMetricsFormat, "text")
	}
	for k, v := range t.opts.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		h.Set(k, v)
	}
	h.Set("X-Request-Id", id)
	if t.opts.BearerToken != "" {
		h.Set("Authorization", "Bearer "+t.opts.BearerToken)
	}
}

// finish releases the exchange. Safe to call more than once.
func (ex *exchange) finish() {
	if ex.idle != nil {
		ex.idle.Stop()
	}
	if ex.resp != nil {
		_ = ex.resp.Body.Close()
	}
	ex.cancel(context.Canceled)
}

// drain keeps reading after the final event, briefly, so that the
// connection reaches EOF and can be reused. It calls next, which reads
// one event or line, until it fails; that does not change the outcome.
func (ex *exchange) drain(next func() error) {
	ex.idle.Stop()
	grace := time.AfterFunc(drainGrace, func() { ex.cancel(errDrained) })
	defer grace.Stop()
	for next() == nil {
	}
}

// readEvents reads the body as Server-Sent Events, handing each to handle
// until it reports the stream over (r.Outcome set; a success is drained so
// the connection can be reused). It returns the error that ended reading
// first, io.EOF when the server closed the stream, else nil.
func (ex *exchange) readEvents(handle func(*sseEvent) bool, r *Result) error {
	opts := ex.t.opts
	sr := newSSEReader(ex.body, opts.MaxLineBytes, opts.MaxResponseBytes)
	for {
		ev, err := sr.next()
		if err != nil {
			return err
		}
		if handle(ev) {
			// A stream cut on purpose is closed unread (ex.finish): the
			// connection goes, so the server sees the client leave.
			if r.Outcome == OutcomeSuccess && !r.Cut() {
				ex.drain(sr.skip)
			}
			return nil
		}
	}
}

// streamBroke settles a stream that stopped before its end with err:
// at io.EOF the server closed it early, which is incomplete with unended
// saying what never came; any other error is classified.
func (ex *exchange) streamBroke(r *Result, err, unended error) {
	r.EndToEnd = time.Since(r.Start)
	if errors.Is(err, io.EOF) {
		r.Outcome, r.Err = OutcomeIncomplete, unended
	} else {
		r.Outcome, r.Err = ex.classify(err, "reading the stream")
	}
}

// streamed reports whether the answer to a request (streamed or not, as
// wanted) is read as a stream; a JSON answer is read whole, by readAll.
func (ex *exchange) streamed(wanted bool) bool {
	return wanted && !isJSONContentType(ex.resp.Header.Get("Content-Type"))
}

// readAll reads a whole answer, at most MaxResponseBytes, and sets
// r.EndToEnd to the arrival of its last byte. When that fails it sets
// r.Outcome and r.Err and returns false.
func (ex *exchange) readAll(r *Result) ([]byte, bool) {
	limit := ex.t.opts.MaxResponseBytes
	data, err := io.ReadAll(io.LimitReader(ex.body, limit+1))
	r.EndToEnd = time.Since(r.Start)
	if err != nil {
		r.Outcome, r.Err = ex.classify(err, "reading the body")
		return nil, false
	}
	if !ex.body.last.IsZero() {
		r.EndToEnd = ex.body.last.Sub(r.Start)
	}
	if int64(len(data)) > limit {
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("reading the body: %w", errBodyTooLarge)
		return nil, false
	}
	return data, true
}

// streamAnsweredWithJSON settles a streaming request that a server
// answered with one JSON document that is no error: it ignored stream.
func streamAnsweredWithJSON(r *Result) {
	r.Outcome, r.Err = OutcomeProtocolError, errors.New("server answered a streaming request with a single JSON document (stream ignored?)")
}

// readAnswer reads a whole answer with readAll and hands it, trimmed, to
// decode. When either fails it sets r.Outcome and r.Err and returns
// false; what names what the answer should have been, for the error.
func (ex *exchange) readAnswer(r *Result, what string, decode func([]byte) error) bool {
	data, ok := ex.readAll(r)
	if !ok {
		return false
	}
	if err := decode(bytes.TrimSpace(data)); err != nil {
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("answer is not %s (%v): %s", what, err, sanitize(data))
		return false
	}
	return true
}

// classify maps an error met while waiting for or reading the response.
func (ex *exchange) classify(err error, doing string) (Outcome, error) {
	elapsed := time.Since(ex.start).Round(time.Millisecond)
	if errors.Is(context.Cause(ex.ctx), errStreamStalled) {
		return OutcomeStreamStalled, fmt.Errorf("no bytes for %v while %s (stream_idle_timeout)", ex.t.opts.StreamIdleTimeout, doing)
	}
	if perr := ex.parent.Err(); perr != nil {
		if errors.Is(perr, context.DeadlineExceeded) {
			return OutcomeTimeout, fmt.Errorf("probe deadline exceeded after %v while %s: %w", elapsed, doing, perr)
		}
		// Cancelled by the caller (the daemon stopping past its drain
		// time): not the server's doing, so not a timeout.
		return OutcomeCancelled, fmt.Errorf("probe cancelled after %v while %s: %w", elapsed, doing, perr)
	}
	switch {
	case errors.Is(err, errLineTooLong), errors.Is(err, errEventTooLong),
		errors.Is(err, errBodyTooLarge), errors.Is(err, errNoProgress),
		errors.Is(err, errRedirect):
		return OutcomeProtocolError, fmt.Errorf("%s: %w", doing, unwrapURLError(err))
	case headersTooLarge(err):
		return OutcomeProtocolError, fmt.Errorf("%s: %w (%d bytes)", doing, errHeadersTooLarge, maxResponseHeaderBytes)
	}
	if badLocation(err) {
		return OutcomeProtocolError, fmt.Errorf("%s: server redirected with a Location header that is not a valid URL; redirects cannot be followed from it, point the target URL at the final location", doing)
	}
	// Reset, EOF or a broken chunked encoding after the request went out:
	// the answer did not arrive whole.
	return OutcomeIncomplete, fmt.Errorf("connection failed while %s: %w", doing, unwrapURLError(err))
}

// badLocation reports whether err is net/http's refusal of a redirect's
// Location header that does not parse as a URL. The client parses it
// before consulting CheckRedirect, so this error comes whether redirects
// are followed or not, and net/http gives it no type or sentinel: its
// message is all there is to recognise. The Location itself (in that
// message) is not repeated, as its query may hold a token.
func badLocation(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && strings.HasPrefix(ue.Err.Error(), "failed to parse Location header")
}

// unwrapURLError drops url.Error's `Post "URL":` prefix: the target is
// known from the labels, and URLs may carry credentials in query strings.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// checkStatus accepts 200 and turns anything else into an outcome.
func (ex *exchange) checkStatus(r *Result) bool {
	code := ex.resp.StatusCode
	if code == http.StatusOK {
		return true
	}
	switch {
	case code >= 300 && code < 400:
		loc := "(no Location)"
		if l, err := ex.resp.Location(); err == nil {
			// Only scheme, host and path: query strings may hold tokens.
			loc = (&url.URL{Scheme: l.Scheme, Host: l.Host, Path: l.Path}).String()
		}
		r.Outcome = OutcomeProtocolError
		r.Err = fmt.Errorf("server redirected with HTTP %d to %s; redirects are not followed, point the target URL at the final location", code, loc)
		return false
	case code >= 400 && code < 500:
		r.Outcome = OutcomeHTTP4xx
	case code >= 500 && code < 600:
		r.Outcome = OutcomeHTTP5xx
	default:
		r.Outcome = OutcomeProtocolError
	}
	snippet, _ := io.ReadAll(io.LimitReader(ex.body, errorBodyBytes))
	msg := errorMessage(snippet)
	if msg == "" {
		r.Err = fmt.Errorf("HTTP %d %s", code, http.StatusText(code))
	} else {
		r.Err = fmt.Errorf("HTTP %d %s: %s", code, http.StatusText(code), msg)
	}
	return false
}

// watchedBody tells the stall detector about every read that delivered
// bytes and remembers when the last byte arrived.
type watchedBody struct {
	r     io.Reader
	stall *stallWatch
	last  time.Time
	n     int64
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.last = time.Now()
		w.n += int64(n)
		w.stall.touch(w.last)
	}
	return n, err
}

// lastRead is when the latest Read that delivered bytes returned: the line
// reader takes its arrival times from here rather than reading the clock
// a second time per read.
func (w *watchedBody) lastRead() time.Time { return w.last }

// stallWatch calls onStall once no byte has arrived for timeout. A read
// only stores its time in an atomic (touch); one timer per exchange fires
// when the earliest possible stall is due, compares, and re-arms for the
// remainder. Resetting a time.Timer on every read, as before, took the
// timer heap's lock per read (2.6% of CPU with 200 µs gaps); this costs
// one timer wake-up per timeout while bytes flow, and still declares a
// stall exactly timeout after the last byte (plus timer latency).
type stallWatch struct {
	timeout time.Duration
	base    time.Time    // monotonic origin of last
	last    atomic.Int64 // time of the last byte (or arming) since base
	stopped atomic.Bool
	timer   *time.Timer
	onStall func()
}

// newStallWatch arms the detector: the first byte is owed within timeout.
func newStallWatch(timeout time.Duration, onStall func()) *stallWatch {
	w := &stallWatch{timeout: timeout, base: time.Now(), onStall: onStall}
	w.timer = time.AfterFunc(timeout, w.check)
	return w
}

// touch records that bytes arrived at now.
func (w *stallWatch) touch(now time.Time) {
	w.last.Store(int64(now.Sub(w.base)))
}

func (w *stallWatch) check() {
	if w.stopped.Load() {
		return
	}
	idle := time.Since(w.base) - time.Duration(w.last.Load())
	if idle >= w.timeout {
		w.onStall()
		return
	}
	w.timer.Reset(w.timeout - idle)
}

// Stop disarms the detector for good; a check already running when Stop
// is called does nothing more than re-arm a timer that then does nothing.
func (w *stallWatch) Stop() {
	w.stopped.Store(true)
	w.timer.Stop()
}

// traceRecorder collects httptrace events. Its hooks may run on transport
// goroutines, even after Do returned (a dial abandoned by a cancelled
// request finishes in the background), hence the mutex.
type traceRecorder struct {
	mu                   sync.Mutex
	dnsStart, dnsDone    time.Time
	connStart, connDone  time.Time
	tlsStart, tlsDone    time.Time
	gotConn, wrote, resp time.Time
	reused               bool
	// start is when a request held for a release was let through.
	start time.Time
}

func (tr *traceRecorder) set(dst *time.Time) {
	now := time.Now()
	tr.mu.Lock()
	*dst = now
	tr.mu.Unlock()
}

func (tr *traceRecorder) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { tr.set(&tr.dnsStart) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			if i.Err == nil {
				tr.set(&tr.dnsDone)
			}
		},
		ConnectStart: func(string, string) {
			now := time.Now()
			tr.mu.Lock()
			// Happy eyeballs may start several; the phase starts with the first.
			if tr.connStart.IsZero() {
				tr.connStart = now
			}
			tr.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				tr.set(&tr.connDone)
			}
		},
		TLSHandshakeStart: func() { tr.set(&tr.tlsStart) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err == nil {
				tr.set(&tr.tlsDone)
			}
		},
		GotConn: func(i httptrace.GotConnInfo) {
			now := time.Now()
			tr.mu.Lock()
			tr.gotConn, tr.reused = now, i.Reused
			tr.mu.Unlock()
		},
		WroteRequest:         func(httptrace.WroteRequestInfo) { tr.set(&tr.wrote) },
		GotFirstResponseByte: func() { tr.set(&tr.resp) },
	}
}

// phases converts the recorded times; gotConn reports whether a connection
// was obtained at all (false means the failure was in DNS/connect/TLS).
func (tr *traceRecorder) phases() (p Phases, gotConn bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	span := func(a, b time.Time) (time.Duration, bool) {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return 0, false
		}
		return b.Sub(a), true
	}
	p.DNS, p.HasDNS = span(tr.dnsStart, tr.dnsDone)
	p.Connect, p.HasConnect = span(tr.connStart, tr.connDone)
	p.TLS, p.HasTLS = span(tr.tlsStart, tr.tlsDone)
	// A request held on its connection starts writing at its release.
	writeFrom := tr.gotConn
	if tr.start.After(writeFrom) {
		writeFrom = tr.start
	}
	// net/http reports WroteRequest once the request is in the
	// connection's buffer, before the flush that puts it on the wire; a
	// request that fits the buffer and was gated at its write (held for a
	// release, or stamped on a pooled connection) therefore "was written"
	// before its first byte went out. Its bytes left in that one flush at
	// start, so the write ends there and the wait for the answer begins.
	wrote := tr.wrote
	if !wrote.IsZero() && tr.start.After(wrote) {
		wrote = tr.start
	}
	p.Write, p.HasWrite = span(writeFrom, wrote)
	p.FirstByte, p.HasFirstByte = span(wrote, tr.resp)
	p.ConnectionReused = tr.reused
	return p, !tr.gotConn.IsZero()
}
