package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the behaviours taken from real servers (docs/simulator.md,
// "Behaviours taken from real servers"); the prober's outcome for each is
// tested in test/integration/realfaults_test.go.

func TestRealFaultHeaderParse(t *testing.T) {
	d := DefaultConfig().Faults
	for in, want := range map[string]string{
		"queue_full":               "queue_full",
		"no_done":                  "no_done",
		"model_load":               "model_load:delay=2s",
		"model_load:delay=300ms":   "model_load:delay=300ms",
		"sse_ping":                 "sse_ping:every=1s",
		"sse_ping:every=20ms":      "sse_ping:every=20ms",
		"no_done; sse_ping; stall": "no_done;sse_ping:every=1s;stall:after=0,for=2s",
	} {
		fs, err := parseFaultHeader(in, d)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := strings.Join(fs.strings(), ";"); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"queue_full:after=1", "no_done:for=1s", "model_load:delay=0s", "model_load:every=1s",
		"sse_ping:every=10us", "sse_ping:every=11m", "sse_ping:delay=1s"} {
		if _, err := parseFaultHeader(bad, d); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// The configured values are the defaults.
	d.ModelLoadDelay, d.SSEPingInterval = 5*time.Second, 15*time.Second
	fs, _ := parseFaultHeader("model_load;sse_ping", d)
	if got := strings.Join(fs.strings(), ";"); got != "model_load:delay=5s;sse_ping:every=15s" {
		t.Errorf("defaults from config: %q", got)
	}
}

func TestRealFaultConfigValidation(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"openai_server":            func(c *Config) { c.OpenAIServer = "sglang" },
		"faults.model_load_delay":  func(c *Config) { c.Faults.ModelLoadDelay = -time.Second },
		"faults.model_keep_alive":  func(c *Config) { c.Faults.ModelKeepAlive = 48 * time.Hour },
		"faults.sse_ping_interval": func(c *Config) { c.Faults.SSEPingInterval = 10 * time.Microsecond },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := DefaultConfig()
	c.Faults.ModelKeepAlive = -1
	c.OpenAIServer = OpenAIServerLlamaCpp
	if err := c.Validate(); err != nil {
		t.Errorf("keep-alive forever, llama.cpp: %v", err)
	}
}

// rawStream posts a streamed chat request and returns the whole body.
func rawStream(t *testing.T, ts *testServer, body map[string]any, headers ...string) (int, string) {
	t.Helper()
	resp := ts.post(t, "/v1/chat/completions", body, headers...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp.StatusCode, string(b)
}

var pingLine = regexp.MustCompile(`^: ping - \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+00:00$`)

// TestSSEPing: sse-starlette's keep-alive comments arrive while the
// answer waits for its first token and between tokens, framed as
// sse-starlette frames them (\r\n), and ground truth records them.
func TestSSEPing(t *testing.T) {
	ts := startServer(t, fastConfig())
	code, body := rawStream(t, ts, chatBody(6, map[string]any{"ignore_eos": true}),
		"X-Request-Id", "ping-1", HeaderFault, "sse_ping:every=10ms;slow_first_token:delay=60ms;stall:after=3,for=40ms")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var pings, content int
	for _, ev := range strings.Split(body, "\r\n\r\n") {
		for _, e := range strings.Split(ev, "\n\n") {
			switch {
			case strings.HasPrefix(e, ": "):
				pings++
				if !pingLine.MatchString(e) {
					t.Errorf("ping %q", e)
				}
			case strings.Contains(e, `"content":"`) && !strings.Contains(e, `"content":""`):
				content++
			}
		}
	}
	if pings < 7 || content != 6 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("%d pings, %d content chunks in %q", pings, content, body)
	}
	rec := ts.truth(t, "ping-1")
	recorded := 0
	for _, c := range rec.Chunks {
		if c.Kind == kindPing {
			recorded++
			if c.Content || c.Tokens != 0 {
				t.Errorf("ping chunk %+v", c)
			}
		}
	}
	if recorded != pings || rec.Outcome != outcomeCompleted || rec.OutputTokens != 6 {
		t.Errorf("ground truth: %d pings (sent %d), outcome %s, %d tokens", recorded, pings, rec.Outcome, rec.OutputTokens)
	}
	// The configured interval pings every stream; other protocols never.
	cfg := fastConfig()
	cfg.Faults.SSEPingInterval = 5 * time.Millisecond
	ts = startServer(t, cfg)
	if _, body := rawStream(t, ts, chatBody(3, map[string]any{"ignore_eos": true}), HeaderFault, "slow_first_token:delay=30ms"); !strings.Contains(body, ": ping - ") {
		t.Errorf("configured pings missing: %q", body)
	}
	resp := ts.post(t, "/generate_stream", map[string]any{"inputs": "a b", "parameters": map[string]any{"max_new_tokens": 3}}, HeaderFault, "slow_first_token:delay=30ms")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "ping") {
		t.Errorf("TGI stream with pings: %q", b)
	}
}

func TestNoDone(t *testing.T) {
	ts := startServer(t, fastConfig())
	_, body := rawStream(t, ts, chatBody(3, map[string]any{"ignore_eos": true, "stream_options": map[string]any{"include_usage": true}}),
		"X-Request-Id", "nodone-1", HeaderFault, "no_done")
	if strings.Contains(body, "[DONE]") || !strings.Contains(body, `"finish_reason":"length"`) || !strings.Contains(body, `"completion_tokens":3`) {
		t.Errorf("no_done stream %q", body)
	}
	if rec := ts.truth(t, "nodone-1"); rec.Outcome != outcomeCompleted || rec.FinishReason != "length" {
		t.Errorf("ground truth %+v", rec)
	}
	cfg := fastConfig()
	cfg.Faults.OmitDone = true
	ts = startServer(t, cfg)
	if _, body := rawStream(t, ts, chatBody(2, nil)); strings.Contains(body, "[DONE]") {
		t.Errorf("omit_done stream %q", body)
	}
}

// TestQueueFullPerRoute: each route refuses a request its waiting queue
// has no room for as its own server does.
func TestQueueFullPerRoute(t *testing.T) {
	ts := startServer(t, fastConfig())
	for _, c := range []struct {
		name, path string
		body       map[string]any
		status     int
		want       string
	}{
		{"vLLM chat", "/v1/chat/completions", chatBody(3, nil), 503, `"type":"ServiceUnavailableError","param":null,"code":503}}`},
		{"vLLM completions", "/v1/completions", completionBody(3, nil), 503, `"code":503}}`},
		{"TGI generate", "/generate", map[string]any{"inputs": "a"}, 429, `{"error":"Model is overloaded","error_type":"overloaded"}`},
		{"TGI generate_stream", "/generate_stream", map[string]any{"inputs": "a"}, 200, `data:{"error":"Model is overloaded","error_type":"overloaded"}` + "\n\n"},
		{"Ollama chat", "/api/chat", map[string]any{"model": "sim-llm", "messages": []map[string]string{{"role": "user", "content": "a"}}}, 503,
			`{"error":"server busy, please try again.  maximum pending requests exceeded"}`},
		{"Triton generate_stream", "/v2/models/sim-llm/generate_stream", map[string]any{"text_input": "a", "max_tokens": 3, "stream": true}, 503,
			`{"error":"Exceeds maximum queue size"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "qf-" + strings.ReplaceAll(c.name, " ", "-")
			resp := ts.post(t, c.path, c.body, "X-Request-Id", id, HeaderFault, "queue_full")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.HasSuffix(string(b), c.want) {
				t.Errorf("%d %s, want %d …%s", resp.StatusCode, b, c.status, c.want)
			}
			if rec := ts.truth(t, id); rec.Outcome != outcomeRejected || rec.Faults[0] != "queue_full" {
				t.Errorf("ground truth %+v", rec)
			}
		})
	}
}

func TestVLLMContextErrors(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 20
	ts := startServer(t, cfg)
	long := strings.Repeat("word ", 25)
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"messages": []map[string]string{{"role": "user", "content": long}}, "max_tokens": 1},
			`{"error":{"message":"This model's maximum context length is 20 tokens. However, your request has 25 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":"input_tokens","code":400}}`},
		{map[string]any{"messages": []map[string]string{{"role": "user", "content": "a b c"}}, "max_tokens": 18},
			`{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 18. This model's maximum context length is 20 tokens and your request has 3 input tokens (18 > 20 - 3).","type":"BadRequestError","param":"max_tokens","code":400}}`},
	} {
		resp := ts.post(t, "/v1/chat/completions", c.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || string(b) != c.want {
			t.Errorf("%d %s\nwant %s", resp.StatusCode, b, c.want)
		}
	}
}

func llamaCppConfig() Config {
	c := fastConfig()
	c.OpenAIServer = OpenAIServerLlamaCpp
	c.Output.RoleChunk = RoleChunkOff
	return c
}

// TestLlamaCppStream: llama.cpp ends with a chunk of its own, delta {},
// that carries finish_reason, usage and the timings object (b6097 and
// later); the timings are the ground truth's.
func TestLlamaCppStream(t *testing.T) {
	ts := startServer(t, llamaCppConfig())
	_, body := rawStream(t, ts, chatBody(5, map[string]any{"ignore_eos": true, "stream_options": map[string]any{"include_usage": true}}),
		"X-Request-Id", "lc-1")
	evs := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(evs) != 7 || evs[6] != "data: [DONE]" {
		t.Fatalf("events %q", evs)
	}
	var final struct {
		Choices []struct {
			FinishReason string          `json:"finish_reason"`
			Delta        json.RawMessage `json:"delta"`
		} `json:"choices"`
		Usage   *openAIUsage     `json:"usage"`
		Timings *llamaCppTimings `json:"timings"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(evs[5], "data: ")), &final); err != nil {
		t.Fatal(err)
	}
	rec := ts.truth(t, "lc-1")
	tm, want := final.Timings, rec.LlamaCppTimings
	if len(final.Choices) != 1 || final.Choices[0].FinishReason != "length" || string(final.Choices[0].Delta) != "{}" ||
		final.Usage == nil || final.Usage.CompletionTokens != 5 || tm == nil || want == nil {
		t.Fatalf("final chunk %s, ground truth %+v", evs[5], want)
	}
	if tm.PromptN != want.PromptN || tm.PromptMS != want.PromptMS || tm.PredictedN != 5 || tm.PredictedMS != want.PredictedMS ||
		tm.PredictedPerTokenMS != tm.PredictedMS/5 || tm.PromptPerTokenMS != tm.PromptMS/float64(tm.PromptN) {
		t.Errorf("timings %+v, ground truth %+v", tm, want)
	}
	// prompt_ms runs from admission to the first token, before its flush.
	serverFirst := float64(rec.FirstTokenUnixNano-rec.AdmittedUnixNano) / 1e6
	if tm.PromptMS <= 0 || tm.PromptMS > serverFirst || tm.PredictedMS <= 0 {
		t.Errorf("prompt_ms %v, admission to first flush %v ms, predicted_ms %v", tm.PromptMS, serverFirst, tm.PredictedMS)
	}
	for _, e := range evs[:5] {
		if strings.Contains(e, "timings") || strings.Contains(e, "usage") || !strings.Contains(e, `"finish_reason":null`) {
			t.Errorf("non-final chunk %s", e)
		}
	}
}

func TestLlamaCppNonStreamAndErrors(t *testing.T) {
	cfg := llamaCppConfig()
	cfg.MaxModelLen = 20
	ts := startServer(t, cfg)
	resp := ts.post(t, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "a b c"}}, "max_tokens": 50, "ignore_eos": true},
		"X-Request-Id", "lc-2")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ans struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage   openAIUsage      `json:"usage"`
		Timings *llamaCppTimings `json:"timings"`
	}
	// llama.cpp does not refuse max_tokens beyond the context: it stops
	// when the context is full.
	if err := json.Unmarshal(b, &ans); err != nil || resp.StatusCode != 200 || ans.Usage.CompletionTokens != 17 || ans.Choices[0].FinishReason != "length" || ans.Timings == nil {
		t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
	}
	if rec := ts.truth(t, "lc-2"); rec.LlamaCppTimings == nil || rec.LlamaCppTimings.PredictedMS != ans.Timings.PredictedMS {
		t.Errorf("ground truth %+v, sent %+v", rec.LlamaCppTimings, ans.Timings)
	}
	for _, c := range []struct {
		body    map[string]any
		headers []string
		status  int
		want    string
	}{
		{map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("w ", 22)}}}, nil, 400,
			`{"error":{"code":400,"message":"request (22 tokens) exceeds the available context size (20 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":22,"n_ctx":20}}`},
		{chatBody(2, nil), []string{HeaderFault, "error=503"}, 503, `{"error":{"code":503,"message":"Injected fault: HTTP 503","type":"unavailable_error"}}`},
	} {
		resp := ts.post(t, "/v1/chat/completions", c.body, c.headers...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || string(b) != c.want {
			t.Errorf("%d %s\nwant %d %s", resp.StatusCode, b, c.status, c.want)
		}
	}
	// Any model name is served, and echoed.
	resp = ts.post(t, "/v1/chat/completions", map[string]any{"model": "nope", "messages": []map[string]string{{"role": "user", "content": "a"}}, "max_tokens": 2})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"model":"nope"`) {
		t.Errorf("unknown model: %d %s", resp.StatusCode, b)
	}
	// A mid-stream error ends the stream without [DONE].
	_, body := rawStream(t, ts, chatBody(4, map[string]any{"ignore_eos": true}), HeaderFault, "error_event:after=2")
	if !strings.HasSuffix(body, `data: {"error":{"code":500,"message":"Injected fault: error during generation","type":"server_error"}}`+"\n\n") {
		t.Errorf("error event stream %q", body)
	}
}

// TestVLLMErrorEventShape: vLLM's mid-stream error is its ErrorResponse
// in a data line, then [DONE].
func TestVLLMErrorEventShape(t *testing.T) {
	ts := startServer(t, fastConfig())
	_, body := rawStream(t, ts, chatBody(4, map[string]any{"ignore_eos": true}), HeaderFault, "error_event:after=2")
	if !strings.HasSuffix(body, `data: {"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}`+"\n\ndata: [DONE]\n\n") {
		t.Errorf("error event stream %q", body)
	}
}

// TestModelLoad: the first request loads the model, concurrent ones wait
// for the same load, a resident model answers at once, and an idle one is
// unloaded after keep_alive; Ollama's load_duration reports the wait.
func TestModelLoad(t *testing.T) {
	const delay = 150 * time.Millisecond
	cfg := fastConfig()
	cfg.Faults.ModelLoadDelay = delay
	cfg.Faults.ModelKeepAlive = 200 * time.Millisecond
	ts := startServer(t, cfg)
	chat := func(id string) ollamaJSON {
		resp := ts.post(t, "/api/chat", map[string]any{"model": "sim-llm", "stream": false, "messages": []map[string]string{{"role": "user", "content": "a"}},
			"options": map[string]any{"num_predict": 2}}, "X-Request-Id", id)
		defer resp.Body.Close()
		var o ollamaJSON
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", id, resp.StatusCode, err)
		}
		return o
	}
	var wg sync.WaitGroup
	firsts := make([]ollamaJSON, 3)
	for i := range firsts {
		wg.Go(func() { firsts[i] = chat("load-" + string(rune('a'+i))) })
	}
	wg.Wait()
	for i, o := range firsts {
		rec := ts.truth(t, "load-"+string(rune('a'+i)))
		load := time.Duration(o.LoadDuration)
		// Requests sent together share one load: none waits twice.
		if load < delay-20*time.Millisecond || load > 2*delay || rec.ModelLoadNanos <= 0 || time.Duration(rec.ModelLoadNanos) > load {
			t.Errorf("request %d: load_duration %v, waited %v for the model", i, load, time.Duration(rec.ModelLoadNanos))
		}
	}
	if o := chat("load-warm"); time.Duration(o.LoadDuration) > 20*time.Millisecond {
		t.Errorf("resident model: load_duration %v", time.Duration(o.LoadDuration))
	}
	if rec := ts.truth(t, "load-warm"); rec.ModelLoadNanos != 0 {
		t.Errorf("resident model: waited %v", time.Duration(rec.ModelLoadNanos))
	}
	time.Sleep(300 * time.Millisecond) // past keep_alive
	if o := chat("load-again"); time.Duration(o.LoadDuration) < delay-20*time.Millisecond {
		t.Errorf("after the idle unload: load_duration %v", time.Duration(o.LoadDuration))
	}
	// The model_load fault makes one request pay a load of its own.
	resp := ts.post(t, "/v1/chat/completions", chatBody(2, nil), "X-Request-Id", "load-fault", HeaderFault, "model_load:delay=80ms")
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if rec := ts.truth(t, "load-fault"); rec.ModelLoadNanos < int64(80*time.Millisecond) || rec.Faults[0] != "model_load:delay=80ms" {
		t.Errorf("model_load fault: %+v", rec)
	}
}

// TestOllamaLoadExcludesQueueWait: waiting for a free slot is not
// load_duration (Ollama's runner semaphore is acquired after
// checkpointLoaded), only total_duration.
func TestOllamaLoadExcludesQueueWait(t *testing.T) {
	cfg := fastConfig()
	cfg.Scheduler.MaxRunning = 1
	ts := startServer(t, cfg)
	busy := ts.post(t, "/v1/chat/completions", chatBody(2, nil), HeaderFault, "slow_first_token:delay=150ms")
	defer busy.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.engine.state().running == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	resp := ts.post(t, "/api/chat", map[string]any{"model": "sim-llm", "stream": false, "messages": []map[string]string{{"role": "user", "content": "a"}},
		"options": map[string]any{"num_predict": 2}})
	defer resp.Body.Close()
	var o ollamaJSON
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	load, total := time.Duration(o.LoadDuration), time.Duration(o.TotalDuration)
	if load <= 0 || load > 20*time.Millisecond || total < 100*time.Millisecond {
		t.Errorf("queued request: load_duration %v, total_duration %v", load, total)
	}
}
