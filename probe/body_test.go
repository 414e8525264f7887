package probe

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// bodyProtocol is one protocol's encoding: enc what a driver calls (the
// struct path), old the encoding before bodies were cached (maps, for all
// but OpenAI, whose struct path TestOpenAIRequestBodyStructMatchesMap
// already ties to its map).
type bodyProtocol struct {
	name string
	enc  bodyEncoder
	old  bodyEncoder
}

func bodyProtocols(t *testing.T, targetModel string) []bodyProtocol {
	t.Helper()
	target := &httpTarget{opts: TargetOptions{Model: targetModel}}
	var ps []bodyProtocol
	for _, chat := range []bool{true, false} {
		d := &openAIDriver{chat: chat, t: target}
		ps = append(ps, bodyProtocol{fmt.Sprintf("openai chat=%v", chat), d.encodeBody,
			func(r *Request, _ string) ([]byte, error) { return d.requestBodyMap(r) }})
		o := &ollamaDriver{chat: chat, t: target}
		ps = append(ps, bodyProtocol{fmt.Sprintf("ollama chat=%v", chat), o.encodeBody,
			func(r *Request, _ string) ([]byte, error) { return o.requestBodyMap(r) }})
	}
	ps = append(ps, bodyProtocol{"tgi", encodeTGIBody, func(r *Request, _ string) ([]byte, error) { return tgiRequestBodyMap(r) }})
	custom := []TensorInput{
		{Name: "prompt", Datatype: DatatypeBytes, Shape: []int64{1}, Source: SourcePrompt},
		{Name: "max_f", Datatype: DatatypeFP32, Shape: []int64{1}, Source: SourceMaxTokens},
		{Name: "max_u", Datatype: DatatypeUint64, Shape: []int64{1}, Source: SourceMaxTokens},
		{Name: "min_d", Datatype: DatatypeFP64, Shape: []int64{1}, Source: SourceMinTokens},
		{Name: "params", Datatype: DatatypeBytes, Shape: []int64{1}, Source: SourceSamplingParameters},
		{Name: "seed", Datatype: DatatypeInt64, Shape: []int64{1}, Source: SourceSeed},
		{Name: "words", Datatype: DatatypeBytes, Shape: []int64{2}, Constant: []any{"a", "b"}},
	}
	for _, preset := range []string{PresetTRTLLMEnsemble, PresetVLLMBackend, "custom"} {
		inputs, _ := TritonPreset(preset)
		if preset == "custom" {
			inputs = custom
		}
		opts, err := TritonOptions{Inputs: inputs}.resolved()
		if err != nil {
			t.Fatal(err)
		}
		d := &tritonGenerateDriver{t: target, triton: opts}
		ps = append(ps, bodyProtocol{"triton_generate " + preset, d.requestBody, d.requestBody})
	}
	return ps
}

// bodyRequest is one combination of the fields a workload sets; mask
// picks them.
func bodyRequest(mask int) *Request {
	temp, topP, seed, zero, one := 0.5, 0.9, int64(-7), 0.0, 1.0
	on := func(bit int) bool { return mask&(1<<bit) != 0 }
	req := &Request{MaxTokens: 128}
	if on(0) {
		req.Model = "m<&>"
	}
	if on(1) {
		req.Prompt = "hello \"world\"\n"
	}
	if on(2) {
		req.Messages = []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u <b>"}}
	}
	req.Stream = on(3)
	switch {
	case on(4):
		req.Temperature, req.TopP = &temp, &topP
	case on(9):
		req.Temperature, req.TopP = &zero, &one
	}
	if on(5) {
		req.Seed = &seed
	}
	if on(6) {
		req.Stop = []string{"\n\n", "</s>"}
	} else if on(9) {
		req.Stop = []string{}
	}
	if on(7) {
		req.IgnoreEOS, req.MinTokens = true, 3
	}
	if on(8) {
		req.Extra = map[string]any{"top_k": 5, "stream_options": nil, "options": map[string]any{"num_ctx": 8}}
	}
	return req
}

// A request with a BodyCache must be sent exactly the bytes it was sent
// before bodies were cached, for every protocol, every combination of
// fields, and every max_tokens, min_tokens and id that later requests of
// the same item bring.
func TestCachedBodyMatchesEncoding(t *testing.T) {
	draws := []struct {
		max, min int
		id       string
	}{{128, 3, "0123456789abcdef0123456789abcdef"}, {1, 1, "a"}, {100, 0, ""}, {1 << 20, 1 << 20, "id-2"},
		{99999, 7, "x"}, {4096, 0, "fedcba9876543210fedcba9876543210"}}
	for _, targetModel := range []string{"", "target-model"} {
		for _, p := range bodyProtocols(t, targetModel) {
			for mask := range 1 << 10 {
				item := bodyRequest(mask)
				item.Bodies = &BodyCache{}
				key := new(encoderKey)
				for i, dr := range draws {
					req := *item
					req.MaxTokens, req.ID = dr.max, dr.id
					if item.MinTokens != 0 {
						req.MinTokens = dr.min
					}
					got, err := encodeBody(key, p.enc, &req, dr.id)
					want, wantErr := p.old(&req, dr.id)
					if (err != nil) != (wantErr != nil) {
						t.Fatalf("%s mask %b draw %d: err %v, before %v", p.name, mask, i, err, wantErr)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s target model %q mask %b draw %d:\n cached %s\n before %s", p.name, targetModel, mask, i, got, want)
					}
					if tm := item.Bodies.lookup(key, &req); wantErr == nil && (tm == nil || tm.body == nil) {
						t.Fatalf("%s mask %b draw %d: the body was not filled in from a template", p.name, mask, i)
					}
				}
			}
		}
	}
}

// cachedTemplate reports whether c holds a usable template for key.
func cachedTemplate(c *BodyCache, key *encoderKey) bool {
	if p := c.entries.Load(); p != nil {
		for _, t := range *p {
			if t.enc == key && t.body != nil {
				return true
			}
		}
	}
	return false
}

func TestTGIRequestBodyStructMatchesMap(t *testing.T) {
	for mask := range 1 << 10 {
		req := bodyRequest(mask)
		req.Extra = nil
		got, err := tgiRequestBody(req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := tgiRequestBodyMap(req)
		if !bytes.Equal(got, want) {
			t.Fatalf("mask %b:\n struct %s\n map    %s", mask, got, want)
		}
	}
}

func TestOllamaRequestBodyStructMatchesMap(t *testing.T) {
	for mask := range 1 << 10 {
		for _, chat := range []bool{true, false} {
			d := &ollamaDriver{chat: chat, t: &httpTarget{opts: TargetOptions{Model: "t"}}}
			req := bodyRequest(mask)
			req.Extra = nil
			got, err := d.requestBody(req)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := d.requestBodyMap(req)
			if !bytes.Equal(got, want) {
				t.Fatalf("mask %b chat %v:\n struct %s\n map    %s", mask, chat, got, want)
			}
		}
	}
}

// What the cache cannot take is encoded in full, with the same bytes.
func TestCachedBodyFallsBack(t *testing.T) {
	opts, _ := TritonOptions{}.resolved()
	tr := &tritonGenerateDriver{t: &httpTarget{}, triton: opts}
	oai := &openAIDriver{chat: true, t: &httpTarget{}}
	for _, c := range []struct {
		name     string
		enc      bodyEncoder
		req      Request
		id       string
		template bool // whether the item still gets a template
	}{
		{"prompt quotes the max_tokens sentinel", oai.encodeBody, Request{Prompt: "say 1048573 twice", MaxTokens: 5}, "", false},
		{"prompt quotes the id sentinel", tr.requestBody, Request{Prompt: sentinelIDA, MaxTokens: 5}, "abc", false},
		{"id needs escaping", tr.requestBody, Request{Prompt: "p", MaxTokens: 5}, `a"<b>`, true},
		{"no max_tokens", oai.encodeBody, Request{Prompt: "p"}, "", true},
		{"max_tokens past the holes' range", oai.encodeBody, Request{Prompt: "p", MaxTokens: 1<<20 + 1}, "", true},
		{"negative min_tokens", oai.encodeBody, Request{Prompt: "p", MaxTokens: 5, MinTokens: -1}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			item := c.req
			item.Bodies = &BodyCache{}
			key := new(encoderKey)
			// The first request of an item that cannot be cached
			// leaves the cache alone; one that can builds the template.
			good := Request{Prompt: item.Prompt, MaxTokens: 7, Bodies: item.Bodies}
			if _, err := encodeBody(key, c.enc, &good, "id"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				got, err := encodeBody(key, c.enc, &item, c.id)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := c.enc(&item, c.id)
				if !bytes.Equal(got, want) {
					t.Fatalf("cached %s\nwant   %s", got, want)
				}
			}
			if got := cachedTemplate(item.Bodies, key); got != c.template {
				t.Errorf("template cached: %v, want %v", got, c.template)
			}
		})
	}
}

// A request changed after it was drawn does not match its item's cached
// body: it is encoded in full, and the item's template stays the only
// one.
func TestCachedBodyChangedRequest(t *testing.T) {
	d := &openAIDriver{chat: true, t: &httpTarget{}}
	key := new(encoderKey)
	c := &BodyCache{}
	base := Request{Messages: []Message{{Role: "user", Content: "one"}}, MaxTokens: 10, Bodies: c}
	if _, err := encodeBody(key, d.encodeBody, &base, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxBodyTemplates {
		req := base
		req.Messages = append(req.Messages, Message{Role: "user", Content: strings.Repeat("x", i)})
		got, err := encodeBody(key, d.encodeBody, &req, "")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := d.requestBodyMap(&req)
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d: cached %s\nwant %s", i, got, want)
		}
	}
	if n := len(*c.entries.Load()); n != 1 || !cachedTemplate(c, key) {
		t.Errorf("%d templates kept, want the item's alone", n)
	}
	// Requests of the item itself still come from its template.
	req := base
	req.MaxTokens = 11
	if tm := c.lookup(key, &req); tm == nil || tm.body == nil {
		t.Error("the item's template is gone")
	}
}

// The cache is bounded: templates beyond maxBodyTemplates (drivers,
// models, stream flags) replace the oldest.
func TestCachedBodyBounded(t *testing.T) {
	d := &openAIDriver{chat: true, t: &httpTarget{}}
	c := &BodyCache{}
	for i := range 3 * maxBodyTemplates {
		req := Request{Prompt: "p", MaxTokens: 10, Model: strings.Repeat("m", i+1), Bodies: c}
		got, err := encodeBody(new(encoderKey), d.encodeBody, &req, "")
		want, _ := d.requestBodyMap(&req)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("request %d: cached %s\nwant %s", i, got, want)
		}
	}
	if n := len(*c.entries.Load()); n != maxBodyTemplates {
		t.Errorf("%d templates kept, want the bound %d", n, maxBodyTemplates)
	}
}

// Concurrent requests of one item share its cache (run with -race).
func TestCachedBodyConcurrent(t *testing.T) {
	target := &httpTarget{}
	drivers := []*openAIDriver{{chat: true, t: target}, {chat: false, t: target}}
	keys := []*encoderKey{new(encoderKey), new(encoderKey)}
	item := Request{Messages: []Message{{Role: "user", Content: "hi"}}, Bodies: &BodyCache{}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				req := item
				req.MaxTokens, req.Stream = 1+i+g, i/2%2 == 0
				d := drivers[i%2]
				got, err := encodeBody(keys[i%2], d.encodeBody, &req, "")
				want, _ := d.requestBodyMap(&req)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("cached %s (%v), want %s", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(*item.Bodies.entries.Load()); n != 4 {
		t.Errorf("%d templates, want 4 (2 drivers × stream on/off)", n)
	}
}

// Requests of one item are encoded once (twice, for the sentinels), then
// only filled in.
func TestCachedBodyEncodesOnce(t *testing.T) {
	d := &openAIDriver{chat: true, t: &httpTarget{}}
	calls := 0
	enc := func(r *Request, id string) ([]byte, error) { calls++; return d.encodeBody(r, id) }
	key := new(encoderKey)
	item := Request{Messages: []Message{{Role: "user", Content: "hi"}}, Stream: true, Bodies: &BodyCache{}}
	for i := range 100 {
		req := item
		req.MaxTokens = 1 + i%7
		if _, err := encodeBody(key, enc, &req, ""); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("encoded %d times for 100 requests, want 2", calls)
	}
}

// A body longer than maxTemplateBytes is not kept; it is encoded per
// request, with the same bytes.
func TestCachedBodyTooLong(t *testing.T) {
	d := &openAIDriver{chat: true, t: &httpTarget{}}
	key := new(encoderKey)
	item := Request{Prompt: strings.Repeat("x", maxTemplateBytes), MaxTokens: 3, Bodies: &BodyCache{}}
	got, err := encodeBody(key, d.encodeBody, &item, "")
	want, _ := d.requestBodyMap(&item)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("body differs (%v)", err)
	}
	if cachedTemplate(item.Bodies, key) {
		t.Error("a body over the bound was kept")
	}
}
