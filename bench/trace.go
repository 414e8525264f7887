package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/workload"
)

// TraceRecord is one request of a trace: when it arrived and its shape.
// The names are those of the public Mooncake traces, so they replay as
// they are.
type TraceRecord struct {
	// Timestamp is milliseconds from the trace's start.
	Timestamp float64 `json:"timestamp"`
	// InputLength and OutputLength are tokens; the prompt is built with
	// InputLength words and the answer asked for with max_tokens =
	// OutputLength and ignore_eos.
	InputLength  int `json:"input_length"`
	OutputLength int `json:"output_length"`
	// HashIDs name the prompt's blocks of TraceBlockTokens tokens: two
	// requests sharing leading ids share that prefix, so a server's prefix
	// cache sees what it saw in production.
	HashIDs []int64 `json:"hash_ids,omitempty"`
}

// Trace is a loaded, checked trace.
type Trace struct {
	Path    string
	Records []TraceRecord
	// BlockTokens is the length of one hash_ids block (512 in Mooncake's
	// traces).
	BlockTokens int
}

// Trace limits: a record beyond them is a typo or a different unit.
const (
	maxTraceRecords = 10_000_000
	maxTraceTokens  = 1 << 20
	maxTraceLine    = 1 << 20
	// DefaultTraceBlockTokens is Mooncake's block size.
	DefaultTraceBlockTokens = 512
)

// LoadTrace reads a JSONL trace file (ParseTrace).
func LoadTrace(path string, blockTokens int) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	t, err := ParseTrace(f, path)
	if err != nil {
		return nil, err
	}
	t.BlockTokens = blockTokens
	return t, nil
}

// ParseTrace reads one JSON object per line; blank lines are skipped.
// Every error names the file and line and says what to fix: an empty
// trace, a malformed line, an unknown field, a negative length, or a
// timestamp earlier than the line before (a trace is replayed in order;
// sort it with `sort -n` on the timestamp first).
func ParseTrace(r io.Reader, name string) (*Trace, error) {
	t := &Trace{Path: name, BlockTokens: DefaultTraceBlockTokens}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, line)
		var rec TraceRecord
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s: %w; want {\"timestamp\": ms, \"input_length\": n, \"output_length\": n, \"hash_ids\": [...]}", where, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%s: more than one JSON value on the line; want one object per line", where)
		}
		switch {
		case math.IsNaN(rec.Timestamp) || math.IsInf(rec.Timestamp, 0) || rec.Timestamp < 0 || rec.Timestamp > float64(math.MaxInt64/int64(time.Millisecond)):
			return nil, fmt.Errorf("%s: timestamp %g: want milliseconds from the trace's start, ≥ 0", where, rec.Timestamp)
		case rec.InputLength < 0 || rec.InputLength > maxTraceTokens:
			return nil, fmt.Errorf("%s: input_length %d: want 0 to %d tokens", where, rec.InputLength, maxTraceTokens)
		case rec.OutputLength < 1 || rec.OutputLength > maxTraceTokens:
			return nil, fmt.Errorf("%s: output_length %d: want 1 to %d tokens", where, rec.OutputLength, maxTraceTokens)
		case len(t.Records) > 0 && rec.Timestamp < t.Records[len(t.Records)-1].Timestamp:
			return nil, fmt.Errorf("%s: timestamp %g is before the previous line's %g; a trace must be in time order (sort it by timestamp)", where, rec.Timestamp, t.Records[len(t.Records)-1].Timestamp)
		case len(t.Records) >= maxTraceRecords:
			return nil, fmt.Errorf("%s: more than %d records", where, maxTraceRecords)
		}
		t.Records = append(t.Records, rec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, maxTraceLine)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(t.Records) == 0 {
		return nil, fmt.Errorf("%s: the trace is empty; want one JSON object per line such as {\"timestamp\": 0, \"input_length\": 512, \"output_length\": 64}", name)
	}
	return t, nil
}

// Span is the time from the first to the last arrival at speed 1.
func (t *Trace) Span() time.Duration {
	return t.offset(len(t.Records)-1) - t.offset(0)
}

func (t *Trace) offset(i int) time.Duration {
	return time.Duration(t.Records[i].Timestamp * float64(time.Millisecond))
}

// Rate is the trace's mean arrival rate at speed 1 (requests per second).
func (t *Trace) Rate() float64 {
	if s := t.Span().Seconds(); s > 0 {
		return float64(len(t.Records)-1) / s
	}
	return math.Inf(1)
}

// Offsets are the arrivals from the first, played speed times as fast.
func (t *Trace) Offsets(speed float64) []time.Duration {
	out := make([]time.Duration, len(t.Records))
	first := t.offset(0)
	for i := range t.Records {
		out[i] = time.Duration(float64(t.offset(i)-first) / speed)
	}
	return out
}

// probe is p sending trace record i: the workload's request (model,
// sampling options) with the record's prompt length and output length.
func (t *Trace) probe(p *engine.Probe, i int) *engine.Probe {
	if i < 0 || i >= len(t.Records) {
		return p
	}
	c := *p
	c.Workload = traceWorkload{base: p.Workload, rec: t.Records[i], block: t.BlockTokens, seq: i}
	return &c
}

type traceWorkload struct {
	base  engine.Workload
	rec   TraceRecord
	block int
	seq   int
}

func (w traceWorkload) Draw(model string) workload.Draw {
	d := w.base.Draw(model)
	req := d.Request
	req.MaxTokens = w.rec.OutputLength
	req.MinTokens = 0
	req.IgnoreEOS = true
	text := w.prompt()
	req.Prompt = text
	req.Messages = req.Messages[:0]
	req.Messages = append(req.Messages, probe.Message{Role: "user", Content: text})
	d.InputTokens = w.rec.InputLength
	return d
}

// prompt is InputLength words: one deterministic block per hash id (the
// same id, the same words, so shared prefixes are shared), then words
// unique to the request so nothing else is.
func (w traceWorkload) prompt() string {
	n := w.rec.InputLength
	var words []string
	for _, id := range w.rec.HashIDs {
		if len(words) >= n {
			break
		}
		words = append(words, blockWords(id, min(w.block, n-len(words)))...)
	}
	if rest := n - len(words); rest > 0 {
		words = append(words, strings.Fields(uniqueWords(uint64(w.seq), rest))...)
	}
	return strings.Join(words, " ")
}

func blockWords(id int64, n int) []string {
	rng := rand.New(rand.NewPCG(uint64(id), 0x626c6f636b))
	return strings.Fields(randomWords(rng, n))
}

func uniqueWords(seq uint64, n int) string {
	return randomWords(rand.New(rand.NewPCG(seq, rand.Uint64())), n)
}

func randomWords(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(traceWords[rng.IntN(len(traceWords))])
	}
	return b.String()
}

// traceWords are common English words, one token each in the usual
// tokenizers, so a prompt of n words is about n tokens on a real server
// too (the simulator counts words).
var traceWords = [...]string{
	"time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child",
	"world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
	"place", "case", "week", "company", "system", "program", "question", "work", "number", "night",
	"point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month",
	"lot", "right", "study", "book", "eye", "job", "word", "business", "issue", "side",
	"kind", "head", "house", "service", "friend", "father", "power", "hour", "game", "line",
	"end", "member", "law", "car",
}
