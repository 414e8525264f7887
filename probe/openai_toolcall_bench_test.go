package probe

import (
	"strings"
	"testing"
	"time"
)

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

// BenchmarkStreamEventToolCall: a vLLM tool-call arguments fragment, the
// per-token chunk of a model answering with a function call.
func BenchmarkStreamEventToolCall(b *testing.B) {
	benchEvent(b, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"city"}}]},"logprobs":null,"finish_reason":null}]}`)
}

// BenchmarkStreamEventToolCallFirst: the first fragment, with id, type and
// the function's name.
func BenchmarkStreamEventToolCallFirst(b *testing.B) {
	benchEvent(b, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"id":"chatcmpl-tool-4f1c0e","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`)
}
