package simulator

import (
	"sync"
	"time"
)

// RequestRecord is the ground truth of one request, served as JSON at
// GET /debug/requests/{id}. Times are wall-clock Unix nanoseconds so a
// prober on the same host can compare them with its own clock.
type RequestRecord struct {
	ID string `json:"id"`
	// TraceID is the trace id of the request's W3C traceparent header (or
	// gRPC metadata), as a tracing server records it; empty without a
	// valid one.
	TraceID  string `json:"trace_id,omitempty"`
	Protocol string `json:"protocol"`
	Path     string `json:"path"`
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	// Status is the HTTP status sent (0 while unknown).
	Status int `json:"status"`
	// Outcome is in_progress, completed, http_error, rejected, reset,
	// truncated, error_event or client_gone.
	Outcome string `json:"outcome"`
	// Done is false while the request is still being served.
	Done bool `json:"done"`

	// ReceivedUnixNano is when the request had been read whole (for the
	// HTTP protocols: after its body was read).
	ReceivedUnixNano int64 `json:"received_unix_nano"`
	// FirstByteUnixNano is when the server's first read of the request
	// returned data, and HeadersUnixNano when its head had been parsed
	// and the handler called (HTTP protocols; arrival.go). Both come from
	// the monotonic clock anchored at the server's start, so differences
	// between requests (a burst's arrival spread) are exact. First byte
	// is 0 when unknown: a request read while its connection was not idle
	// (pipelined), or a server not started with Serve.
	FirstByteUnixNano int64 `json:"first_byte_unix_nano,omitempty"`
	HeadersUnixNano   int64 `json:"headers_unix_nano,omitempty"`
	// ModelLoadNanos is how long the request waited for the model to be
	// loaded (faults.model_load_delay, the model_load fault); 0 when it
	// was resident.
	ModelLoadNanos   int64 `json:"model_load_ns,omitempty"`
	AdmittedUnixNano int64 `json:"admitted_unix_nano,omitempty"`
	// FirstTokenUnixNano is the flush of the first chunk carrying output
	// (content or reasoning), the server's view of TTFT.
	FirstTokenUnixNano int64 `json:"first_token_unix_nano,omitempty"`
	// FirstTokenWriteUnixNano is taken just before that chunk was handed
	// to the connection (HTTP protocols): no client can read it earlier,
	// whereas FirstTokenUnixNano, taken after the write returned, can be
	// later than the client's read. FirstTokenWriteUnixNano −
	// ReceivedUnixNano is the server's own share of TTFT, never more than
	// the client's TTFT.
	FirstTokenWriteUnixNano int64 `json:"first_token_write_unix_nano,omitempty"`
	FinishedUnixNano        int64 `json:"finished_unix_nano,omitempty"`

	PromptTokens int `json:"prompt_tokens"`
	// CachedPromptTokens is the part of the prompt the prefix cache
	// served (prefix_cache), whose prefill was skipped.
	CachedPromptTokens int `json:"cached_prompt_tokens,omitempty"`
	MaxTokens          int `json:"max_tokens"`
	// PlannedOutputTokens is the answer's length had nothing gone wrong.
	PlannedOutputTokens int `json:"planned_output_tokens"`
	// OutputTokens were actually flushed; ReasoningTokens is the part of
	// them sent as reasoning_content.
	OutputTokens    int    `json:"output_tokens"`
	ReasoningTokens int    `json:"reasoning_tokens"`
	FinishReason    string `json:"finish_reason,omitempty"`
	// RateLimit is what the rate-limit headers said (rate_limit).
	RateLimit *RateLimitRecord `json:"rate_limit,omitempty"`
	// LoadReport is the load report sent with the answer
	// (endpoint-load-metrics, loadreport.go); nil when none was.
	LoadReport *LoadReportRecord `json:"load_report,omitempty"`
	// Text is the content sent, when the answer was fixed (output.answer
	// or X-Sim-Answer), at most 4 KiB; empty for random words.
	Text   string   `json:"text,omitempty"`
	Faults []string `json:"faults"`
	Error  string   `json:"error,omitempty"`

	// DisconnectUnixNano is when the server noticed the client gone
	// while the request held a running slot (outcome client_gone);
	// SlotReleasedUnixNano when that slot was freed (for every request
	// that ran), later than the disconnect by faults.disconnect_release;
	// SlotLeaked is true while a leaked slot is held.
	DisconnectUnixNano   int64 `json:"disconnect_unix_nano,omitempty"`
	SlotReleasedUnixNano int64 `json:"slot_released_unix_nano,omitempty"`
	SlotLeaked           bool  `json:"slot_leaked,omitempty"`

	// LlamaCppTimings is the timings object sent with the answer when the
	// OpenAI-compatible routes answer as llama.cpp (openai_server).
	LlamaCppTimings *LlamaCppTimings `json:"llamacpp_timings,omitempty"`

	Chunks []ChunkRecord `json:"chunks"`
	// ChunksDropped counts chunks beyond ground_truth.max_chunks_per_request.
	ChunksDropped int `json:"chunks_dropped,omitempty"`
}

// LlamaCppTimings are the values of llama.cpp's timings object as sent:
// prompt_ms runs from admission (llama.cpp: the slot starts processing the
// prompt) to the first token being ready, predicted_ms from the first to
// the last token being ready, both before the write that carries them.
type LlamaCppTimings struct {
	PromptN     int     `json:"prompt_n"`
	PromptMS    float64 `json:"prompt_ms"`
	PredictedN  int     `json:"predicted_n"`
	PredictedMS float64 `json:"predicted_ms"`
}

// ChunkRecord is one write flushed to the client.
type ChunkRecord struct {
	// UnixNano is taken right after the write and Flush returned.
	UnixNano int64 `json:"unix_nano"`
	// Kind is role, reasoning, content, finish, usage, done, malformed,
	// error (a mid-stream error event), ping (an SSE comment) or body (a
	// whole non-streaming body).
	Kind string `json:"kind"`
	// Tokens is the number of output tokens the chunk carried.
	Tokens int `json:"tokens"`
	// Content is true when the chunk carried non-empty output text.
	Content bool `json:"content"`
}

// Chunk kinds.
const (
	kindRole      = "role"
	kindReasoning = "reasoning"
	kindContent   = "content"
	kindFinish    = "finish"
	kindUsage     = "usage"
	kindDone      = "done"
	kindMalformed = "malformed"
	kindError     = "error"
	kindBody      = "body"
	kindPing      = "ping"
)

// Outcomes.
const (
	outcomeInProgress = "in_progress"
	outcomeCompleted  = "completed"
	outcomeHTTPError  = "http_error"
	outcomeRejected   = "rejected"
	outcomeReset      = "reset"
	outcomeTruncated  = "truncated"
	outcomeErrorEvent = "error_event"
	outcomeClientGone = "client_gone"
)

// truthEntry is a record being filled by its request's goroutine while
// readers may snapshot it.
type truthEntry struct {
	maxChunks int
	done      chan struct{}

	mu  sync.Mutex
	rec RequestRecord
}

func (e *truthEntry) update(f func(r *RequestRecord)) {
	e.mu.Lock()
	f(&e.rec)
	e.mu.Unlock()
}

func (e *truthEntry) addChunk(at time.Time, kind string, tokens int, content bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ns := at.UnixNano()
	if content && e.rec.FirstTokenUnixNano == 0 {
		e.rec.FirstTokenUnixNano = ns
	}
	e.rec.OutputTokens += tokens
	if kind == kindReasoning {
		e.rec.ReasoningTokens += tokens
	}
	if len(e.rec.Chunks) >= e.maxChunks {
		e.rec.ChunksDropped++
		return
	}
	e.rec.Chunks = append(e.rec.Chunks, ChunkRecord{UnixNano: ns, Kind: kind, Tokens: tokens, Content: content})
}

// wroteFirst records, for a chunk carrying output, when its write began;
// only the first counts.
func (e *truthEntry) wroteFirst(before time.Time, content bool) {
	if !content {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.FirstTokenWriteUnixNano == 0 {
		e.rec.FirstTokenWriteUnixNano = before.UnixNano()
	}
}

// finish marks the record complete; only the first call counts.
func (e *truthEntry) finish(outcome string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec.Done {
		return
	}
	e.rec.Done = true
	e.rec.Outcome = outcome
	e.rec.FinishedUnixNano = time.Now().UnixNano()
	close(e.done)
}

func (e *truthEntry) snapshot() RequestRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rec
	r.Chunks = append([]ChunkRecord(nil), e.rec.Chunks...)
	r.Faults = append([]string{}, e.rec.Faults...)
	return r
}

// truthStore keeps the most recent records, evicting the oldest, so that
// months of running never grow memory.
type truthStore struct {
	maxChunks int

	mu   sync.Mutex
	byID map[string]*truthEntry
	ring []*truthEntry
	next int
}

func newTruthStore(c GroundTruthConfig) *truthStore {
	return &truthStore{
		maxChunks: c.MaxChunksPerEntry,
		byID:      make(map[string]*truthEntry, c.Capacity),
		ring:      make([]*truthEntry, c.Capacity),
	}
}

// add stores a new record; a reused id replaces the older record.
func (s *truthStore) add(rec RequestRecord) *truthEntry {
	rec.Outcome = outcomeInProgress
	e := &truthEntry{maxChunks: s.maxChunks, done: make(chan struct{}), rec: rec}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.ring[s.next]; old != nil && s.byID[old.rec.ID] == old {
		delete(s.byID, old.rec.ID)
	}
	s.ring[s.next] = e
	s.next = (s.next + 1) % len(s.ring)
	s.byID[rec.ID] = e
	return e
}

func (s *truthStore) get(id string) (*truthEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	return e, ok
}

func (s *truthStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
