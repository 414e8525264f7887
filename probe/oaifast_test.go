package probe

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fastSlowSeeds are chunks and answers as servers send them, and the
// corners where a hand-written reader could drift from encoding/json.
var fastSlowSeeds = []string{
	// The simulator / vLLM chat stream.
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"word "},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"word "},"logprobs":null,"finish_reason":"length"}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"total_tokens":109,"completion_tokens":100}}`,
	// vLLM with continuous usage stats, usage null, reasoning fields.
	`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
	`{"id":"x","choices":[{"delta":{"content":"a"}}],"usage":null}`,
	`{"choices":[{"delta":{"reasoning_content":"think"}}]}`,
	`{"choices":[{"delta":{"reasoning":"think","content":null}}]}`,
	// Completions and whole answers.
	`{"id":"cmpl-1","object":"text_completion","choices":[{"text":"word ","index":0,"logprobs":null,"finish_reason":null}]}`,
	`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello","reasoning_content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_tokens_details":null}}`,
	// Whitespace, multiple choices, empty containers and present's corners.
	" { \"choices\" : [ { \"text\" : \"\" } , { \"text\" : [ ] } , { \"delta\" : { \"content\" : { } } } ] } ",
	`{"choices":[{"text":"[]"},{"text":"{}"},{"text":0},{"text":false},{"text":{"a":[1,{"b":"}"}]}}]}`,
	`{"choices":[{"delta":null,"message":null,"finish_reason":""}]}`,
	`{"choices":[{"text":"a\"b","finish_reason":"st\u006fp"}]}`,
	`{"choices":[]}`, `{}`, `{"choices":null}`, `{"usage":{}}`,
	// Things the fast path must leave to encoding/json.
	`{"Choices":[{"delta":{"content":"a"}}]}`,
	`{"choices":[{"Delta":{"content":"a"}}]}`,
	`{"choices":[{"delta":{"CONTENT":"a"}}]}`,
	`{"choi\u0063es":[{"delta":{"content":"a"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[]}`,
	`{"choices":[{"delta":{"content":"a"},"delta":{"content":""}}]}`,
	`{"choices":[null,{"text":"a"}]}`,
	`{"choices":"nope"}`, `{"choices":[{"delta":"x"}]}`, `{"choices":[{"finish_reason":3}]}`,
	`{"usage":{"completion_tokens":1.0}}`, `{"usage":{"completion_tokens":"1"}}`,
	`{"usage":{"completion_tokens":99999999999999999999}}`, `{"usage":{"completion_tokens":null}}`,
	`{"usage":{"completion_tokens":-3,"prompt_tokens":1e2}}`, `{"usage":[]}`,
	`{"object":"error","message":"boom","code":500}`, `{"object":5}`, `{"object":"err\u006fr"}`,
	`{"error":{"message":"x","code":400}}`, `{"error":null,"choices":[]}`, `{"error":"x","error_type":"y"}`,
	`{"detail":"bad"}`, "{\"\u212aey\":1}", "{\"choice\u017f\":[]}",
	`[]`, `null`, `"x"`, `1`,
}

// toolCallSeeds are streamed function calls as servers send them; every
// one must take the fast path (TestOAIChunkFastPathTakesCommonChunks).
var toolCallSeeds = []string{
	// vLLM: the name first (arguments absent), then argument fragments.
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-9c2d","type":"function","index":0,"function":{"name":"get_weather"}}]},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \""}}]},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}`,
	// OpenAI: role, null content and an empty arguments string beside the name.
	`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}`,
	// Parallel calls; an arguments fragment of the second.
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}},{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":null}}]}}]}`,
	// Ollama /v1: the whole call in one chunk.
	`{"id":"chatcmpl-3","object":"chat.completion.chunk","model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`,
	// TGI before 3.2: one call object instead of an array.
	`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":{"index":0,"id":"","type":"function","function":{"name":null,"arguments":"{\""}}},"logprobs":null,"finish_reason":null}]}`,
	// The legacy functions API.
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":""}},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\n"}},"finish_reason":null}]}`,
	// SGLang's nulls, and fragments that carry nothing.
	`{"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"finish_reason":null,"matched_stop":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function"}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[],"function_call":null}},{"delta":{"tool_calls":[{},{"function":null},{"function":{}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"","arguments":[]}}],"function_call":{"name":{}}}}]}`,
	// Arguments as an object (non-string) is present, like content.
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"city":"Paris"}}}]}}]}`,
	// A whole answer.
	`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":20}}`,
}

// llamaCppSeeds are llama.cpp's chunks with its timings object (the
// captured fixture's final chunks, newer builds' usage chunk); every one
// must take the fast path.
var llamaCppSeeds = []string{
	`{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1795306046,"id":"chatcmpl-n1jsqBsn4oamLbYTUQw9lmFB9aVw4LYn","model":"small","system_fingerprint":"b0-unknown","object":"chat.completion.chunk","usage":{"completion_tokens":12,"prompt_tokens":34,"total_tokens":46},"timings":{"prompt_n":34,"prompt_ms":31.989,"prompt_per_token_ms":0.9408529411764706,"prompt_per_second":1062.8653599674888,"predicted_n":12,"predicted_ms":80.5,"predicted_per_token_ms":6.708333333333333,"predicted_per_second":149.06832298136646}}`,
	`{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1795306046,"model":"small","system_fingerprint":"b0-unknown","object":"text_completion","usage":{"completion_tokens":8,"prompt_tokens":5,"total_tokens":13},"id":"chatcmpl-4mdYu7ayvwLpP3Fkyl8zrl7vHdSuRvUj","timings":{"prompt_n":5,"prompt_ms":11.929,"prompt_per_token_ms":2.3858,"prompt_per_second":419.14661748679686,"predicted_n":8,"predicted_ms":51.469,"predicted_per_token_ms":6.433625,"predicted_per_second":155.43336765820203}}`,
	`{"choices":[],"created":1,"id":"x","model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":3,"prompt_tokens":2,"total_tokens":5},"timings":{"cache_n":0,"prompt_n":2,"prompt_ms":1e1,"prompt_per_token_ms":5E0,"predicted_n":3,"predicted_ms":0.001,"predicted_per_token_ms":-0.0,"draft_n":1,"draft_n_accepted":0}}`,
	// NaN and Inf as nlohmann::json writes them, odd values and keys.
	`{"choices":[{"delta":{"content":"a"}}],"timings":{"prompt_n":0,"prompt_ms":0,"prompt_per_token_ms":null,"prompt_per_second":null,"predicted_ms":"7","predicted_per_token_ms":1e400}}`,
	` { "timings" : { "prompt_ms" : 1 , "prompt_ms" : 2 , "Predicted_ms" : 3, "predicted_m\u0073" : 4, "x" : { "prompt_ms" : [ 5 ] } } , "choices" : [ ] } `,
	`{"timings":null}`, `{"timings":{}}`, `{"timings":[1,{"prompt_ms":1}]}`, `{"timings":"x"}`, `{"timings":12}`,
}

// toolCallCorners are tool-call shapes the fast path leaves to
// encoding/json; the equivalence checks still run on them.
var toolCallCorners = []string{
	`{"choices":[{"delta":{"tool_calls":[null,{"function":{"name":"a"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":["x",{"function":{"name":"a"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":"x"}}]}`, `{"choices":[{"delta":{"tool_calls":1}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":"get_weather"}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[[{"function":{"name":"a"}}]]}}]}`,
	`{"choices":[{"delta":{"Tool_Calls":[{"function":{"name":"a"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"Function":{"NAME":"a"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"argument\u0073":"x"}}]}}]}`,
	"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"argument\u017f\":\"x\"}}]}}]}",
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","name":""}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a"},"function":null}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a"}}],"tool_calls":null}}]}`,
	`{"choices":[{"delta":{"function_call":"auto"}}]}`, `{"choices":[{"delta":{"function_call":[{"name":"a"}]}}]}`,
	`{"choices":[{"delta":{"function_call":{"name":"a"},"Function_Call":null}}]}`,
}

// timingsCorners: a timings key given twice, in another case or escaped
// is left to encoding/json, which reads it with the same reader.
var timingsCorners = []string{
	`{"timings":{"prompt_ms":1},"timings":{"predicted_ms":2}}`, `{"Timings":{"prompt_ms":1}}`, `{"timing\u0073":{"prompt_ms":1}}`,
}

// invalidChunks are broken in ways only a validating reader notices: the
// fast path, which validates as it reads, must decline every one (decode
// then fails in encoding/json), whether the fault is in a field it reads
// or in one it skips.
var invalidChunks = []string{
	`{"choices":[{"delta":{"content":"a"}}]`, `{"choices":[{"delta":{"content":"a"}}]}x`,
	`{"choices":[{"delta":{"content":"a"}},]}`, `{"choices":[{"delta":{"content":"a"},}]}`,
	`{"choices":[{"delta":{"content":"a"}}],}`, `{"choices" [] }`, `{"choices":[] "usage":null}`,
	`{"choices":[{"delta":{"content":"a"}}],"id":01}`, `{"choices":[],"created":1.}`,
	`{"choices":[],"created":-}`, `{"choices":[],"created":1e}`, `{"choices":[],"created":+1}`,
	`{"choices":[],"logprobs":nul}`, `{"choices":[],"x":tru}`, `{"choices":[],"x":True}`,
	`{"usage":nulls}`, `{"choices":[{"finish_reason":nulL}]}`, `{"choices":[{"delta":nil}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
	"{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
	"{\"choices\":[],\"id\":\"\xc3\"}",
	`{"choices":[{"delta":{"content":"a\qb"}}]}`, `{"choices":[{"delta":{"content":"\u12G4"}}]}`,
	`{"choices":[{"delta":{"content":"a`, `{"choices":[],"x":{"a" 1}}`, `{"choices":[],"x":[1 2]}`,
	`{"choices":[],"x":{"a":1,}}`, `{"choices":[],"x":{1:2}}`, `{"choices":[],"x":[}`,
	`{"usage":{"completion_tokens":1,}}`, `{"usage":{"completion_tokens":01}}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a",}}]}}]}`,
	`{"timings":{"prompt_ms":1,}}`, `{"timings":{"prompt_ms":1.e3}}`,
	`{"choices":[],"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"choices":[{"text":` + strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70) + `}]}`,
	"", " ", "{", `{"choices":[],"x":"\ud800"`,
}

func TestOAIChunkFastPathRejectsInvalid(t *testing.T) {
	for _, s := range invalidChunks {
		var c oaiChunk
		c.reset()
		if c.decodeFast([]byte(s)) {
			t.Errorf("fast path accepted invalid %q", s)
		}
		if err := c.decode([]byte(s)); err == nil {
			t.Errorf("decode accepted invalid %q", s)
		}
	}
}

// Deep but legal nesting in a skipped field is within maxJSONDepth for
// decodeJSON; the fast path declines it (its budget is smaller) and the
// answer is still decoded.
func TestOAIChunkFastPathDeepButLegal(t *testing.T) {
	s := `{"choices":[{"delta":{"content":"a"}}],"x":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}`
	var c oaiChunk
	if err := c.decode([]byte(s)); err != nil || !c.hasOutput() {
		t.Fatalf("decode(%d-deep) = %v, output %v; want the content", 61, err, c.hasOutput())
	}
}

// The fast path must give exactly what encoding/json gives whenever it
// claims an input; when it declines, decode falls back to decodeJSON.
func checkFastSlow(t *testing.T, data []byte) {
	t.Helper()
	var fast, slow oaiChunk
	fast.reset()
	if !fast.decodeFast(data) {
		return
	}
	// The fast path validates as it reads: whatever it accepts must pass
	// every check the slow path makes (UTF-8, depth, json.Valid).
	if !utf8.Valid(data) || checkJSONDepth(data, maxJSONDepth) != nil || !json.Valid(data) {
		t.Fatalf("fast path accepted invalid input %q", data)
	}
	slow.reset()
	if err := decodeJSON(data, &slow); err != nil {
		t.Fatalf("fast path accepted %q, encoding/json fails: %v", data, err)
	}
	// The fast path keeps Object only as far as it matters: "error" or not.
	if slow.Object == "error" {
		t.Fatalf("fast path accepted an error object: %q", data)
	}
	slow.Object = ""
	if len(fast.Choices) != len(slow.Choices) {
		t.Fatalf("%q: %d choices, encoding/json %d", data, len(fast.Choices), len(slow.Choices))
	}
	for i := range fast.Choices {
		if !reflect.DeepEqual(fast.Choices[i], slow.Choices[i]) {
			t.Fatalf("%q: choice %d = %+v, encoding/json %+v", data, i, fast.Choices[i], slow.Choices[i])
		}
	}
	fast.Choices, slow.Choices = nil, nil
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: fast %+v, encoding/json %+v", data, fast, slow)
	}
}

func TestOAIChunkFastPathMatchesEncodingJSON(t *testing.T) {
	for _, s := range allFastSlowSeeds() {
		checkFastSlow(t, []byte(s))
	}
}

func allFastSlowSeeds() []string {
	seeds := append([]string(nil), fastSlowSeeds...)
	seeds = append(seeds, toolCallSeeds...)
	seeds = append(seeds, llamaCppSeeds...)
	seeds = append(seeds, timingsCorners...)
	seeds = append(seeds, invalidChunks...)
	return append(seeds, toolCallCorners...)
}

// The shapes every stream is made of take the fast path; without this
// test a fast path that always declined would pass everything else.
func TestOAIChunkFastPathTakesCommonChunks(t *testing.T) {
	common := append(fastSlowSeeds[:13:13], toolCallSeeds...)
	for _, s := range append(common, llamaCppSeeds...) {
		var c oaiChunk
		c.reset()
		if !c.decodeFast([]byte(s)) {
			t.Errorf("fast path declined %s", s)
		}
	}
}

func FuzzOAIChunkFastPath(f *testing.F) {
	for _, s := range allFastSlowSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastSlow(t, data)
		// Decoding twice into the same chunk, as a stream does, must not
		// leak the first into the second.
		var c oaiChunk
		_ = c.decode([]byte(fastSlowSeeds[2]))
		err := c.decode(data)
		var want oaiChunk
		wantErr := decodeJSON(data, &want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode error %v, encoding/json %v", data, err, wantErr)
		}
		if err == nil && (c.hasOutput() != want.hasOutput() || c.finishReason() != want.finishReason() ||
			!reflect.DeepEqual(c.Usage, want.Usage) || c.Timings != want.Timings) {
			t.Fatalf("%q: decode %+v, encoding/json %+v", data, c, want)
		}
		_, gotAPI := c.apiError()
		_, wantAPI := want.apiError()
		if err == nil && gotAPI != wantAPI {
			t.Fatalf("%q: api error %v, encoding/json %v", data, gotAPI, wantAPI)
		}
	})
}
