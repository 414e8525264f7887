package status

import (
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/display"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/internal/stats"
	"github.com/llm-prober/llm-prober/probe"
)

// Bounds of one history record. Only the error, the request id, the finish
// reason and the debug log have a variable size, and each is cut, so a
// record costs at most MaxRecordBytes whatever a server sends; a probe's
// history at most N times that (docs/security.md, "Status page history").
const (
	// MaxHistoryErrorBytes bounds a record's error message.
	MaxHistoryErrorBytes = display.MaxErrorBytes
	// MaxHistoryLogLines and MaxHistoryLogLineBytes bound a failure's debug
	// log; successes keep none.
	MaxHistoryLogLines     = 20
	MaxHistoryLogLineBytes = 256
	// maxHistoryIDBytes and maxHistoryFinishBytes bound what the prober
	// generates or the server names; real values are far shorter.
	maxHistoryIDBytes     = 128
	maxHistoryFinishBytes = 64
	// MaxHistoryRetryErrBytes bounds the first attempt's error of a
	// retried request; maxHistoryLoadBytes the server's load report as
	// one line.
	MaxHistoryRetryErrBytes = probe.MaxRetryErrBytes
	maxHistoryLoadBytes     = 256
	// recordFixedBytes is the size of a Record without its strings' bytes
	// (measured with unsafe.Sizeof on amd64, rounded up).
	recordFixedBytes = 352
	// logLineFixedBytes is one LogLine without its text.
	logLineFixedBytes = 40
	// MaxHistoryAnswerBytes bounds each text of a wrong answer's
	// AnswerCheck; answerCheckFixedBytes is the struct without them.
	MaxHistoryAnswerBytes = 512
	answerCheckFixedBytes = 48
	// MaxRecordBytes is the most one record can hold.
	MaxRecordBytes = recordFixedBytes + MaxHistoryErrorBytes + maxHistoryIDBytes + maxHistoryFinishBytes +
		MaxHistoryRetryErrBytes + maxHistoryLoadBytes +
		MaxHistoryLogLines*(logLineFixedBytes+MaxHistoryLogLineBytes) +
		answerCheckFixedBytes + 2*MaxHistoryAnswerBytes
)

// AnswerCheck is what a wrong answer's page shows: the first failed
// assertion's kind and expected text, and the text received, each cut to
// MaxHistoryAnswerBytes.
type AnswerCheck struct {
	Expected, Received string
}

// DefaultHistoryResults is how many results the status page keeps per
// probe unless --history.results-per-probe says otherwise.
const DefaultHistoryResults = 100

// HistoryProbe is what the debug log says about where a probe's requests
// go. Endpoint must be free of credentials (display.Endpoint).
type HistoryProbe struct {
	Target, Probe string
	Protocol      string
	Endpoint      string
}

// Record is one probe result reduced to the numbers the status page shows.
// It holds no chunk times and no server text beyond the cut error, so its
// size is bounded (MaxRecordBytes).
type Record struct {
	Start      time.Time
	RequestID  string
	Outcome    probe.Outcome
	StatusCode int
	Phases     probe.Phases
	Streamed   bool
	// TTFT is zero when no output arrived (or the answer was not streamed).
	TTFT     time.Duration
	TPOT     time.Duration
	HasTPOT  bool
	ITLP50   time.Duration
	ITLMax   time.Duration
	ITLCount int
	Chunks   int
	EndToEnd time.Duration

	InputTokens        int
	InputTokensSource  probe.TokenSource
	OutputTokens       int
	OutputTokensSource probe.TokenSource
	FinishReason       string
	// Retry is how the first attempt failed on a pooled connection when
	// the request was sent again (probe.Retry.Reason); empty otherwise.
	Retry string
	// RetryErr is the first attempt's error (redacted, at most
	// MaxHistoryRetryErrBytes): without it a retry of reason other says
	// nothing of what happened.
	RetryErr string
	// ServerLoad is the load report the server sent with the answer, as
	// one line (probe.ServerLoadSummary); empty when none came.
	ServerLoad string

	// Err is the (already redacted) error, at most MaxHistoryErrorBytes.
	Err string
	// Answer is, for a wrong answer, what its first failed assertion
	// wanted and the text received; nil otherwise, so other records do
	// not pay for it.
	Answer *AnswerCheck
	// Log is the failure's debug log; nil for successes.
	Log []LogLine
}

// OK reports whether the record is a success.
func (r *Record) OK() bool { return r.Outcome == probe.OutcomeSuccess }

// LogLine is one timestamped line of a failure's debug log.
type LogLine struct {
	At  time.Time
	Msg string
}

// History keeps the most recent results of each configured probe for the
// status page, in a ring of fixed length per probe. A nil *History keeps
// nothing (--history.results-per-probe=0).
type History struct {
	n int

	mu     sync.RWMutex
	probes map[probeKey]*probeHistory
}

// probeKey names one probe: target and probe name.
type probeKey struct{ target, probe string }

type probeHistory struct {
	info HistoryProbe

	mu   sync.Mutex
	ring []Record
	next int // where the next record goes once the ring is full
}

// NewHistory keeps n results per probe; n <= 0 returns nil, which keeps
// none.
func NewHistory(n int) *History {
	if n <= 0 {
		return nil
	}
	return &History{n: n, probes: map[probeKey]*probeHistory{}}
}

// PerProbe is how many results are kept per probe (0 when disabled).
func (h *History) PerProbe() int {
	if h == nil {
		return 0
	}
	return h.n
}

// Add makes room for a probe's results. A probe that exists keeps its
// results (a reload that changed nothing must not empty the page); its
// description is updated. History is an engine.Sink.
func (h *History) Add(info engine.Info) {
	if h == nil {
		return
	}
	p := HistoryProbe{Target: info.Target, Probe: info.Probe, Protocol: info.Protocol, Endpoint: display.Endpoint(info.Endpoint)}
	k := probeKey{p.Target, p.Probe}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.probes[k]; ok && old.info == p {
		return
	} else if ok {
		// The endpoint or protocol changed: the old results describe
		// another server.
		delete(h.probes, k)
	}
	// The ring is allocated by the first result: a probe that has not
	// run (a daemon of thousands of probes on long intervals) holds none.
	h.probes[k] = &probeHistory{info: p}
}

// Remove drops a probe's results.
func (h *History) Remove(target, probeName string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.probes, probeKey{target, probeName})
	h.mu.Unlock()
}

func (h *History) lookup(target, probeName string) *probeHistory {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.probes[probeKey{target, probeName}]
}

// Record keeps one result of a probe that was added; results of probes
// removed meanwhile (in flight during a reload) are dropped. req may be nil.
func (h *History) Record(target, probeName string, req *probe.Request, res *probe.Result) {
	if h == nil || res == nil {
		return
	}
	ph := h.lookup(target, probeName)
	if ph == nil {
		return
	}
	rec := NewRecord(ph.info, req, res)
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if len(ph.ring) < h.n {
		if len(ph.ring) == cap(ph.ring) {
			// Doubling up to exactly n: append's own growth ends at 128
			// for the default 100, 28 records (about 12 KB) a probe
			// never fills.
			grown := make([]Record, len(ph.ring), min(max(2*cap(ph.ring), 4), h.n))
			copy(grown, ph.ring)
			ph.ring = grown
		}
		ph.ring = append(ph.ring, rec)
		ph.next = len(ph.ring) % h.n
		return
	}
	ph.ring[ph.next] = rec
	ph.next = (ph.next + 1) % h.n
}

// Recent returns a probe's kept results, newest first, and whether the
// probe is known. The records are copies; their Log slices are shared but
// never modified.
func (h *History) Recent(target, probeName string) ([]Record, bool) {
	if h == nil {
		return nil, false
	}
	ph := h.lookup(target, probeName)
	if ph == nil {
		return nil, false
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	out := make([]Record, 0, len(ph.ring))
	for i := range len(ph.ring) {
		// next-1 is the newest, walking back around the ring.
		out = append(out, ph.ring[(ph.next-1-i+2*len(ph.ring))%len(ph.ring)])
	}
	return out, true
}

// ProbeSummary describes a probe's kept results.
type ProbeSummary struct {
	// Count is how many results are kept, Successes how many succeeded.
	Count, Successes int
	// Last is the newest result (valid when Count > 0).
	Last Record
	// LastTTFT is the TTFT of the newest result that received a first
	// token, whatever its outcome (as llm_probe_last_time_to_first_token_seconds).
	LastTTFT time.Duration
	// TTFTCount successful streamed results with a first token make the
	// nearest-rank TTFTP50 and TTFTP95.
	TTFTCount        int
	TTFTP50, TTFTP95 time.Duration
}

// SuccessRatio is Successes / Count (0 without results).
func (s ProbeSummary) SuccessRatio() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Successes) / float64(s.Count)
}

// Summary summarises a probe's kept results, and whether the probe is
// known.
func (h *History) Summary(target, probeName string) (ProbeSummary, bool) {
	if h == nil {
		return ProbeSummary{}, false
	}
	ph := h.lookup(target, probeName)
	if ph == nil {
		return ProbeSummary{}, false
	}
	var s ProbeSummary
	// A fixed array: the summary of every probe is computed on each page
	// load, and DefaultHistoryResults of them fit on the stack.
	var buf [DefaultHistoryResults]time.Duration
	ttfts := buf[:0]
	ph.mu.Lock()
	n := len(ph.ring)
	s.Count = n
	for i := range n {
		r := &ph.ring[(ph.next-1-i+2*n)%n]
		if i == 0 {
			s.Last = *r
		}
		if r.TTFT > 0 && s.LastTTFT == 0 {
			s.LastTTFT = r.TTFT
		}
		if r.OK() {
			s.Successes++
			if r.Streamed && r.TTFT > 0 {
				ttfts = append(ttfts, r.TTFT)
			}
		}
	}
	ph.mu.Unlock()
	if len(ttfts) > 0 {
		slices.Sort(ttfts)
		s.TTFTCount = len(ttfts)
		s.TTFTP50 = stats.Percentile(ttfts, 0.50)
		s.TTFTP95 = stats.Percentile(ttfts, 0.95)
	}
	return s, true
}

// NewRecord reduces a result to a Record: derived numbers only, strings
// cut to their bounds and copied (a cut that shared the server's megabyte
// error would keep all of it alive), and for failures a debug log.
func NewRecord(info HistoryProbe, req *probe.Request, res *probe.Result) Record {
	r := Record{
		Start:              res.Start,
		RequestID:          display.Cut(res.RequestID, maxHistoryIDBytes),
		Outcome:            res.Outcome,
		StatusCode:         res.StatusCode,
		Phases:             res.Phases,
		Streamed:           res.Streamed,
		TTFT:               res.TTFT,
		Chunks:             len(res.Chunks),
		EndToEnd:           res.EndToEnd,
		InputTokens:        res.InputTokens,
		InputTokensSource:  res.InputTokensSource,
		OutputTokens:       res.OutputTokens,
		OutputTokensSource: res.OutputTokensSource,
		FinishReason:       display.Cut(res.FinishReason, maxHistoryFinishBytes),
	}
	if res.Retry != nil {
		r.Retry = res.Retry.Reason
		r.RetryErr = display.Cut(redact.Default().String(res.Retry.ErrText()), MaxHistoryRetryErrBytes)
	}
	if l := res.ServerLoad; l != nil {
		line := probe.ServerLoadSummary(l)
		if l.Err != nil {
			line += "; dropped: " + redact.Default().String(l.Err.Error())
		}
		r.ServerLoad = display.Cut(line, maxHistoryLoadBytes)
	}
	r.TPOT, r.HasTPOT = res.TPOT()
	if len(res.Chunks) > 1 {
		itl := make([]time.Duration, 0, len(res.Chunks))
		res.InterTokenLatencies(func(d time.Duration) { itl = append(itl, d) })
		if len(itl) > 0 {
			slices.Sort(itl)
			r.ITLCount = len(itl)
			r.ITLP50 = stats.Percentile(itl, 0.50)
			r.ITLMax = itl[len(itl)-1]
		}
	}
	if res.Err != nil {
		// Redacted by the driver already; the default patterns once more,
		// since this is shown on pages. Only over what can be shown (with
		// room for a secret straddling the bound): a server's error may be
		// megabytes.
		msg := res.Err.Error()
		if len(msg) > 2*MaxHistoryErrorBytes {
			msg = msg[:2*MaxHistoryErrorBytes]
		}
		r.Err = display.Cut(redact.Default().String(msg), MaxHistoryErrorBytes)
	}
	if len(res.AssertionFailures) > 0 {
		f := res.AssertionFailures[0]
		r.Answer = &AnswerCheck{
			Expected: display.Cut(f.Kind+": "+f.Expected, MaxHistoryAnswerBytes),
			Received: display.Cut(res.Answer, MaxHistoryAnswerBytes),
		}
	}
	if !r.OK() {
		r.Log = debugLog(info, req, res, r)
	}
	return r
}

// retryErrOrUnknown is the first attempt's error as the log shows it.
func retryErrOrUnknown(s string) string {
	if s == "" {
		return "no error text"
	}
	return s
}

// debugLog tells the story of one failed request in blackbox_exporter's
// probe-log style, derived from the request and the result after the fact:
// the request's shape (never its prompt text or headers), the connection
// phases, the response head, the first token, the chunks, how the stream
// ended and the outcome. Phase times are placed by adding the phases in
// order from the start, which is how they follow each other on the wire.
func debugLog(info HistoryProbe, req *probe.Request, res *probe.Result, rec Record) []LogLine {
	log := make([]LogLine, 0, 10)
	add := func(at time.Duration, format string, args ...any) {
		if len(log) == MaxHistoryLogLines {
			return
		}
		log = append(log, LogLine{At: res.Start.Add(at), Msg: display.Cut(fmt.Sprintf(format, args...), MaxHistoryLogLineBytes)})
	}
	if req != nil {
		add(0, "Sending %s request to %s: model=%q max_tokens=%d stream=%t prompt=%s",
			info.Protocol, info.Endpoint, display.Cut(req.Model, 64), req.MaxTokens, req.Stream, promptSize(req))
	} else {
		add(0, "Sending %s request to %s", info.Protocol, info.Endpoint)
	}
	p := res.Phases
	var at time.Duration
	if rt := res.Retry; rt != nil {
		add(0, "A pooled connection failed before any answer (%s: %s); sent again on a new connection, timed from here", rt.Reason, retryErrOrUnknown(rec.RetryErr))
	}
	if p.ConnectionReused {
		add(0, "Reusing a pooled connection (no dns, connect or tls)")
	}
	if p.HasDNS {
		at += p.DNS
		add(at, "DNS lookup done in %s", msStr(p.DNS))
	}
	if p.HasConnect {
		at += p.Connect
		add(at, "Connected in %s", msStr(p.Connect))
	}
	if p.HasTLS {
		at += p.TLS
		add(at, "TLS handshake done in %s", msStr(p.TLS))
	}
	if p.HasWrite {
		at += p.Write
		add(at, "Request written in %s", msStr(p.Write))
	}
	switch {
	case p.HasFirstByte && res.StatusCode != 0:
		at += p.FirstByte
		add(at, "Response head: status %d, first byte %s after the request was written", res.StatusCode, msStr(p.FirstByte))
	case p.HasFirstByte:
		at += p.FirstByte
		add(at, "First byte of the response %s after the request was written", msStr(p.FirstByte))
	case res.StatusCode != 0:
		add(at, "Response head: status %d", res.StatusCode)
	default:
		add(at, "No response head received")
	}
	if res.TTFT > 0 {
		add(res.TTFT, "First token after %s (TTFT)", msStr(res.TTFT))
	}
	if n := len(res.Chunks); n > 0 {
		add(res.Chunks[n-1].At, "%d output chunks, %d output tokens (%s)", n, res.OutputTokens, sourceName(res.OutputTokensSource))
	} else if res.Streamed || res.StatusCode != 0 {
		add(res.EndToEnd, "No output received")
	}
	if rec.FinishReason != "" {
		add(res.EndToEnd, "Answer ended: finish_reason=%q", rec.FinishReason)
	} else {
		add(res.EndToEnd, "Answer ended without a finish reason")
	}
	add(res.EndToEnd, "Probe failed after %s: outcome=%s err=%s", msStr(res.EndToEnd), res.Outcome, rec.Err)
	return log
}

// promptSize describes the prompt by its size only: prompts may carry
// data the page's readers should not see.
func promptSize(req *probe.Request) string {
	if len(req.Messages) > 0 {
		chars := 0
		for _, m := range req.Messages {
			chars += utf8.RuneCountInString(m.Content)
		}
		return fmt.Sprintf("%d messages, %d characters", len(req.Messages), chars)
	}
	return fmt.Sprintf("%d characters", utf8.RuneCountInString(req.Prompt))
}

func sourceName(s probe.TokenSource) string {
	if s == probe.TokenSourceNone {
		return "count unknown"
	}
	return string(s)
}

func msStr(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

// PlotPoint is one kept result reduced to what the status page's charts
// draw: when it started, whether it succeeded, and its latencies.
type PlotPoint struct {
	// At is the result's Start in Unix nanoseconds.
	At       int64
	TTFT     time.Duration
	TPOT     time.Duration
	EndToEnd time.Duration
	OK       bool
	// HasTTFT is true for a streamed answer that received a first token;
	// HasTPOT when TPOT is defined (at least 2 output tokens).
	HasTTFT, HasTPOT bool
}

// Points appends a probe's kept results to dst, oldest first by start
// time, and returns it (dst unchanged for an unknown probe). It copies
// only the numbers the charts need, not whole records, so the charts of
// every probe on "/" cost no more than reading the rings.
func (h *History) Points(target, probeName string, dst []PlotPoint) []PlotPoint {
	if h == nil {
		return dst
	}
	ph := h.lookup(target, probeName)
	if ph == nil {
		return dst
	}
	base := len(dst)
	ph.mu.Lock()
	n := len(ph.ring)
	// Oldest first: from next around the ring (next is 0 until it is full).
	for i := range n {
		r := &ph.ring[(ph.next+i)%n]
		dst = append(dst, PlotPoint{
			At: r.Start.UnixNano(), TTFT: r.TTFT, TPOT: r.TPOT, EndToEnd: r.EndToEnd,
			OK: r.OK(), HasTTFT: r.Streamed && r.TTFT > 0, HasTPOT: r.HasTPOT,
		})
	}
	ph.mu.Unlock()
	// Results are kept in the order they ended; a long request that
	// started first may end last. The ring is nearly sorted already.
	pts := dst[base:]
	if !slices.IsSortedFunc(pts, comparePlotPoints) {
		slices.SortStableFunc(pts, comparePlotPoints)
	}
	return dst
}

func comparePlotPoints(a, b PlotPoint) int {
	switch {
	case a.At < b.At:
		return -1
	case a.At > b.At:
		return 1
	}
	return 0
}
