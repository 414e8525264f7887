package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"time"
)

// This file is the front-end of Ollama's native API: POST /api/generate
// and /api/chat, streamed as NDJSON (one object per token, then a done
// object with done_reason, counts and the server's durations in ns) or
// answered as one object; GET /api/tags, /api/version and "/". Errors are
// {"error": "..."} with a status before the stream starts, and the same
// object as a line (no status) once it has.

type ollamaRequest struct {
	Model    string        `json:"model"`
	Prompt   *string       `json:"prompt"`
	System   string        `json:"system"`
	Messages []chatMessage `json:"messages"`
	// Stream defaults to true on Ollama.
	Stream *bool `json:"stream"`
	// Tools makes a chat answer a call of the first one (ollamaToolCall).
	Tools   []ollamaTool `json:"tools"`
	Options struct {
		NumPredict  *int     `json:"num_predict"`
		Seed        *int64   `json:"seed"`
		Temperature *float64 `json:"temperature"`
		TopP        *float64 `json:"top_p"`
		Stop        []string `json:"stop"`
	} `json:"options"`
}

type ollamaTool struct {
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// ollamaToolCall is api.ToolCall as Ollama writes it (api/types.go
// @fb30760): an id "call_" + 8 lowercase letters or digits
// (server/routes.go toolCallId), the function's index, name and arguments
// as an object.
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int               `json:"index"`
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	} `json:"function"`
}

// ollamaFrontEnd encodes one request's answer; per request because the
// done object reports the job's own timings.
type ollamaFrontEnd struct {
	j    *job
	chat bool
	// tool is the function a chat request with tools gets a call of.
	tool string
}

// toolCall is the answer's call of f.tool, its argument the words.
func (f *ollamaFrontEnd) toolCall(p *plan, words string) []ollamaToolCall {
	c := ollamaToolCall{ID: "call_" + toolCallSuffix(p.id)}
	c.Function.Name = f.tool
	c.Function.Arguments = map[string]string{"query": strings.TrimSpace(words)}
	return []ollamaToolCall{c}
}

// toolCallSuffix is 8 characters of [a-z0-9] derived from the request id,
// so that the same request gets the same call id.
func toolCallSuffix(id string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	v := h.Sum64()
	b := make([]byte, 8)
	for i := range b {
		b[i] = letters[v%uint64(len(letters))]
		v /= uint64(len(letters))
	}
	return string(b)
}

func (f *ollamaFrontEnd) protocol() string {
	if f.chat {
		return "ollama_chat"
	}
	return "ollama_generate"
}

func (f *ollamaFrontEnd) streamContentType() string { return "application/x-ndjson" }

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
}

// ollamaObject is one streamed object or the whole answer; the field order
// follows Ollama's api.GenerateResponse / api.ChatResponse.
type ollamaObject struct {
	Model              string         `json:"model"`
	CreatedAt          string         `json:"created_at"`
	Response           *string        `json:"response,omitempty"`
	Thinking           string         `json:"thinking,omitempty"`
	Message            *ollamaMessage `json:"message,omitempty"`
	Done               bool           `json:"done"`
	DoneReason         string         `json:"done_reason,omitempty"`
	Context            []int          `json:"context,omitempty"`
	TotalDuration      int64          `json:"total_duration,omitempty"`
	LoadDuration       int64          `json:"load_duration,omitempty"`
	PromptEvalCount    int            `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64          `json:"prompt_eval_duration,omitempty"`
	EvalCount          int            `json:"eval_count,omitempty"`
	EvalDuration       int64          `json:"eval_duration,omitempty"`
}

func (f *ollamaFrontEnd) object(p *plan, text, thinking string) ollamaObject {
	o := ollamaObject{Model: p.model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if f.chat {
		o.Message = &ollamaMessage{Role: "assistant", Content: text, Thinking: thinking}
	} else {
		o.Response = &text
		o.Thinking = thinking
	}
	return o
}

// done fills the final object. The durations follow Ollama's split
// (server/routes.go, llm/llama_server.go): load is the time before the
// request is scheduled (checkpointStart to checkpointLoaded: a model load
// when there was one, faults.model_load_delay, else the server's own
// handling); prompt_eval the prefill from admission to the first token,
// eval the decoding after it (llama-server's prompt_ms and predicted_ms).
// The wait for a free slot (Ollama's runner semaphore, here the engine
// queue) is in neither: only in total.
func (f *ollamaFrontEnd) done(o *ollamaObject, p *plan) {
	j := f.j
	now := time.Now()
	o.Done = true
	o.DoneReason = p.finishReason
	o.TotalDuration = int64(now.Sub(j.received))
	if !j.admitted.IsZero() {
		o.LoadDuration = max(int64(j.admitted.Sub(j.received)-j.queueWait), 1)
		if !j.firstToken.IsZero() {
			o.PromptEvalDuration = int64(j.firstToken.Sub(j.admitted))
			o.EvalDuration = int64(j.lastToken.Sub(j.firstToken))
		}
	}
	o.PromptEvalCount = p.promptTokens
	o.EvalCount = p.outputTokens
	if !f.chat {
		// /api/generate returns the conversation's token ids for the
		// next turn; a few hundred numbers on real answers.
		o.Context = make([]int, min(p.promptTokens+p.outputTokens, 4096))
		for i := range o.Context {
			o.Context[i] = 100 + i%30000
		}
	}
}

func ndjson(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	return append(b, '\n')
}

func (f *ollamaFrontEnd) encodeEvent(ev event, p *plan) []byte {
	switch ev.kind {
	case kindContent:
		if f.tool != "" {
			// Ollama's tool parser holds the call's tokens back and
			// sends the parsed call as one line, content "" (ChatHandler).
			o := f.object(p, "", "")
			o.Message.ToolCalls = f.toolCall(p, ev.text)
			return ndjson(o)
		}
		return ndjson(f.object(p, ev.text, ""))
	case kindReasoning:
		return ndjson(f.object(p, "", ev.text))
	case kindFinish:
		o := f.object(p, "", "")
		f.done(&o, p)
		return ndjson(o)
	case kindError:
		return ndjson(ollamaError{Error: "an error was encountered while running the model: injected fault"})
	case kindMalformed:
		return []byte(`{"model":"` + p.model + `","created_at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","response":"unterminated` + "\n")
	}
	// No role, usage or terminator lines: the done object ends the stream.
	return nil
}

func (f *ollamaFrontEnd) body(p *plan, text, reasoning string) []byte {
	o := f.object(p, text, reasoning)
	if f.tool != "" {
		o.Message.Content = ""
		o.Message.ToolCalls = f.toolCall(p, text)
	}
	f.done(&o, p)
	b, err := json.Marshal(o)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// ollamaServerBusy is Ollama's own words for a full queue (OLLAMA_MAX_QUEUE).
const ollamaServerBusy = "server busy, please try again.  maximum pending requests exceeded"

type ollamaError struct {
	Error string `json:"error"`
}

func (f *ollamaFrontEnd) errorBody(status int, msg string) []byte {
	if status == http.StatusServiceUnavailable {
		// Ollama's own words for a full queue (OLLAMA_MAX_QUEUE).
		msg = ollamaServerBusy
	}
	b, err := json.Marshal(ollamaError{Error: msg})
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// handleOllama serves /api/chat (chat) or /api/generate.
func (s *Server) handleOllama(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fe := &ollamaFrontEnd{chat: chat}
		st, ok := s.startNative(w, r, fe.protocol(), fe.errorBody)
		if !ok {
			return
		}
		seq := s.seq.Add(1)
		p, status, msg := s.planOllama(fe, st.id, st.body, r.Header, seq)
		if msg != "" {
			st.reject(s, w, status, "application/json; charset=utf-8", fe.errorBody(status, msg), msg)
			return
		}
		j := st.run(s, w, r, fe, p)
		fe.j = j
		j.run(r.Context())
	}
}

// ollamaModel finds the served name a request means: Ollama tags default
// to ":latest", so "m" and "m:latest" are the same model.
func (s *Server) ollamaModel(name string) (string, bool) {
	for _, n := range s.servedNames() {
		if n == name || n+":latest" == name || n == name+":latest" {
			return n, true
		}
	}
	return "", false
}

// planOllama validates like Ollama and decides the answer; a non-empty msg
// is an error answered with status.
func (s *Server) planOllama(fe *ollamaFrontEnd, id string, body []byte, h http.Header, seq uint64) (*plan, int, string) {
	var req ollamaRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, http.StatusBadRequest, err.Error()
	}
	if req.Model == "" {
		return nil, http.StatusBadRequest, "model is required"
	}
	model, ok := s.ollamaModel(req.Model)
	if !ok {
		return nil, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model)
	}
	var prompt int
	var promptText string
	if fe.chat {
		if len(req.Messages) == 0 {
			// Ollama answers an empty chat by loading the model; the
			// simulator has nothing to load and asks for a message.
			return nil, http.StatusBadRequest, "messages must not be empty"
		}
		var err error
		prompt, promptText, err = messageWords(req.Messages)
		if err != nil {
			return nil, http.StatusBadRequest, err.Error()
		}
	} else {
		if req.Prompt != nil {
			promptText = *req.Prompt
		}
		prompt = countWords(req.System) + countWords(promptText)
	}
	prompt = max(prompt, 1)
	if prompt >= s.cfg.MaxModelLen {
		return nil, http.StatusBadRequest, fmt.Sprintf("input length (%d tokens) exceeds the context length (%d tokens)", prompt, s.cfg.MaxModelLen)
	}
	// num_predict ≤ 0 means "until EOS or the context is full"; a longer
	// answer than the context allows stops there with done_reason length.
	room := s.cfg.MaxModelLen - prompt
	maxTokens := room
	if np := req.Options.NumPredict; np != nil && *np > 0 {
		maxTokens = min(*np, room)
	}
	stream := req.Stream == nil || *req.Stream
	p, err := s.nativePlan(id, model, prompt, maxTokens, strings.TrimSpace(req.System+"\n"+promptText), req.Options.Seed, h, seq, stream)
	if err != nil {
		return nil, http.StatusBadRequest, err.Error()
	}
	// One token per line; thinking models stream their thinking first; the
	// done object is a line of its own.
	p.opts.tokensPerChunk = 1
	p.opts.separateFinishChunk = true
	p.opts.roleChunk = RoleChunkOff
	p.reasoningTokens = min(p.opts.reasoningTokens, p.outputTokens)
	if fe.chat && len(req.Tools) > 0 && req.Tools[0].Function.Name != "" {
		// The answer is a call of the first tool, sent when its last
		// token is ready: all of its tokens in one line.
		fe.tool = req.Tools[0].Function.Name
		p.opts.tokensPerChunk = max(p.outputTokens-p.reasoningTokens, 1)
	}
	return p, 0, ""
}

// handleOllamaTags answers GET /api/tags with the served models.
func (s *Server) handleOllamaTags(w http.ResponseWriter, _ *http.Request) {
	if s.modelListFault(w) {
		return
	}
	type details struct {
		Format            string   `json:"format"`
		Family            string   `json:"family"`
		Families          []string `json:"families"`
		ParameterSize     string   `json:"parameter_size"`
		QuantizationLevel string   `json:"quantization_level"`
	}
	type model struct {
		Name       string  `json:"name"`
		Model      string  `json:"model"`
		ModifiedAt string  `json:"modified_at"`
		Size       int64   `json:"size"`
		Digest     string  `json:"digest"`
		Details    details `json:"details"`
	}
	list := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	for i, n := range s.servedNames() {
		name := n
		if !strings.Contains(name, ":") {
			name += ":latest"
		}
		list.Models = append(list.Models, model{
			Name: name, Model: name, ModifiedAt: s.started.UTC().Format(time.RFC3339Nano),
			Size: 4_700_000_000, Digest: fmt.Sprintf("%064x", i+1),
			Details: details{Format: "gguf", Family: "llama", Families: []string{"llama"}, ParameterSize: "8.0B", QuantizationLevel: "Q4_K_M"},
		})
	}
	b, _ := json.Marshal(list)
	writeBody(w, http.StatusOK, "application/json; charset=utf-8", b)
}

func (s *Server) handleOllamaVersion(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, "application/json; charset=utf-8", []byte(`{"version":"0.12.0-sim"}`))
}

func (s *Server) handleOllamaRoot(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusOK, "text/plain; charset=utf-8", []byte("Ollama is running"))
}
