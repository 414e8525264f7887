package probe

import "testing"

// BenchmarkRequestBody: one request body per protocol, as encoded before
// bodies were cached ("before": OpenAI's struct, the other protocols'
// maps), without a cache now ("uncached": a prompt of its own, e.g.
// synthetic; TGI and Ollama from structs), and from the workload item's
// cache ("cached": copied with max_tokens and the id filled in).
func BenchmarkRequestBody(b *testing.B) {
	temp := 0.7
	target := &httpTarget{opts: TargetOptions{Model: "m"}}
	oai := &openAIDriver{chat: true, t: target}
	oll := &ollamaDriver{chat: true, t: target}
	trOpts, _ := TritonOptions{}.resolved()
	tr := &tritonGenerateDriver{t: target, triton: trOpts}
	vllmInputs, _ := TritonPreset(PresetVLLMBackend)
	vllmOpts, _ := TritonOptions{Inputs: vllmInputs}.resolved()
	trv := &tritonGenerateDriver{t: target, triton: vllmOpts}
	for _, p := range []struct {
		name          string
		before, after bodyEncoder
	}{
		{"openai_chat", oai.encodeBody, oai.encodeBody},
		{"tgi", func(r *Request, _ string) ([]byte, error) { return tgiRequestBodyMap(r) }, encodeTGIBody},
		{"ollama", func(r *Request, _ string) ([]byte, error) { return oll.requestBodyMap(r) }, oll.encodeBody},
		{"triton_generate_trtllm", tr.requestBody, tr.requestBody},
		{"triton_generate_vllm", trv.requestBody, trv.requestBody},
	} {
		item := Request{
			Messages:  []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Write a short story about a robot who learns to paint."}},
			Prompt:    "Write a short story about a robot who learns to paint.",
			MaxTokens: 128, Stream: true, Temperature: &temp, IgnoreEOS: true,
			Bodies: &BodyCache{},
		}
		key := new(encoderKey)
		const id = "0123456789abcdef0123456789abcdef"
		for _, v := range []struct {
			name string
			run  func(req *Request) ([]byte, error)
		}{
			{"before", func(req *Request) ([]byte, error) { return p.before(req, id) }},
			{"uncached", func(req *Request) ([]byte, error) { return p.after(req, id) }},
			{"cached", func(req *Request) ([]byte, error) { return encodeBody(key, p.after, req, id) }},
		} {
			b.Run(p.name+"/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req := item
					if _, err := v.run(&req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
