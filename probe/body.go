package probe

import (
	"bytes"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
)

// BodyCache holds the request bodies encoded for one workload item (a
// prompt of an inline or file workload), shared by every request drawn
// from it: a driver encodes the item once and afterwards only copies the
// bytes, with the request's max_tokens, min_tokens (and id, where the
// body carries one) written into their places. Requests that share it may differ in
// ID, MaxTokens, MinTokens, Model and Stream; a request that differs in
// anything else (built or changed at send time) does not match the
// cached encoding and is encoded in full, as is one without a cache.
// The zero value is ready; it is safe for concurrent use.
type BodyCache struct {
	// entries is read without a lock and replaced whole under mu.
	entries atomic.Pointer[[]*bodyTemplate]
	mu      sync.Mutex
	next    int // the entry replaced next once the cache is full
}

// maxBodyTemplates bounds one item's encodings: one per driver the item
// is sent through, model and stream flag (a probe has one of each); a
// driver replaced on reload leaves its entry to be overwritten.
const maxBodyTemplates = 8

// maxTemplateBytes bounds one cached body. A longer one (a long-context
// prompt) is encoded per request: each probe keeps its own cache, and
// copies of many long prompts would add up to more memory than the
// encoding saves time.
const maxTemplateBytes = 64 << 10

// bodyEncoder is a driver's full encoding of a request body; id is the
// request id, for bodies that carry it.
type bodyEncoder func(req *Request, id string) ([]byte, error)

// encoderKey identifies one driver's encoding in a BodyCache without
// keeping the driver alive. It has a field so that every key is a distinct
// allocation (pointers to zero-size values may be equal).
type encoderKey struct{ _ byte }

// bodyTemplate is one encoding of an item: body with the sentinel values
// in it, and where they are.
type bodyTemplate struct {
	enc *encoderKey
	// req is the request the template was encoded from; a request matches
	// when it equals it in every field but ID, MaxTokens and MinTokens
	// (where only whether it is set counts).
	req Request
	// body is nil when the item could not be turned into a template (a
	// sentinel also occurs elsewhere in the body, or the body is over
	// maxTemplateBytes); such a request is encoded in full every time.
	body  []byte
	holes []bodyHole
}

type bodyHole struct {
	at, n int // the sentinel's offset and length in body
	kind  holeKind
}

type holeKind uint8

const (
	holeMaxTokens holeKind = iota
	holeMinTokens
	holeID
)

// Sentinels put in place of max_tokens, min_tokens and the request id to
// find where the encoding writes them. The token counts are in the range a
// workload draws (1..1<<20), which every datatype a Triton input may take
// holds exactly and JSON writes as a plain integer, as it does every value
// of that range; no sentinel is a prefix of another.
const (
	sentinelMaxA  = 1048573
	sentinelMaxB  = 1000003
	sentinelMinA  = 1048571
	sentinelMinB  = 1000033
	sentinelIDA   = "llmprobeBodySentinelIdA0"
	sentinelIDB   = "llmprobeBodySentinelIdB11"
	maxHoleTokens = 1 << 20
)

// holeValues are what a template's holes are filled with.
type holeValues struct {
	maxTokens, minTokens int
	id                   string
}

// encodeBody is enc's body for req: from the request's BodyCache when it
// has one that matches, else encoded in full.
func encodeBody(key *encoderKey, enc bodyEncoder, req *Request, id string) ([]byte, error) {
	c := req.Bodies
	if c == nil || key == nil || !holeTokens(req.MaxTokens) || (req.MinTokens != 0 && !holeTokens(req.MinTokens)) || !plainJSONString(id) {
		return enc(req, id)
	}
	t := c.lookup(key, req)
	if t == nil {
		if c.changed(key, req) {
			// Not the item's request any more (a conversation built on
			// it, say): encoded in full, without pushing the item's own
			// template out.
			return enc(req, id)
		}
		if t = c.add(key, enc, req); t == nil {
			return enc(req, id)
		}
	}
	if t.body == nil {
		return enc(req, id)
	}
	return t.fill(holeValues{req.MaxTokens, req.MinTokens, id}), nil
}

func holeTokens(n int) bool { return n >= 1 && n <= maxHoleTokens }

func (c *BodyCache) lookup(key *encoderKey, req *Request) *bodyTemplate {
	if p := c.entries.Load(); p != nil {
		for _, t := range *p {
			if t.enc == key && t.matches(req) {
				return t
			}
		}
	}
	return nil
}

// changed reports whether c already holds a template of key for req's
// model, stream flag and min_tokens presence — the fields that may differ
// between requests of one item and still be cached — which req does not
// match in its other fields: req was changed after it was drawn.
func (c *BodyCache) changed(key *encoderKey, req *Request) bool {
	if p := c.entries.Load(); p != nil {
		for _, t := range *p {
			if t.enc == key && t.req.Model == req.Model && t.req.Stream == req.Stream && t.req.MinTokens == min(req.MinTokens, 1) {
				return true
			}
		}
	}
	return false
}

// add encodes req's template and keeps it. It returns nil when encoding
// fails, so that the caller's own encoding gives the error.
func (c *BodyCache) add(key *encoderKey, enc bodyEncoder, req *Request) *bodyTemplate {
	t := newBodyTemplate(key, enc, req)
	if t == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if found := c.lookup(key, req); found != nil {
		return found // a concurrent request added it first
	}
	var entries []*bodyTemplate
	if p := c.entries.Load(); p != nil {
		entries = append(entries, *p...)
	}
	if len(entries) < maxBodyTemplates {
		entries = append(entries, t)
	} else {
		entries[c.next] = t
		c.next = (c.next + 1) % maxBodyTemplates
	}
	c.entries.Store(&entries)
	return t
}

// newBodyTemplate encodes req twice, with two sets of sentinels, and
// records where the first set is. The holes are exactly the places where
// the two encodings differ only by the sentinels; when a sentinel also
// occurs elsewhere (a prompt quoting it), the template has no body and the
// item is encoded per request.
func newBodyTemplate(key *encoderKey, enc bodyEncoder, req *Request) *bodyTemplate {
	t := &bodyTemplate{enc: key, req: *req}
	t.req.ID, t.req.MaxTokens = "", 0
	ra, rb := *req, *req
	ra.MaxTokens, rb.MaxTokens = sentinelMaxA, sentinelMaxB
	if req.MinTokens != 0 {
		ra.MinTokens, rb.MinTokens = sentinelMinA, sentinelMinB
		t.req.MinTokens = 1
	}
	a, err := enc(&ra, sentinelIDA)
	if err != nil {
		return nil
	}
	b, err := enc(&rb, sentinelIDB)
	if err != nil {
		return nil
	}
	if len(a) > maxTemplateBytes {
		return t
	}
	holes := findHoles(a)
	if bytes.Equal(fillHoles(a, holes, holeValues{sentinelMaxB, sentinelMinB, sentinelIDB}), b) {
		t.body, t.holes = a, holes
	}
	return t
}

// findHoles lists the occurrences of the A sentinels in body, in order.
func findHoles(body []byte) []bodyHole {
	marks := [...][]byte{
		holeMaxTokens: []byte(strconv.Itoa(sentinelMaxA)),
		holeMinTokens: []byte(strconv.Itoa(sentinelMinA)),
		holeID:        []byte(sentinelIDA),
	}
	var holes []bodyHole
next:
	for i := 0; i < len(body); {
		for k, m := range marks {
			if bytes.HasPrefix(body[i:], m) {
				holes = append(holes, bodyHole{at: i, n: len(m), kind: holeKind(k)})
				i += len(m)
				continue next
			}
		}
		i++
	}
	return holes
}

func fillHoles(body []byte, holes []bodyHole, v holeValues) []byte {
	if len(holes) == 0 {
		return body
	}
	out := make([]byte, 0, len(body)+len(holes)*(len(v.id)+8))
	prev := 0
	for _, h := range holes {
		out = append(out, body[prev:h.at]...)
		switch h.kind {
		case holeMaxTokens:
			out = strconv.AppendInt(out, int64(v.maxTokens), 10)
		case holeMinTokens:
			out = strconv.AppendInt(out, int64(v.minTokens), 10)
		case holeID:
			out = append(out, v.id...)
		}
		prev = h.at + h.n
	}
	return append(out, body[prev:]...)
}

// fill is the body of a request with the values v. A body without holes
// is shared: the HTTP drivers only read it.
func (t *bodyTemplate) fill(v holeValues) []byte { return fillHoles(t.body, t.holes, v) }

// matches reports whether req equals the template's request in every
// field but ID, MaxTokens and MinTokens (of which only whether it is set
// counts). Strings and slices of the same workload item share their
// bytes, so most comparisons stop at equal pointers; Extra maps match only
// when they are the same map.
func (t *bodyTemplate) matches(req *Request) bool {
	w := &t.req
	return req.Model == w.Model && req.Stream == w.Stream && min(req.MinTokens, 1) == w.MinTokens &&
		req.IgnoreEOS == w.IgnoreEOS && req.Prompt == w.Prompt &&
		equalPtr(req.Temperature, w.Temperature) && equalPtr(req.TopP, w.TopP) && equalPtr(req.Seed, w.Seed) &&
		equalSlice(req.Messages, w.Messages) && equalSlice(req.Stop, w.Stop) &&
		sameMap(req.Extra, w.Extra)
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

func equalSlice[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameMap(a, b map[string]any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// plainJSONString reports whether encoding/json writes s between quotes
// unchanged: printable ASCII without the characters it escapes. Request
// ids are hex; any other id is encoded with its body in full.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
