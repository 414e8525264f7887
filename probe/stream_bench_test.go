package probe

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkOllamaLine measures reading one NDJSON line of an Ollama chat
// stream and handling it, the per-token work between two timestamps.
func BenchmarkOllamaLine(b *testing.B) {
	line := `{"model":"m","created_at":"2025-01-01T00:00:00.000000Z","message":{"role":"assistant","content":" token"},"done":false}` + "\n"
	nr := newNDJSONReader(&loopReader{data: []byte(strings.Repeat(line, 16))}, DefaultMaxLineBytes, 0)
	var st ollamaStream
	res := &Result{Start: time.Now()}
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		l, at, err := nr.next()
		if err != nil {
			b.Fatal(err)
		}
		st.onLine(l, at, false, res)
		if len(res.Chunks) > 1<<16 {
			res.Chunks = res.Chunks[:0]
		}
	}
}

// BenchmarkTGIEvent measures reading one /generate_stream event and
// handling its token.
func BenchmarkTGIEvent(b *testing.B) {
	event := `data:{"index":1,"token":{"id":1,"text":" token","logprob":-0.1,"special":false},"generated_text":null,"details":null}` + "\n\n"
	sr := newSSEReader(&loopReader{data: []byte(strings.Repeat(event, 16))}, DefaultMaxLineBytes, 0)
	var st tgiStream
	res := &Result{Start: time.Now()}
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		ev, err := sr.next()
		if err != nil {
			b.Fatal(err)
		}
		st.onEvent(ev, res)
		if len(res.Chunks) > 1<<16 {
			res.Chunks = res.Chunks[:0]
		}
	}
}

// BenchmarkWatchedBodyRead measures one read through the stall detector:
// the per-read cost the detector adds to every chunk.
func BenchmarkWatchedBodyRead(b *testing.B) {
	w := &watchedBody{r: &loopReader{data: []byte(strings.Repeat("x", 4096))}, stall: newStallWatch(time.Hour, func() {})}
	defer w.stall.Stop()
	p := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Read(p); err != nil {
			b.Fatal(err)
		}
	}
}
