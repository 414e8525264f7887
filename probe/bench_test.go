package probe

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkStreamEvent measures parsing one SSE event and decoding its
// chunk, the per-token work between two timestamps.
func BenchmarkStreamEvent(b *testing.B) {
	benchEvent(b, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`)
}

// benchEvent measures parsing one SSE event carrying payload and handling
// its chunk, as BenchmarkStreamEvent does for a content delta.
func benchEvent(b *testing.B, payload string) {
	event := "data: " + payload + "\n\n"
	r := newSSEReader(&loopReader{data: []byte(strings.Repeat(event, 16))}, DefaultMaxLineBytes, 0)
	d := &openAIDriver{}
	var st streamState
	var chunk oaiChunk
	res := &Result{Start: time.Now()}
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		ev, err := r.next()
		if err != nil {
			b.Fatal(err)
		}
		d.onEvent(ev, res, &st, &chunk)
		if len(res.Chunks) > 1<<16 {
			res.Chunks, st.cum = res.Chunks[:0], st.cum[:0]
		}
	}
}

// BenchmarkOpenAIRequestBody: encoding one chat request body, from the
// struct (what requestBody does without Extra) and from a map (before).
func BenchmarkOpenAIRequestBody(b *testing.B) {
	temp := 0.0
	d := &openAIDriver{chat: true, t: &httpTarget{}}
	req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "Write a short story about a robot."}},
		MaxTokens: 128, Stream: true, Temperature: &temp, IgnoreEOS: true}
	for _, c := range []struct {
		name   string
		encode func(*Request) ([]byte, error)
	}{{"struct", d.requestBody}, {"map", d.requestBodyMap}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.encode(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
