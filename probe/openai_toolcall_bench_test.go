package probe

import "testing"

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
