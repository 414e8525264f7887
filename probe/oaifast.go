package probe

import (
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

// decodeFast validates as it reads: every byte of b is checked against
// the JSON grammar once (strings for control characters, escapes and
// UTF-8, numbers and literals for their syntax, nesting against a budget
// below maxJSONDepth), so no separate json.Valid, utf8.Valid or depth scan
// runs before it. Input it finds invalid, or nested deeper than
// fastSkipDepth allows, is "not handled" like any other shape it declines,
// and decodeJSON then gives the error (or, for deep but legal input, the
// answer) exactly as before.

// fastSkipDepth is the nesting a value decodeFast skips may have. The
// deepest value it skips sits inside seven containers it walks itself
// (object, choices, choice, delta, tool_calls, call, function), so anything
// it accepts is within maxJSONDepth; deeper input goes to decodeJSON.
const fastSkipDepth = maxJSONDepth - 8

// decodeFast fills c, which must be freshly reset, from b. false means
// "not handled" (including "not valid JSON"): c may be partly filled and
// must be reset before the slow path.
func (c *oaiChunk) decodeFast(b []byte) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	end, ok := walkFields(b, i, topKeys, func(k, v int) (int, bool) {
		switch k {
		case topChoices:
			return c.decodeChoices(b, v)
		case topUsage:
			switch b[v] {
			case 'n': // null: the pointer stays nil
				return scanLiteral(b, v, "null")
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
			end, esc, ok := scanString(b, v)
			if !ok || esc || string(b[v+1:end-1]) == "error" {
				return 0, false
			}
			return end, true
		case topTimings:
			// llama.cpp's timings: the one reader both paths use.
			end, ok := scanValue(b, v, fastSkipDepth)
			if !ok {
				return 0, false
			}
			c.Timings.parse(b[v:end])
			return end, true
		}
		// error, error_type, message, code, detail: the slow path.
		return 0, false
	})
	return ok && skipWS(b, end) == len(b)
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
	return walkArray(b, v, func(i int) (int, bool) {
		if b[i] != '{' {
			return 0, false // null elements and the like: slow path
		}
		c.Choices = append(c.Choices, oaiChoice{})
		return decodeChoice(b, i, &c.Choices[len(c.Choices)-1])
	})
}

func decodeChoice(b []byte, i int, ch *oaiChoice) (int, bool) {
	return walkFields(b, i, choiceKeys, func(k, v int) (int, bool) {
		switch k {
		case 0: // text
			end, ok := scanValue(b, v, fastSkipDepth)
			ch.Text = present(ok && presentValue(b[v:end]))
			return end, ok
		case 1: // delta
			return decodeDelta(b, v, &ch.Delta.oaiDelta)
		case 2: // message
			return decodeDelta(b, v, &ch.Message.oaiDelta)
		default: // finish_reason
			switch b[v] {
			case 'n':
				return scanLiteral(b, v, "null")
			case '"':
				end, esc, ok := scanString(b, v)
				if !ok || esc {
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
		return scanLiteral(b, v, "null")
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
		end, ok := scanValue(b, v, fastSkipDepth)
		if !ok {
			return 0, false
		}
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
		end, ok = scanLiteral(b, v, "null")
		return end, false, ok
	case '{':
		return decodeToolCall(b, v)
	case '[':
	default:
		return 0, false, false
	}
	end, ok = walkArray(b, v, func(i int) (int, bool) {
		if b[i] != '{' {
			return 0, false
		}
		end, c, ok := decodeToolCall(b, i)
		carried = carried || c
		return end, ok
	})
	return end, carried, ok
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
		end, ok = scanLiteral(b, v, "null")
		return end, false, ok
	case '{':
	default:
		return 0, false, false
	}
	end, ok = walkFields(b, v, functionKeys, func(_, v int) (int, bool) {
		end, ok := scanValue(b, v, fastSkipDepth)
		carried = carried || (ok && presentValue(b[v:end]))
		return end, ok
	})
	return end, carried, ok
}

func decodeUsage(b []byte, v int, u *oaiUsage) (int, bool) {
	return walkFields(b, v, usageKeys, func(k, v int) (int, bool) {
		// encoding/json decodes an int with ParseInt on the literal and
		// fails on anything else (1.0, 1e3, strings); null would leave it
		// alone. Only the plain case is handled here.
		if c := b[v]; c != '-' && (c < '0' || c > '9') {
			return 0, false
		}
		end, ok := scanNumber(b, v)
		if !ok {
			return 0, false
		}
		n, ok := parseJSONInt(b[v:end])
		if !ok {
			return 0, false
		}
		if k == 0 {
			u.PromptTokens = n
		} else {
			u.CompletionTokens = n
		}
		return end, true
	})
}

// parseJSONInt is strconv.ParseInt(string(num), 10, 64) into an int for
// a valid JSON number, without the string: false for a fraction, an
// exponent or a value that does not fit, as encoding/json fails on those.
func parseJSONInt(num []byte) (int, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) == 0 || len(num) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	const maxInt64 = 1<<63 - 1
	if (!neg && u > maxInt64) || (neg && u > maxInt64+1) {
		return 0, false
	}
	n := int64(u)
	if neg {
		n = -n
	}
	if int64(int(n)) != n {
		return 0, false
	}
	return int(n), true
}

// walkFields calls field for each member of the object starting at b[i]
// ('{') whose key is one of names (at most 64), with the name's index and
// the index of the value (inside b); field returns the index just past the
// value, and validates it. Members with other keys are validated and
// skipped. It gives up on invalid JSON and on what encoding/json would
// match differently or keep instead (a key with escapes, a case variant
// or a non-ASCII key, see matchKey; a name given twice, of which
// encoding/json keeps the last), leaving those to the slow path. It
// returns the index just past the object.
func walkFields(b []byte, i int, names []string, field func(k, v int) (int, bool)) (int, bool) {
	var seen uint64
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, esc, ok := scanString(b, i)
		if !ok || esc {
			return 0, false
		}
		k, ok := matchKey(b[i+1:end-1], names)
		if !ok {
			return 0, false
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		v := skipWS(b, i+1)
		if v >= len(b) {
			return 0, false
		}
		var next int
		if k < 0 {
			next, ok = scanValue(b, v, fastSkipDepth)
		} else {
			if seen&(1<<k) != 0 {
				return 0, false
			}
			seen |= 1 << k
			next, ok = field(k, v)
		}
		if !ok {
			return 0, false
		}
		i = skipWS(b, next)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipWS(b, i+1)
		default:
			return 0, false
		}
	}
}

// walkArray calls elem with the index (inside b) of each element of the
// array starting at b[i] ('['); elem returns the index just past the
// element, and validates it. It returns the index just past the array.
func walkArray(b []byte, i int, elem func(v int) (int, bool)) (int, bool) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		if i >= len(b) {
			return 0, false
		}
		end, ok := elem(i)
		if !ok {
			return 0, false
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipWS(b, i+1)
		default:
			return 0, false
		}
	}
}

// scanValue validates the JSON value at b[i] and returns the index just
// past it. Containers may nest at most depth levels (counting the value's
// own); deeper is "not handled", as invalid input is.
func scanValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case '{', '[':
		if depth <= 0 {
			return 0, false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == closing {
			return i + 1, true
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, false
				}
				end, _, ok := scanString(b, i)
				if !ok {
					return 0, false
				}
				i = skipWS(b, end)
				if i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i = skipWS(b, i+1)
			}
			end, ok := scanValue(b, i, depth-1)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case closing:
				return i + 1, true
			case ',':
				i = skipWS(b, i+1)
			default:
				return 0, false
			}
		}
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	}
	return scanNumber(b, i)
}

// scanLiteral checks that lit (true, false or null) starts at b[i].
func scanLiteral(b []byte, i int, lit string) (int, bool) {
	end := i + len(lit)
	if end > len(b) || string(b[i:end]) != lit {
		return 0, false
	}
	return end, true
}

// scanNumber validates the number at b[i] against JSON's grammar:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scanString validates the string starting at b[i] ('"'): no control
// characters, valid escapes, valid UTF-8 (decodeJSON rejects invalid
// UTF-8 where encoding/json would replace it). It returns the index just
// past the closing quote and whether the string contained an escape.
func scanString(b []byte, i int) (end int, esc, ok bool) {
	for j := i + 1; j < len(b); {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, esc, true
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return 0, false, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[j+2 : j+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				j += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			j += size
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
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
