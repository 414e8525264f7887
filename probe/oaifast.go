package probe

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// A fast path for decoding OpenAI chunks, the prober's per-token work.
// encoding/json's reflection-driven Unmarshal was over a third of the
// prober's CPU at 64 streams (docs/performance.md). decodeFast reads the
// common shapes of a chunk directly and gives exactly the oaiChunk that
// json.Unmarshal would; anything it does not fully understand (error
// objects, escaped or case-variant keys, duplicate keys, null elements,
// non-integer counts, unexpected types) makes it give up, and the caller
// then decodes with decodeJSON as before. FuzzOAIChunkFastPath checks the
// equivalence.

// fastJSONOK runs the guards decodeJSON runs before decoding, plus
// encoding/json's own syntax check (json.Valid is the check Unmarshal
// starts with). decodeFast relies on all three: it only walks structure.
func fastJSONOK(b []byte) bool {
	return utf8.Valid(b) && checkJSONDepth(b, maxJSONDepth) == nil && json.Valid(b)
}

// decodeFast fills c, which must be freshly reset, from b, which must have
// passed fastJSONOK. false means "not handled": c may be partly filled and
// must be reset before the slow path.
func (c *oaiChunk) decodeFast(b []byte) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	_, ok := walkFields(b, i, topKeys, func(k, v int) (int, bool) {
		switch k {
		case topChoices:
			return c.decodeChoices(b, v)
		case topUsage:
			switch b[v] {
			case 'n': // null: the pointer stays nil
				return v + len("null"), true
			case '{':
				c.Usage = &oaiUsage{}
				return decodeUsage(b, v, c.Usage)
			}
			return 0, false
		case topObject:
			// Object only matters when it is "error"; any other string
			// leaves the chunk as an ordinary one, so it is not kept.
			if b[v] != '"' {
				return 0, false
			}
			end, esc := skipString(b, v)
			if esc || string(b[v+1:end-1]) == "error" {
				return 0, false
			}
			return end, true
		case topTimings:
			// llama.cpp's timings: the one reader both paths use.
			end := skipValue(b, v)
			c.Timings.parse(b[v:end])
			return end, true
		}
		// error, error_type, message, code, detail: the slow path.
		return 0, false
	})
	return ok
}

// Top-level keys: those decodeFast handles first, then the error fields it
// leaves to the slow path. Every json-tagged field of oaiChunk and
// errorFields must be listed, so that a case variant is never skipped.
const (
	topChoices = iota
	topUsage
	topObject
	topTimings
)

var topKeys = []string{"choices", "usage", "object", "timings", "error", "error_type", "message", "code", "detail"}

var choiceKeys = []string{"text", "delta", "message", "finish_reason"}

var deltaKeys = []string{"content", "reasoning_content", "reasoning", "tool_calls", "function_call"}

var toolCallKeys = []string{"function"}

var functionKeys = []string{"name", "arguments"}

var usageKeys = []string{"prompt_tokens", "completion_tokens"}

func (c *oaiChunk) decodeChoices(b []byte, v int) (int, bool) {
	if b[v] != '[' {
		return 0, false
	}
	i := skipWS(b, v+1)
	if b[i] == ']' {
		return i + 1, true
	}
	for {
		if b[i] != '{' {
			return 0, false // null elements and the like: slow path
		}
		c.Choices = append(c.Choices, oaiChoice{})
		ch := &c.Choices[len(c.Choices)-1]
		end, ok := decodeChoice(b, i, ch)
		if !ok {
			return 0, false
		}
		i = skipWS(b, end)
		if b[i] == ']' {
			return i + 1, true
		}
		i = skipWS(b, i+1) // ','
	}
}

func decodeChoice(b []byte, i int, ch *oaiChoice) (int, bool) {
	return walkFields(b, i, choiceKeys, func(k, v int) (int, bool) {
		switch k {
		case 0: // text
			end := skipValue(b, v)
			ch.Text = present(presentValue(b[v:end]))
			return end, true
		case 1: // delta
			return decodeDelta(b, v, &ch.Delta.oaiDelta)
		case 2: // message
			return decodeDelta(b, v, &ch.Message.oaiDelta)
		default: // finish_reason
			switch b[v] {
			case 'n':
				return v + len("null"), true
			case '"':
				end, esc := skipString(b, v)
				if esc {
					return 0, false
				}
				s := string(b[v+1 : end-1])
				ch.FinishReason = &s
				return end, true
			}
			return 0, false
		}
	})
}

func decodeDelta(b []byte, v int, d *oaiDelta) (int, bool) {
	switch b[v] {
	case 'n': // null into a struct changes nothing
		return v + len("null"), true
	case '{':
	default:
		return 0, false
	}
	return walkFields(b, v, deltaKeys, func(k, v int) (int, bool) {
		switch k {
		case 3: // tool_calls
			end, carried, ok := decodeToolCalls(b, v)
			d.ToolCalls = toolCalls(carried)
			return end, ok
		case 4: // function_call
			end, carried, ok := decodeFunction(b, v)
			d.FunctionCall = functionCall(carried)
			return end, ok
		}
		end := skipValue(b, v)
		p := present(presentValue(b[v:end]))
		switch k {
		case 0:
			d.Content = p
		case 1:
			d.ReasoningContent = p
		default:
			d.Reasoning = p
		}
		return end, true
	})
}

// decodeToolCalls reads a tool_calls value at b[v] as toolCallsValue
// does: null, an array of call objects, or one call object (older TGI).
// It keeps no per-call state, so a huge array costs time linear in its
// bytes and no memory. Anything else (null or other non-object calls,
// a function that is not an object) is left to the slow path, which
// decides what an odd shape means.
func decodeToolCalls(b []byte, v int) (end int, carried, ok bool) {
	switch b[v] {
	case 'n':
		return v + len("null"), false, true
	case '{':
		return decodeToolCall(b, v)
	case '[':
	default:
		return 0, false, false
	}
	i := skipWS(b, v+1)
	if b[i] == ']' {
		return i + 1, false, true
	}
	for {
		if b[i] != '{' {
			return 0, false, false
		}
		end, c, ok := decodeToolCall(b, i)
		if !ok {
			return 0, false, false
		}
		carried = carried || c
		i = skipWS(b, end)
		if b[i] == ']' {
			return i + 1, carried, true
		}
		i = skipWS(b, i+1) // ','
	}
}

// decodeToolCall reads one call object at b[i]; only its function
// matters (index, id and type carry no output).
func decodeToolCall(b []byte, i int) (end int, carried, ok bool) {
	end, ok = walkFields(b, i, toolCallKeys, func(_, v int) (int, bool) {
		end, c, ok := decodeFunction(b, v)
		carried = c
		return end, ok
	})
	return end, carried, ok
}

// decodeFunction reads a function object {"name","arguments"} at b[v]
// (a tool call's function, or the legacy function_call), or null.
func decodeFunction(b []byte, v int) (end int, carried, ok bool) {
	switch b[v] {
	case 'n': // null into a struct changes nothing
		return v + len("null"), false, true
	case '{':
	default:
		return 0, false, false
	}
	end, ok = walkFields(b, v, functionKeys, func(_, v int) (int, bool) {
		end := skipValue(b, v)
		carried = carried || presentValue(b[v:end])
		return end, true
	})
	return end, carried, ok
}

func decodeUsage(b []byte, v int, u *oaiUsage) (int, bool) {
	return walkFields(b, v, usageKeys, func(k, v int) (int, bool) {
		end := skipValue(b, v)
		// encoding/json decodes an int with ParseInt on the literal and
		// fails on anything else (1.0, 1e3, strings); null would leave it
		// alone. Only the plain case is handled here.
		if c := b[v]; c != '-' && (c < '0' || c > '9') {
			return 0, false
		}
		n, err := strconv.ParseInt(string(b[v:end]), 10, 64)
		if err != nil || int64(int(n)) != n {
			return 0, false
		}
		if k == 0 {
			u.PromptTokens = int(n)
		} else {
			u.CompletionTokens = int(n)
		}
		return end, true
	})
}

// walkFields calls field for each member of the object starting at b[i]
// ('{') whose key is one of names (at most 64), with the name's index and
// the index of the value; field returns the index just past the value.
// Members with other keys are skipped. It gives up on what encoding/json
// would match differently or keep instead (a key with escapes, a case
// variant or a non-ASCII key, see matchKey; a name given twice, of which
// encoding/json keeps the last), leaving those to the slow path. It
// returns the index just past the object.
func walkFields(b []byte, i int, names []string, field func(k, v int) (int, bool)) (int, bool) {
	var seen uint64
	i = skipWS(b, i+1)
	if b[i] == '}' {
		return i + 1, true
	}
	for {
		end, esc := skipString(b, i)
		if esc {
			return 0, false
		}
		k, ok := matchKey(b[i+1:end-1], names)
		if !ok {
			return 0, false
		}
		v := skipWS(b, skipWS(b, end)+1) // past ':'
		next := 0
		if k < 0 {
			next = skipValue(b, v)
		} else {
			if seen&(1<<k) != 0 {
				return 0, false
			}
			seen |= 1 << k
			if next, ok = field(k, v); !ok {
				return 0, false
			}
		}
		i = skipWS(b, next)
		if b[i] == '}' {
			return i + 1, true
		}
		i = skipWS(b, i+1) // past ','
	}
}

// matchKey finds key among names, as encoding/json matches field names:
// exactly, else ASCII case-insensitively (and, for non-ASCII keys, with
// Unicode folding). It returns the index, -1 for a key that is none of
// them, and false for anything but an exact match or a clear non-match
// (a case variant, a non-ASCII key), which the slow path must handle.
func matchKey(key []byte, names []string) (int, bool) {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return 0, false
		}
	}
	for i, n := range names {
		if string(key) == n {
			return i, true
		}
	}
	for _, n := range names {
		if equalFoldASCII(key, n) {
			return 0, false
		}
	}
	return -1, true
}

func equalFoldASCII(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// ('"') and whether it contained an escape.
func skipString(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return len(b), esc
}

// skipValue returns the index just past the (valid) value at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	// A number or a literal.
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}
