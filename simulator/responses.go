package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// This file is the OpenAI Responses API front-end, POST /v1/responses,
// shaped like vLLM's (entrypoints/openai/responses): the event sequence
// and object shapes of the API's reference client (openai-go's
// ResponseStreamEventUnion), each event as an `event: <type>` line and a
// `data:` line whose JSON repeats the type and carries a growing
// sequence_number; no [DONE]. Requests are planned as the equivalent chat
// request, so lengths, reasoning, faults and the prefix cache behave as
// on /v1/chat/completions.

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID string          `json:"previous_response_id"`
	// vLLM's sampling extensions, taken as on chat.
	Seed      *int64 `json:"seed"`
	IgnoreEOS bool   `json:"ignore_eos"`
	MinTokens int    `json:"min_tokens"`
}

// responsesInputItem is an input item: a message whose content is a
// string or a list of input_text/output_text parts.
type responsesInputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// maxStoredResponses bounds the responses kept for previous_response_id;
// the oldest go first.
const maxStoredResponses = 1024

// responseStore keeps the conversation text of stored responses, so a
// request naming one as previous_response_id continues it.
type responseStore struct {
	mu    sync.Mutex
	text  map[string]string
	order []string
}

func newResponseStore() *responseStore {
	return &responseStore{text: map[string]string{}}
}

func (s *responseStore) put(id, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.text[id]; !ok {
		if len(s.order) >= maxStoredResponses {
			delete(s.text, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, id)
	}
	s.text[id] = text
}

func (s *responseStore) get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.text[id]
	return t, ok
}

// responsesFrontEnd encodes one request's answer; it is stateful, as the
// events number themselves and the *.done events repeat the text so far.
type responsesFrontEnd struct {
	s  *Server
	oa *openAIFrontEnd // plans as chat; its error bodies are vLLM's
	// conversation is the request's text (the previous response's
	// conversation, instructions and input), kept with the answer when
	// the response is stored.
	conversation string
	store        bool

	started, reasoningOpen, messageOpen, reasoningDone, messageDone bool
	seq                                                             int64
	reasoning, text                                                 strings.Builder
	out                                                             bytes.Buffer
}

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses() http.HandlerFunc {
	return s.serveOpenAIStyle(func(*http.Request) openAIStyle {
		oa := &openAIFrontEnd{chat: true}
		fe := &responsesFrontEnd{s: s, oa: oa, store: true}
		return openAIStyle{
			protocol: "openai_responses", fe: fe, oa: oa,
			plan: func(id string, body []byte, h http.Header, seq uint64) (*plan, *apiError) {
				return s.planResponses(fe, id, body, h, seq)
			},
			bind: func(j *job) { oa.j = j },
		}
	})
}

// planResponses turns the request into its chat equivalent and plans that.
func (s *Server) planResponses(fe *responsesFrontEnd, id string, body []byte, h http.Header, seq uint64) (*plan, *apiError) {
	var req responsesRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	if dec.More() {
		return nil, badRequest("invalid JSON body: trailing data after the request object")
	}
	if req.Store != nil {
		fe.store = *req.Store
	}
	var msgs []chatMessage
	text := func(role, s string) {
		b, _ := json.Marshal(s)
		msgs = append(msgs, chatMessage{Role: role, Content: b})
	}
	if req.PreviousResponseID != "" {
		prev, ok := s.responses.get(req.PreviousResponseID)
		if !ok {
			return nil, &apiError{status: http.StatusNotFound, param: "previous_response_id",
				msg: fmt.Sprintf("Response with id '%s' not found.", req.PreviousResponseID)}
		}
		text("user", prev)
	}
	if req.Instructions != nil && *req.Instructions != "" {
		text("system", *req.Instructions)
	}
	in, err := responsesInput(req.Input)
	if err != nil {
		return nil, err
	}
	for _, m := range in {
		text(m.Role, m.text)
	}
	var conv strings.Builder
	for _, m := range msgs {
		var s string
		_ = json.Unmarshal(m.Content, &s)
		conv.WriteString(s)
		conv.WriteByte('\n')
	}
	fe.conversation = conv.String()
	chat := map[string]any{"model": req.Model, "messages": msgs, "stream": req.Stream}
	if req.MaxOutputTokens != nil {
		chat["max_tokens"] = *req.MaxOutputTokens
	}
	if req.Seed != nil {
		chat["seed"] = *req.Seed
	}
	if req.IgnoreEOS {
		chat["ignore_eos"] = true
	}
	if req.MinTokens != 0 {
		chat["min_tokens"] = req.MinTokens
	}
	b, jerr := json.Marshal(chat)
	if jerr != nil {
		return nil, badRequest("%v", jerr)
	}
	return s.planOpenAI(fe.oa, id, b, h, seq)
}

type responsesMessage struct{ Role, text string }

// responsesInput reads input: a string (one user message) or a list of
// message items.
func responsesInput(raw json.RawMessage) ([]responsesMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, &apiError{status: http.StatusBadRequest, param: "input", msg: "input is required"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []responsesMessage{{"user", s}}, nil
	}
	var items []responsesInputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, param: "input", msg: "input must be a string or a list of input items"}
	}
	if len(items) == 0 {
		return nil, &apiError{status: http.StatusBadRequest, param: "input", msg: "input must not be empty"}
	}
	out := make([]responsesMessage, 0, len(items))
	for i, it := range items {
		if it.Type != "" && it.Type != "message" {
			return nil, badRequest("input[%d]: the simulator takes message items only, not %q", i, it.Type)
		}
		if it.Role == "" {
			return nil, badRequest("input[%d].role is required", i)
		}
		var text string
		if json.Unmarshal(it.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(it.Content, &parts); err != nil {
				return nil, badRequest("input[%d].content must be a string or a list of content parts", i)
			}
			var b strings.Builder
			for _, p := range parts {
				if p.Type == "input_text" || p.Type == "output_text" {
					b.WriteString(p.Text)
				}
			}
			text = b.String()
		}
		out = append(out, responsesMessage{it.Role, text})
	}
	return out, nil
}

func (f *responsesFrontEnd) streamContentType() string { return "text/event-stream; charset=utf-8" }

// doneAfterError: a failed response ends the stream; nothing follows.
func (f *responsesFrontEnd) doneAfterError() bool { return false }

func (f *responsesFrontEnd) errorBody(status int, msg string) []byte {
	return f.oa.errorBody(status, msg)
}

func (f *responsesFrontEnd) respID(p *plan) string { return "resp_" + p.id }
func (f *responsesFrontEnd) msgID(p *plan) string  { return "msg_" + p.id }
func (f *responsesFrontEnd) rsID(p *plan) string   { return "rs_" + p.id }

// emitJSON appends one event to f.out: its type line and its data, v with
// type and sequence_number set.
func (f *responsesFrontEnd) emitJSON(typ string, v map[string]any) {
	v["type"] = typ
	v["sequence_number"] = f.seq
	f.seq++
	f.out.WriteString("event: ")
	f.out.WriteString(typ)
	f.out.WriteString("\ndata: ")
	f.out.Write(marshalText(v))
	f.out.WriteString("\n\n")
}

// Wire objects, in the field order of vLLM's pydantic models.

type responsesUsage struct {
	InputTokens         int                `json:"input_tokens"`
	InputTokensDetails  responsesInDetails `json:"input_tokens_details"`
	OutputTokens        int                `json:"output_tokens"`
	OutputTokensDetails responsesOutDetail `json:"output_tokens_details"`
	TotalTokens         int                `json:"total_tokens"`
}

type responsesInDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type responsesOutDetail struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func responsesUsageOf(p *plan) responsesUsage {
	u := responsesUsage{InputTokens: p.promptTokens, OutputTokens: p.outputTokens, TotalTokens: p.promptTokens + p.outputTokens}
	u.OutputTokensDetails.ReasoningTokens = p.reasoningTokens
	if p.prefix.on {
		u.InputTokensDetails.CachedTokens = p.prefix.cached
	}
	return u
}

func (f *responsesFrontEnd) reasoningItem(p *plan, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{map[string]any{"type": "reasoning_text", "text": f.reasoning.String()}}
	}
	return map[string]any{"id": f.rsID(p), "type": "reasoning", "summary": []any{}, "content": content, "encrypted_content": nil, "status": status}
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (f *responsesFrontEnd) messageItem(p *plan, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{outputTextPart(f.text.String())}
	}
	return map[string]any{"id": f.msgID(p), "type": "message", "role": "assistant", "status": status, "content": content}
}

// response is the Response object in the given status; output and usage
// once it has ended.
func (f *responsesFrontEnd) response(p *plan, status string) map[string]any {
	output := []any{}
	if f.reasoningDone {
		output = append(output, f.reasoningItem(p, "completed"))
	}
	if f.messageDone {
		output = append(output, f.messageItem(p, "completed"))
	}
	r := map[string]any{
		"id": f.respID(p), "object": "response", "created_at": p.created, "model": p.model,
		"status": status, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": map[string]any{},
		"output": output, "parallel_tool_calls": true, "temperature": 1.0, "tool_choice": "auto", "tools": []any{},
		"top_p": 1.0, "max_output_tokens": p.maxTokens, "background": false, "previous_response_id": nil,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled", "usage": nil,
	}
	switch status {
	case "completed", "incomplete":
		r["usage"] = responsesUsageOf(p)
	}
	if status == "incomplete" {
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	return r
}

// endStatus is the status an answer that ran to its end has: incomplete
// when it stopped at max_output_tokens, as the API reports it.
func endStatus(p *plan) string {
	if p.finishReason == finishLength {
		return "incomplete"
	}
	return "completed"
}

func (f *responsesFrontEnd) start(p *plan) {
	if f.started {
		return
	}
	f.started = true
	f.emitJSON("response.created", map[string]any{"response": f.response(p, "in_progress")})
	f.emitJSON("response.in_progress", map[string]any{"response": f.response(p, "in_progress")})
}

func (f *responsesFrontEnd) outputIndex(reasoning bool) int {
	if reasoning || !f.reasoningDone {
		return 0
	}
	return 1
}

func (f *responsesFrontEnd) closeReasoning(p *plan) {
	if !f.reasoningOpen {
		return
	}
	f.reasoningOpen, f.reasoningDone = false, true
	part := map[string]any{"type": "reasoning_text", "text": f.reasoning.String()}
	f.emitJSON("response.reasoning_text.done", map[string]any{"item_id": f.rsID(p), "output_index": 0, "content_index": 0, "text": f.reasoning.String()})
	f.emitJSON("response.content_part.done", map[string]any{"item_id": f.rsID(p), "output_index": 0, "content_index": 0, "part": part})
	f.emitJSON("response.output_item.done", map[string]any{"output_index": 0, "item": f.reasoningItem(p, "completed")})
}

func (f *responsesFrontEnd) closeMessage(p *plan) {
	if !f.messageOpen {
		return
	}
	f.messageOpen, f.messageDone = false, true
	i := f.outputIndex(false)
	f.emitJSON("response.output_text.done", map[string]any{"item_id": f.msgID(p), "output_index": i, "content_index": 0, "text": f.text.String(), "logprobs": []any{}})
	f.emitJSON("response.content_part.done", map[string]any{"item_id": f.msgID(p), "output_index": i, "content_index": 0, "part": outputTextPart(f.text.String())})
	f.emitJSON("response.output_item.done", map[string]any{"output_index": i, "item": f.messageItem(p, "completed")})
}

func (f *responsesFrontEnd) encodeEvent(ev event, p *plan) []byte {
	f.out.Reset()
	switch ev.kind {
	case kindPing, kindUsage:
		return nil // no keep-alives; usage is in response.completed
	case kindMalformed:
		f.start(p)
		f.out.WriteString("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"unterminated\n\n")
	case kindRole:
		f.start(p)
	case kindReasoning:
		f.start(p)
		if !f.reasoningOpen {
			f.reasoningOpen = true
			f.emitJSON("response.output_item.added", map[string]any{"output_index": 0, "item": f.reasoningItem(p, "in_progress")})
			f.emitJSON("response.content_part.added", map[string]any{"item_id": f.rsID(p), "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "reasoning_text", "text": ""}})
		}
		f.reasoning.WriteString(ev.text)
		f.emitJSON("response.reasoning_text.delta", map[string]any{"item_id": f.rsID(p), "output_index": 0, "content_index": 0, "delta": ev.text})
	case kindContent:
		f.start(p)
		f.closeReasoning(p)
		i := f.outputIndex(false)
		if !f.messageOpen {
			f.messageOpen = true
			f.emitJSON("response.output_item.added", map[string]any{"output_index": i, "item": f.messageItem(p, "in_progress")})
			f.emitJSON("response.content_part.added", map[string]any{"item_id": f.msgID(p), "output_index": i, "content_index": 0, "part": outputTextPart("")})
		}
		f.text.WriteString(ev.text)
		f.emitJSON("response.output_text.delta", map[string]any{"item_id": f.msgID(p), "output_index": i, "content_index": 0, "delta": ev.text, "logprobs": []any{}})
	case kindFinish:
		f.start(p)
		f.closeReasoning(p)
		f.closeMessage(p)
	case kindDone:
		f.start(p)
		f.closeReasoning(p)
		f.closeMessage(p)
		status := endStatus(p)
		f.emitJSON("response."+status, map[string]any{"response": f.response(p, status)})
		f.remember(p)
	case kindError:
		f.start(p)
		f.errorEvent(ev, p)
	}
	return bytes.Clone(f.out.Bytes())
}

// errorEvent is a failure mid-response: a server error fails the
// response (response.failed with its error object, code server_error),
// anything else is an error event with the API's code for it.
func (f *responsesFrontEnd) errorEvent(ev event, p *plan) {
	msg := ev.msg
	if ev.status >= 500 {
		if msg == "" {
			msg = "Internal server error"
		}
		r := f.response(p, "failed")
		r["error"] = map[string]any{"code": "server_error", "message": msg}
		f.emitJSON("response.failed", map[string]any{"response": r})
		return
	}
	code := "invalid_request_error"
	if ev.status == http.StatusTooManyRequests {
		code = "rate_limit_exceeded"
	}
	if msg == "" {
		msg = "Injected fault: invalid request found during generation"
	}
	f.emitJSON("error", map[string]any{"code": code, "message": msg, "param": nil})
}

// remember stores the response for previous_response_id.
func (f *responsesFrontEnd) remember(p *plan) {
	if f.store {
		f.s.responses.put(f.respID(p), f.conversation+f.text.String())
	}
}

// body is the whole Response of a non-streamed request.
func (f *responsesFrontEnd) body(p *plan, text, reasoning string) []byte {
	f.reasoning.WriteString(reasoning)
	f.text.WriteString(text)
	f.reasoningDone = reasoning != ""
	f.messageDone = true
	f.remember(p)
	return marshalText(f.response(p, endStatus(p)))
}
