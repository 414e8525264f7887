package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
)

// Values of TargetOptions.OllamaAPI.
const (
	OllamaAPIChat     = "chat"
	OllamaAPIGenerate = "generate"
)

// OllamaAPIs lists the accepted values of TargetOptions.OllamaAPI.
func OllamaAPIs() []string { return []string{OllamaAPIChat, OllamaAPIGenerate} }

const (
	ollamaChatPath     = "/api/chat"
	ollamaGeneratePath = "/api/generate"
)

// ollamaDriver speaks Ollama's native API: POST /api/chat or /api/generate,
// streamed as NDJSON (one JSON object per line, the last with done:true
// and the server's counts and durations) or answered as one object.
type ollamaDriver struct {
	t    *httpTarget
	chat bool
	url  string
	// bodies names this driver's encodings in workload items' caches.
	bodies *encoderKey
}

func newOllamaDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	var chat bool
	switch opts.OllamaAPI {
	case "", OllamaAPIChat:
		chat = true
	case OllamaAPIGenerate:
	default:
		return nil, fmt.Errorf("target %q: unknown ollama api %q (want %s or %s)", opts.Name, opts.OllamaAPI, OllamaAPIChat, OllamaAPIGenerate)
	}
	t, err := newHTTPTarget(opts, logger)
	if err != nil {
		return nil, err
	}
	path := ollamaGeneratePath
	if chat {
		path = ollamaChatPath
	}
	return &ollamaDriver{t: t, chat: chat, url: nativeEndpoint(t.base, path, ollamaChatPath, ollamaGeneratePath), bodies: new(encoderKey)}, nil
}

func (d *ollamaDriver) Close() { d.t.close() }

// Probe implements Driver.
func (d *ollamaDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.t.done(r)
	body, err := encodeBody(d.bodies, d.encodeBody, req, r.RequestID)
	// Ollama ignores Accept; "application/json" (what send sets for a
	// non-streamed request) is the closest honest value for NDJSON too,
	// rather than claiming text/event-stream.
	d.t.roundTrip(ctx, r, d.url, body, err, req.Stream, false, d)
	return r
}

// requestBody builds the JSON body. stream is always sent because Ollama
// streams by default. Sampling knobs go into options under Ollama's names
// (num_predict is max_tokens); Ollama has neither ignore_eos nor
// min_tokens, so they are not sent. Extra entries are top-level fields
// (keep_alive, think, format, ...), except an "options" object, which is
// merged into the built options; a nil value removes a built field.
func (d *ollamaDriver) requestBody(req *Request) ([]byte, error) {
	if len(req.Extra) == 0 {
		return json.Marshal(d.requestFields(req))
	}
	return d.requestBodyMap(req)
}

// encodeBody is requestBody as a bodyEncoder; the body carries no id.
func (d *ollamaDriver) encodeBody(req *Request, _ string) ([]byte, error) { return d.requestBody(req) }

// ollamaRequest is the body requestBodyMap builds, as structs whose fields
// are in the order encoding/json sorts a map's keys and are omitted
// exactly when the map leaves the key out: the same bytes
// (TestOllamaRequestBodyStructMatchesMap) from json's cached struct
// encoder, without maps built, sorted and reflected over.
type ollamaRequest struct {
	Messages []Message      `json:"messages,omitempty"`
	Model    string         `json:"model"`
	Options  *ollamaOptions `json:"options,omitempty"`
	Prompt   *string        `json:"prompt,omitempty"`
	Stream   bool           `json:"stream"`
}

type ollamaOptions struct {
	NumPredict  int      `json:"num_predict,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
}

// requestFields is requestBodyMap's body for a request without Extra.
func (d *ollamaDriver) requestFields(req *Request) *ollamaRequest {
	b := &ollamaRequest{Model: req.modelOr(d.t.opts.Model), Stream: req.Stream}
	if d.chat {
		// chatMessages is never empty, so omitempty never drops it.
		b.Messages = req.chatMessages()
	} else {
		p := req.promptText()
		b.Prompt = &p
	}
	o := ollamaOptions{Seed: req.Seed, Temperature: req.Temperature, TopP: req.TopP}
	if req.MaxTokens > 0 {
		o.NumPredict = req.MaxTokens
	}
	if len(req.Stop) > 0 {
		o.Stop = req.Stop
	}
	if o.NumPredict > 0 || o.Seed != nil || o.Stop != nil || o.Temperature != nil || o.TopP != nil {
		b.Options = &o
	}
	return b
}

// requestBodyMap builds the body as maps, which Extra entries can
// override or remove fields of.
func (d *ollamaDriver) requestBodyMap(req *Request) ([]byte, error) {
	m := make(map[string]any, 8)
	m["model"] = req.modelOr(d.t.opts.Model)
	if d.chat {
		m["messages"] = req.chatMessages()
	} else {
		m["prompt"] = req.promptText()
	}
	m["stream"] = req.Stream
	opts := make(map[string]any, 6)
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	req.putSampling(opts)
	for k, v := range req.Extra {
		if extra, ok := v.(map[string]any); ok && k == "options" {
			setFields(opts, extra)
		} else {
			setField(m, k, v)
		}
	}
	if len(opts) > 0 {
		m["options"] = opts
	}
	return json.Marshal(m)
}

// ollamaLine is one streamed object or a whole answer: only what the
// measurements need.
type ollamaLine struct {
	Error    json.RawMessage `json:"error"`
	Response present         `json:"response"` // /api/generate
	Thinking present         `json:"thinking"` // /api/generate, thinking models
	Message  struct {
		Content  present `json:"content"`
		Thinking present `json:"thinking"`
		// ToolCalls is output: Ollama sends a parsed call as its own
		// line, content "", {"function":{"name","arguments":{…}}} per
		// call (api/types.go ToolCall, server/routes.go ChatHandler
		// @fb30760), read by the OpenAI driver's rule.
		ToolCalls toolCalls `json:"tool_calls"`
	} `json:"message"` // /api/chat
	Done       bool   `json:"done"`
	DoneReason string `json:"done_reason"`
	// Counts and durations (nanoseconds) come with done:true. Ollama
	// omits zero values, so absent is not an error.
	TotalDuration      serverNanos `json:"total_duration"`
	LoadDuration       serverNanos `json:"load_duration"`
	PromptEvalCount    *int        `json:"prompt_eval_count"`
	PromptEvalDuration serverNanos `json:"prompt_eval_duration"`
	EvalCount          *int        `json:"eval_count"`
	EvalDuration       serverNanos `json:"eval_duration"`
}

func (l *ollamaLine) decode(b []byte) error {
	*l = ollamaLine{}
	return decodeJSON(b, l)
}

func (l *ollamaLine) hasOutput() bool {
	return bool(l.Response || l.Thinking || l.Message.Content || l.Message.Thinking) || bool(l.Message.ToolCalls)
}

// errorMessage reports whether the object is an error: Ollama sends
// {"error": "text"}; an object-valued error (OpenAI-style proxies) is
// accepted too.
func (l *ollamaLine) errorMessage() (string, bool) {
	raw := bytes.TrimSpace(l.Error)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	if raw[0] == '{' {
		var in innerError
		if json.Unmarshal(raw, &in) == nil {
			return jsonText(in.Message), true
		}
	}
	return jsonText(raw), true
}

// serverNanos is a duration in nanoseconds as Ollama reports it. A value
// that is not a usable number (a string, negative, over maxServerTiming)
// is kept as unusable rather than failing the whole line: the answer is
// still good, only that timing is not.
type serverNanos struct {
	set, ok bool
	d       time.Duration
}

func (n *serverNanos) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n.set = true
	f, err := strconv.ParseFloat(string(b), 64)
	n.ok = err == nil && f >= 0 && f <= float64(maxServerTiming)
	if n.ok {
		n.d = time.Duration(math.Round(f))
	}
	return nil
}

// applyDone records what the final object says about the whole request.
func (l *ollamaLine) applyDone(r *Result) {
	r.FinishReason = sanitize([]byte(l.DoneReason))
	for _, t := range [...]struct {
		name string
		v    serverNanos
	}{
		{"total", l.TotalDuration}, {"load", l.LoadDuration},
		{"prompt_eval", l.PromptEvalDuration}, {"eval", l.EvalDuration},
	} {
		switch {
		case !t.v.set:
		case !t.v.ok:
			r.ServerTimingsInvalid++
		default:
			r.ServerTimings = append(r.ServerTimings, ServerTiming{Name: t.name, Duration: t.v.d})
		}
	}
	if l.EvalCount != nil {
		r.OutputTokens, r.OutputTokensSource = max(*l.EvalCount, 0), TokenSourceServer
	}
	// prompt_eval_count counts the prompt tokens evaluated for this
	// request; a prefix Ollama had cached is not in it.
	if l.PromptEvalCount != nil {
		r.InputTokens, r.InputTokensSource = max(*l.PromptEvalCount, 0), TokenSourceServer
	}
}

// ollamaStream accumulates one streamed answer.
type ollamaStream struct {
	line  ollamaLine
	lines int
}

// onLine handles one NDJSON line that arrived at `at`; unterminated says
// the stream ended inside it. It returns true when the stream is over
// (r.Outcome set).
func (st *ollamaStream) onLine(line []byte, at time.Time, unterminated bool, r *Result) bool {
	fail := func(o Outcome, err error) bool { return r.end(at, o, err) }
	st.lines++
	if err := st.line.decode(line); err != nil {
		if unterminated {
			return fail(OutcomeIncomplete, fmt.Errorf("stream ended inside line %d after %d output chunks", st.lines, len(r.Chunks)))
		}
		return fail(OutcomeProtocolError, fmt.Errorf("line %d is not a valid JSON object (%v): %s", st.lines, err, sanitize(line)))
	}
	if msg, ok := st.line.errorMessage(); ok {
		// Ollama writes an error that happens after the head was sent as
		// {"error": ...} with no status; when it can, it sends the same
		// error with its status, 500 unless the error says otherwise.
		// Mid-stream it is therefore a server-side failure.
		return fail(OutcomeHTTP5xx, fmt.Errorf("mid-stream server error: %s", msg))
	}
	if st.line.hasOutput() {
		noteOllama(r, &st.line, line, at)
		if err := r.addChunk(at, 1); err != nil {
			return r.stopOnChunkError(at, err)
		}
	}
	if st.line.Done {
		st.line.applyDone(r)
		return r.end(at, OutcomeSuccess, nil)
	}
	return false
}

// finish falls back to counting when the server gave no eval_count: Ollama
// streams one token per object.
func (st *ollamaStream) finish(r *Result) {
	if r.OutputTokensSource == TokenSourceNone {
		r.countChunkTokens()
	}
}

func (d *ollamaDriver) readStream(ex *exchange, r *Result) {
	opts := d.t.opts
	nr := newNDJSONReader(ex.body, opts.MaxLineBytes, opts.MaxResponseBytes)
	var st ollamaStream
	for {
		line, at, err := nr.next()
		if err != nil {
			if errors.Is(err, errNDJSONLineTooLong) {
				// Not among the limit errors classify knows.
				r.end(time.Now(), OutcomeProtocolError, fmt.Errorf("reading the stream: %w", err))
			} else {
				ex.streamBroke(r, err, fmt.Errorf("stream ended without the final done object after %d output chunks", len(r.Chunks)))
			}
			break
		}
		if st.onLine(line, at, nr.unterminated, r) {
			if r.Outcome == OutcomeSuccess && !r.Cut() {
				ex.drain(nr.skip)
			}
			break
		}
	}
	st.finish(r)
}

// readBody handles a whole answer (stream:false), or a JSON answer to a
// streaming request.
func (d *ollamaDriver) readBody(ex *exchange, r *Result, wantedStream bool) {
	var l ollamaLine
	decode := func(b []byte) error {
		if err := l.decode(b); err != nil {
			return err
		}
		noteOllama(r, &l, b, time.Time{})
		return nil
	}
	if !ex.readAnswer(r, "a valid JSON object", decode) {
		return
	}
	if msg, ok := l.errorMessage(); ok {
		r.Outcome, r.Err = OutcomeHTTP5xx, fmt.Errorf("server error in a 200 answer: %s", msg)
		return
	}
	if wantedStream {
		streamAnsweredWithJSON(r)
		return
	}
	if !l.Done {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("answer is not done (done:false in a non-streamed answer)")
		return
	}
	l.applyDone(r)
	r.Outcome = OutcomeSuccess
}
