// Package probe sends one request to an LLM inference server and measures,
// as close to the wire as the protocol allows, how its answer arrived.
package probe

import (
	"context"
	"crypto/x509"
	"errors"
	"time"

	"github.com/llm-prober/llm-prober/internal/display"
)

// Outcome classifies how a probe ended. The values are label values of
// llm_probe_requests_total{outcome}; keep the set small and stable.
type Outcome string

// Outcome classes, as defined in docs/metrics.md. How the HTTP drivers map
// what happened onto them is noted per class.
const (
	// OutcomeSuccess: HTTP 200 and the stream ended with its terminator
	// ([DONE] for OpenAI), or a complete non-streamed answer.
	OutcomeSuccess Outcome = "success"
	// OutcomeTimeout: the caller's ctx deadline passed.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeConnectError: no connection was obtained: DNS failure,
	// refused, dial or TLS handshake timeout, certificate rejected.
	OutcomeConnectError Outcome = "connect_error"
	// OutcomeHTTP4xx: status 4xx, or an error object in the stream or body
	// whose code is 4xx.
	OutcomeHTTP4xx Outcome = "http_4xx"
	// OutcomeHTTP5xx: status 5xx, or an error object whose code is 5xx.
	OutcomeHTTP5xx Outcome = "http_5xx"
	// OutcomeGRPCError: a non-OK gRPC status (gRPC drivers).
	OutcomeGRPCError Outcome = "grpc_error"
	// OutcomeProtocolError: the server broke the protocol or our limits:
	// invalid JSON or UTF-8, nesting too deep, a line, event or body over
	// its limit, a redirect, another non-200 2xx/1xx status, an error
	// object without a usable code, JSON where a stream was asked for.
	OutcomeProtocolError Outcome = "protocol_error"
	// OutcomeStreamStalled: after the response head, no byte arrived for
	// stream_idle_timeout.
	OutcomeStreamStalled Outcome = "stream_stalled"
	// OutcomeIncomplete: the connection broke after the request was sent
	// (reset, EOF, broken chunking), or the stream ended without its
	// terminator.
	OutcomeIncomplete Outcome = "incomplete"
	// OutcomeWrongAnswer: a complete, well-formed answer whose content is
	// wrong: text that failed a probe's assertions, a NaN, empty or
	// wrong-dimension embedding, a rerank result set that does not match
	// the documents sent.
	OutcomeWrongAnswer Outcome = "wrong_answer"
	// OutcomeCancelled: the caller cancelled ctx (the daemon stopping
	// past its drain time, an interrupted one-shot probe) before the
	// answer was complete; Err wraps context.Canceled. It says nothing
	// about the server: neither good nor bad for an SLO, and it neither
	// extends nor ends a failure streak.
	OutcomeCancelled Outcome = "cancelled"
)

// Outcomes lists every outcome class, so counters can be initialised to zero
// and a rate() over a never-seen failure class still works. New classes go
// at the end: the collector indexes its counters by this order.
func Outcomes() []Outcome {
	return []Outcome{
		OutcomeSuccess, OutcomeTimeout, OutcomeConnectError, OutcomeHTTP4xx,
		OutcomeHTTP5xx, OutcomeGRPCError, OutcomeProtocolError,
		OutcomeStreamStalled, OutcomeIncomplete,
		OutcomeWrongAnswer, OutcomeCancelled,
	}
}

// cancelOutcome is the outcome of a probe stopped by its ctx ending with
// err: timeout when the deadline passed, cancelled when the caller
// cancelled it.
func cancelOutcome(err error) Outcome {
	if errors.Is(err, context.DeadlineExceeded) {
		return OutcomeTimeout
	}
	return OutcomeCancelled
}

// TokenSource says where a token count came from.
type TokenSource string

const (
	// TokenSourceNone means no count is known.
	TokenSourceNone TokenSource = ""
	// TokenSourceServer is the server's own count (OpenAI usage, TGI details, Ollama eval_count).
	TokenSourceServer TokenSource = "server"
	// TokenSourceCounted is counted by the prober from streamed chunks.
	TokenSourceCounted TokenSource = "counted"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is what a probe asks the server for, independent of protocol.
type Request struct {
	// ID is sent as X-Request-Id (and in the body where the protocol has a
	// field for it) so the server's logs and the simulator's ground truth
	// can be matched with the result.
	ID    string
	Model string
	// Prompt is used by completion-style protocols; Messages by chat ones.
	// A driver given only one of them derives the other.
	Prompt    string
	Messages  []Message
	MaxTokens int
	// Stream selects streaming (the default for probes) or a single answer.
	Stream      bool
	Temperature *float64
	TopP        *float64
	Seed        *int64
	Stop        []string
	IgnoreEOS   bool
	MinTokens   int
	// Extra body fields passed through verbatim for servers with extensions.
	Extra map[string]any
	// CaptureAnswer keeps the answer's text in Result.Answer, for
	// assertions; drivers that cannot leave Answer empty (config refuses
	// assertions on their protocols). Off, the answer's text is never kept.
	CaptureAnswer bool
	// Bodies, when set, is the workload item's cache of encoded bodies
	// (BodyCache says what may differ between the requests sharing it).
	// Nil encodes the body in full, as for a request built at send time.
	Bodies *BodyCache
	// CancelAfter, when set on a streamed request, cuts the stream after
	// that many output tokens (cancel.go).
	CancelAfter *CancelAfter
}

// Phases are the connection phases of the round trip, from net/http/httptrace
// for the HTTP drivers. triton_grpc fills the same fields from its dialer,
// TLS credentials and grpc-go stats events, with the boundaries
// docs/metrics.md gives for gRPC.
// A phase that did not happen (DNS for an IP literal, connect and TLS on a
// pooled connection) is zero and Has* is false.
//
// Each phase is its own segment, so they can be compared and summed: DNS is
// DNSStart→DNSDone, Connect is ConnectStart→ConnectDone, TLS is the
// handshake, Write is from getting the connection to having written the
// whole request, FirstByte is from the request written to the first byte of
// the response head (server queueing plus, for non-streaming answers, the
// whole generation).
type Phases struct {
	DNS, Connect, TLS, Write, FirstByte                time.Duration
	HasDNS, HasConnect, HasTLS, HasWrite, HasFirstByte bool
	// ConnectionReused is true when the request went over a pooled connection.
	ConnectionReused bool
}

// Chunk is one streamed piece that carried output: content, reasoning or a
// tool-call fragment.
type Chunk struct {
	// At is the time the chunk was read, measured from Result.Start on the
	// monotonic clock.
	At time.Duration
	// Tokens is how many output tokens the chunk carried: the server's
	// per-chunk count where the protocol gives one, else 1.
	Tokens int
}

// Result is everything measured about one probe. Drivers always return a
// non-nil Result, also on failure, so every attempt is counted.
type Result struct {
	RequestID string
	// TraceID and SpanID are the W3C trace context the request carried
	// (traceparent header or gRPC metadata): the trace id is RequestID
	// unless that is not one (tracecontext.go). Empty when nothing was
	// sent.
	TraceID, SpanID string
	traceParent     string
	// Start is taken just before the request is written; it carries the
	// monotonic reading all durations below are measured against.
	Start time.Time
	// StatusCode is the HTTP status (0 for gRPC or when none arrived).
	StatusCode int
	Phases     Phases
	// TTFT is the time from Start to the first chunk carrying non-empty
	// output. Zero when no output arrived.
	TTFT time.Duration
	// Chunks are the output-carrying chunks in arrival order.
	Chunks []Chunk
	// EndToEnd is the time from Start to the last byte of the final event
	// (for a non-streamed answer: the last byte of the body). On failure it
	// is the time from Start until the failure was detected.
	EndToEnd time.Duration
	// Streamed is true when the answer was streamed. A non-streamed answer
	// arrives all at once: it has no TTFT (zero), no Chunks and hence no
	// ITL; only EndToEnd, token counts and FinishReason are meaningful.
	Streamed bool

	InputTokens       int
	InputTokensSource TokenSource
	// CachedInputTokens is the part of the prompt the server served from
	// its prefix cache, as OpenAI usage's prompt_tokens_details.cached_tokens
	// reports it (prefix.go); HasCachedInputTokens says the server did.
	CachedInputTokens    int
	HasCachedInputTokens bool
	OutputTokens         int
	OutputTokensSource   TokenSource
	// UsageInvalid names the counts the server reported for this answer
	// that were implausible and so dropped (usage.go), in UsageFields
	// order; nil when every count was kept. A dropped output count is
	// replaced by the chunks counted.
	UsageInvalid []string
	// outputBound is the most output tokens a plausible answer to the
	// request carries (outputBound); 0 before begin.
	outputBound int

	FinishReason string
	// ResponseID is the server's id of the answer where the protocol
	// names it for later requests (openai_responses: the Response's id,
	// which previous_response_id refers to); empty otherwise, or when the
	// id was not a short printable string.
	ResponseID string
	// TLSCertExpiry is the earliest NotAfter among the certificates the
	// server presented on the TLS connection the request went over
	// (blackbox_exporter's probe_ssl_earliest_cert_expiry); zero without
	// TLS or when no handshake completed.
	TLSCertExpiry time.Time
	// Retry is set when the request was sent twice: the first attempt went
	// over a pooled connection that failed before a byte of an answer came
	// back (the server had closed it), and the probe was sent once more on
	// a new connection. Start, the phases and every timing are the second
	// attempt's; nil when the first attempt answered.
	Retry *Retry
	// ServerTimings is the server's own account of where the time went,
	// when the protocol reports one (Ollama's *_duration fields, TGI's
	// x-*-time headers on /generate, llama.cpp's timings object on the
	// OpenAI-compatible routes), in the order the protocol lists them; nil
	// otherwise. It is kept beside the client's view, never in place of
	// it: the server cannot see the network, its HTTP layer or the client,
	// and each server draws its phase boundaries differently.
	ServerTimings []ServerTiming
	// ServerTimingsInvalid counts timings the server announced but that
	// could not be used, so are not in ServerTimings: a field of
	// llama.cpp's timings object that is missing, null (how llama.cpp
	// writes NaN and Inf), not a number, negative or over an hour.
	ServerTimingsInvalid int
	// Answer is the answer's text (content of the first choice; not
	// reasoning or tool calls), kept only when the request asked for it
	// (Request.CaptureAnswer), at most MaxAnswerBytes; AnswerTruncated
	// says it was cut there.
	Answer          string
	AnswerTruncated bool
	answer          *answerText
	// AssertionFailures are the probe's assertions the answer failed
	// (Assertions.Check), in configured order; nil when none failed.
	AssertionFailures []AssertionFailure
	// Reasoning describes a reasoning model's answer (reasoning.go).
	Reasoning Reasoning
	// RateLimit holds the rate-limit headers of the answer (ratelimit.go);
	// nil when it carried none.
	RateLimit *RateLimit
	// ServerLoad is the load report the server sent in the answer's head
	// (serverload.go), when the target asks for one; nil when none came.
	ServerLoad *ServerLoad
	// Pooled describes the answer of an embedding or rerank probe (whose
	// output is vectors or scores, not tokens); nil for other protocols.
	Pooled *PooledAnswer
	// Cancel is set when the probe cut the stream on purpose
	// (Request.CancelAfter); nil otherwise.
	Cancel    *Cancellation
	cut       *CancelAfter
	cutTokens int
	Outcome   Outcome
	// Err explains a non-success outcome, naming what went wrong.
	Err error
}

// EarliestExpiry is the earliest NotAfter of certs; zero when there are
// none.
func EarliestExpiry(certs []*x509.Certificate) time.Time {
	var earliest time.Time
	for _, c := range certs {
		if c != nil && (earliest.IsZero() || c.NotAfter.Before(earliest)) {
			earliest = c.NotAfter
		}
	}
	return earliest
}

// Retry describes a first attempt that failed on a reused connection.
type Retry struct {
	// Reason classifies how the first attempt failed: one of RetryReasons.
	Reason string
	// Err is the first attempt's error (redacted).
	Err error
}

// MaxRetryErrBytes bounds the first attempt's error text as outputs
// show it (Retry.ErrText).
const MaxRetryErrBytes = 512

// ErrText is the first attempt's error as outputs show it: redacted when
// it was recorded, clipped to MaxRetryErrBytes; empty when none is known.
func (rt *Retry) ErrText() string {
	if rt == nil || rt.Err == nil {
		return ""
	}
	return display.Cut(rt.Err.Error(), MaxRetryErrBytes)
}

// Retry reasons, label values of llm_probe_connection_retries_total.
const (
	// RetryEOF: the server had closed the connection; the read met EOF.
	RetryEOF = "eof"
	// RetryReset: the connection was reset (the request reached a socket
	// the server had closed).
	RetryReset = "reset"
	// RetryBrokenPipe: writing the request failed.
	RetryBrokenPipe = "broken_pipe"
	// RetryOther: any other failure before the answer's first byte.
	RetryOther = "other"
)

// RetryReasons lists every Retry.Reason.
func RetryReasons() []string { return []string{RetryEOF, RetryReset, RetryBrokenPipe, RetryOther} }

// ServerTiming is one duration a server reported about its own handling
// of a request. Name is the server's own name for it without the unit
// ("total", "load", "prompt_eval", "eval" for Ollama; "total",
// "validation", "queue", "inference", "time_per_token" for TGI; "prompt",
// "prompt_per_token", "predicted", "predicted_per_token" for llama.cpp),
// so it can be looked up in that server's documentation.
type ServerTiming struct {
	Name     string
	Duration time.Duration
}

// Driver speaks one protocol to one target.
type Driver interface {
	// Probe sends req and measures the answer. It never panics on anything
	// the server sends, honours ctx for the overall deadline, and returns a
	// non-nil Result whose Outcome is set.
	Probe(ctx context.Context, req *Request) *Result
	// Close releases the driver's idle connections. Probes in flight are
	// not interrupted; the driver must not be used afterwards.
	Close()
}
