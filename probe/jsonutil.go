package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting in anything we decode. Real chunks nest about
// five levels; encoding/json's own limit (10000) would let a hostile server
// make us build deep structures before failing.
const maxJSONDepth = 64

type jsonDepthError struct{ max int }

func (e jsonDepthError) Error() string {
	return fmt.Sprintf("JSON nested deeper than %d levels", e.max)
}

var openBrace, openBracket = []byte{'{'}, []byte{'['}

// checkJSONDepth rejects input nested deeper than limit. It only tracks
// brackets outside strings; validity is left to the decoder.
func checkJSONDepth(b []byte, limit int) error {
	// Nesting cannot exceed the number of opening brackets (those inside
	// strings included), which a vectorised count finds quickly; chunks
	// have a handful.
	if bytes.Count(b, openBrace)+bytes.Count(b, openBracket) <= limit {
		return nil
	}
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > limit {
				return jsonDepthError{limit}
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// decodeJSON is json.Unmarshal behind the UTF-8 and depth guards. JSON must
// be UTF-8 (RFC 8259); encoding/json would silently replace bad bytes, but
// invalid bytes from an inference server mean a broken stream.
func decodeJSON(b []byte, v any) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("not valid UTF-8")
	}
	if err := checkJSONDepth(b, maxJSONDepth); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// errorFields is the union of the error shapes servers send, embedded in
// the chunk and body types so one decode covers both:
//
//	{"error":{"message","type","code"}}        OpenAI, vLLM ≥0.10, llama.cpp, Ollama
//	{"error":{flat object}}                    vLLM (older) mid-stream
//	{"error":"text","error_type":"..."}        TGI native routes
//	{"error":{"message","http_status_code"}}   TGI OpenAI routes, in a stream
//	{"object":"error","message","type","code"} vLLM (older), SGLang
type errorFields struct {
	Error     json.RawMessage `json:"error"`
	ErrorType string          `json:"error_type"`
	Object    string          `json:"object"`
	Message   json.RawMessage `json:"message"`
	Code      json.RawMessage `json:"code"`
	Detail    json.RawMessage `json:"detail"` // FastAPI request validation
}

type innerError struct {
	Message json.RawMessage `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	// HTTPStatusCode is TGI's: its OpenAI routes send every in-stream
	// error as {"message","http_status_code":422} (tgiOpenAIError).
	HTTPStatusCode json.RawMessage `json:"http_status_code"`
}

// apiError decodes the inner object; a TGI OpenAI-route error, which has
// http_status_code and no code, is classified by its message.
func (in *innerError) apiError() apiError {
	e := apiError{message: jsonText(in.Message), kind: sanitize([]byte(in.Type)), code: jsonCode(in.Code)}
	if e.code == 0 && len(in.HTTPStatusCode) > 0 {
		e = tgiOpenAIError(e.message, jsonCode(in.HTTPStatusCode))
	}
	return e
}

// apiError is a decoded server error.
type apiError struct {
	message string
	kind    string
	code    int // HTTP-like status from the body, 0 when absent
}

// outcome maps the error by its code, as the server would have had it been
// able to send a status line.
func (e apiError) outcome() Outcome {
	switch {
	case e.code >= 400 && e.code < 500:
		return OutcomeHTTP4xx
	case e.code >= 500 && e.code < 600:
		return OutcomeHTTP5xx
	}
	return OutcomeProtocolError
}

func (e apiError) Error() string {
	var b strings.Builder
	b.WriteString("server error")
	switch {
	case e.code != 0 && e.kind != "":
		fmt.Fprintf(&b, " (code %d, type %s)", e.code, e.kind)
	case e.code != 0:
		fmt.Fprintf(&b, " (code %d)", e.code)
	case e.kind != "":
		fmt.Fprintf(&b, " (type %s)", e.kind)
	}
	if e.message != "" {
		b.WriteString(": ")
		b.WriteString(e.message)
	}
	return b.String()
}

// apiError reports whether the fields describe an error and decodes it.
func (f *errorFields) apiError() (apiError, bool) {
	raw := bytes.TrimSpace(f.Error)
	switch {
	case len(raw) > 0 && !bytes.Equal(raw, []byte("null")):
		switch raw[0] {
		case '{':
			var in innerError
			if err := json.Unmarshal(raw, &in); err != nil {
				return apiError{message: sanitize(raw)}, true
			}
			return in.apiError(), true
		case '"':
			return apiError{message: jsonText(raw), kind: sanitize([]byte(f.ErrorType))}, true
		default:
			return apiError{message: sanitize(raw)}, true
		}
	case f.Object == "error":
		return apiError{message: jsonText(f.Message), code: jsonCode(f.Code)}, true
	}
	return apiError{}, false
}

// jsonText renders a JSON value for an error message: strings unquoted,
// anything else as compact JSON text; sanitized and truncated.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return sanitize([]byte(s))
		}
	}
	return sanitize(raw)
}

// jsonCode reads an error code given as a number or a numeric string.
func jsonCode(raw json.RawMessage) int {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// errorMessage extracts a human message from a (truncated) error body.
func errorMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if body[0] == '{' {
		var f errorFields
		if decodeJSON(body, &f) == nil {
			if e, ok := f.apiError(); ok {
				return e.Error()
			}
			if m := jsonText(f.Message); m != "" {
				return m
			}
			if d := jsonText(f.Detail); d != "" {
				return d
			}
		}
	}
	return sanitize(body)
}

// sanitize makes server-sent bytes safe to print on one line: invalid UTF-8
// and control characters become U+FFFD or spaces, whitespace runs collapse,
// and the result is cut at maxErrorMessage runes.
func sanitize(b []byte) string {
	var out strings.Builder
	space := false
	runes := 0
	for len(b) > 0 && runes < maxErrorMessage {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case unicode.IsSpace(r):
			space = out.Len() > 0
			continue
		case r == utf8.RuneError || unicode.IsControl(r):
			r = utf8.RuneError
		}
		if space {
			out.WriteByte(' ')
			runes++
			space = false
		}
		out.WriteRune(r)
		runes++
	}
	if len(b) > 0 {
		out.WriteString("…")
	}
	return out.String()
}
