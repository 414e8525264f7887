package simulator_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// fastSim starts a simulator with a fast, jitter-free latency model.
func fastSim(t *testing.T, mod func(*simulator.Config)) (*simtest.Sim, simulator.Config) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase, cfg.Latency.PrefillPerToken = 2*time.Millisecond, 500*time.Microsecond, 0
	cfg.Latency.Jitter = 0
	if mod != nil {
		mod(&cfg)
	}
	return simtest.Start(t, cfg), cfg
}

// teeProxy relays TCP connections to target byte for byte and keeps what
// the server sent on each, so a test can decode what the probe read with
// another client. It is a byte relay, not an HTTP proxy: Go's
// httputil.ReverseProxy, tried first, made ~3% of back-to-back streamed
// probes end with 0 chunks ("use of closed network connection" on its
// upstream read), for chat and Responses alike.
type teeProxy struct {
	mu    sync.Mutex
	conns []*bytes.Buffer // server-to-client bytes, one per connection in accept order
}

func startTee(t *testing.T, target string) (*teeProxy, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &teeProxy{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				c.Close()
				continue
			}
			b := &lockedBuffer{mu: &tp.mu}
			tp.mu.Lock()
			tp.conns = append(tp.conns, &b.buf)
			tp.mu.Unlock()
			wg.Go(func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() })
			wg.Go(func() { io.Copy(io.MultiWriter(c, b), up); c.Close(); up.Close() })
		}
	})
	return tp, "http://" + ln.Addr().String()
}

// lockedBuffer is a buffer written under the proxy's lock.
type lockedBuffer struct {
	mu  *sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// body is the de-chunked body of the relayed response to request id (the
// simulator echoes the request id header).
func (tp *teeProxy) body(t *testing.T, id string) []byte {
	t.Helper()
	tp.mu.Lock()
	var all [][]byte
	for _, b := range tp.conns {
		all = append(all, bytes.Clone(b.Bytes()))
	}
	tp.mu.Unlock()
	var body []byte
	for _, raw := range all {
		br := bufio.NewReader(bytes.NewReader(raw))
		for {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				break
			}
			if res.Header.Get(simulator.HeaderRequestID) == id {
				body = b
			}
		}
	}
	if body == nil {
		t.Fatalf("the proxy relayed no complete response to request %s", id)
	}
	return body
}

// TestResponsesStreamDecodesWithOfficialClient: the simulator's stream,
// as the probe read it, decodes event by event into the official Go
// client's typed union (github.com/openai/openai-go/v3, the API owner's
// client), in the API's order; and the usage the client finds in
// response.completed is what the probe reported, which is the simulator's
// ground truth.
func TestResponsesStreamDecodesWithOfficialClient(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) { c.PrefixCache.Enabled = true })
	tee, proxy := startTee(t, sim.URL)
	d, err := probe.NewDriver(probe.ProtocolOpenAIResponses, probe.TargetOptions{Name: "sim", URL: proxy, Model: cfg.ServedModelNames[0],
		Headers: map[string]string{simulator.HeaderOptions: "reasoning_tokens=3"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	prompt := strings.Repeat("lighthouse keepers watch the sea at night ", 8)
	var res *probe.Result
	for i := range 2 { // the second one hits the prefix cache
		res = d.Probe(context.Background(), &probe.Request{Prompt: prompt, MaxTokens: 12, Stream: true, CaptureAnswer: true})
		if res.Outcome != probe.OutcomeSuccess {
			t.Fatalf("probe %d: outcome %s: %v (%d chunks)", i, res.Outcome, res.Err, len(res.Chunks))
		}
	}
	rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
	if rec.Protocol != "openai_responses" || rec.Path != "/v1/responses" || !rec.Stream {
		t.Errorf("ground truth protocol %s, path %s, stream %t", rec.Protocol, rec.Path, rec.Stream)
	}
	if res.OutputTokens != rec.OutputTokens || res.InputTokens != rec.PromptTokens || res.CachedInputTokens != rec.CachedPromptTokens ||
		rec.CachedPromptTokens == 0 || res.Reasoning.Tokens != 3 || len(res.Chunks) != rec.OutputTokens {
		t.Errorf("probe: %d out, %d in, %d cached, %d reasoning, %d chunks; server: %d out, %d in, %d cached",
			res.OutputTokens, res.InputTokens, res.CachedInputTokens, res.Reasoning.Tokens, len(res.Chunks),
			rec.OutputTokens, rec.PromptTokens, rec.CachedPromptTokens)
	}

	body := tee.body(t, res.RequestID)
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(&http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body)),
	}), nil)
	var types []string
	// The answer runs to max_output_tokens, so it ends incomplete.
	var end responses.Response
	var text strings.Builder
	for i := int64(0); stream.Next(); i++ {
		ev := stream.Current()
		if ev.SequenceNumber != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
		// The union's concrete type must be the one its type names,
		// with the fields the API requires present.
		switch v := ev.AsAny().(type) {
		case responses.ResponseCreatedEvent:
			if !v.Response.JSON.ID.Valid() || v.Response.Status != responses.ResponseStatusInProgress {
				t.Errorf("created: %s", v.RawJSON())
			}
		case responses.ResponseInProgressEvent:
		case responses.ResponseOutputItemAddedEvent:
			if !v.Item.JSON.ID.Valid() || (v.Item.Type != "reasoning" && v.Item.Type != "message") {
				t.Errorf("output_item.added: %s", v.RawJSON())
			}
		case responses.ResponseContentPartAddedEvent, responses.ResponseContentPartDoneEvent,
			responses.ResponseOutputItemDoneEvent, responses.ResponseReasoningTextDoneEvent:
		case responses.ResponseReasoningTextDeltaEvent:
			if !v.JSON.Delta.Valid() || !v.JSON.ItemID.Valid() {
				t.Errorf("reasoning delta: %s", v.RawJSON())
			}
		case responses.ResponseTextDeltaEvent:
			if !v.JSON.Delta.Valid() || !v.JSON.Logprobs.Valid() {
				t.Errorf("text delta: %s", v.RawJSON())
			}
			text.WriteString(v.Delta)
		case responses.ResponseTextDoneEvent:
			if v.Text != text.String() {
				t.Errorf("output_text.done text %q, deltas %q", v.Text, text.String())
			}
		case responses.ResponseIncompleteEvent:
			end = v.Response
		default:
			t.Errorf("event %s decoded as %T", ev.Type, v)
		}
		types = append(types, ev.Type)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("official client: %v", err)
	}
	wantHead := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta"}
	if len(types) < len(wantHead)+3 || strings.Join(types[:len(wantHead)], " ") != strings.Join(wantHead, " ") ||
		types[len(types)-1] != "response.incomplete" {
		t.Errorf("event order %v", types)
	}
	if end.Status != responses.ResponseStatusIncomplete || end.IncompleteDetails.Reason != "max_output_tokens" || res.FinishReason != "length" {
		t.Errorf("status %s, incomplete_details %+v; probe finish %q", end.Status, end.IncompleteDetails, res.FinishReason)
	}
	u := end.Usage
	if int(u.OutputTokens) != res.OutputTokens || int(u.InputTokens) != res.InputTokens ||
		int(u.InputTokensDetails.CachedTokens) != res.CachedInputTokens || int(u.OutputTokensDetails.ReasoningTokens) != res.Reasoning.Tokens {
		t.Errorf("official client's usage %+v, probe %d out, %d in, %d cached, %d reasoning", u,
			res.OutputTokens, res.InputTokens, res.CachedInputTokens, res.Reasoning.Tokens)
	}
	if len(end.Output) != 2 || end.OutputText() != text.String() || res.Answer != text.String() {
		t.Errorf("final output %d items, text %q; deltas %q; probe's answer %q", len(end.Output), end.OutputText(), text.String(), res.Answer)
	}
}

// TestResponsesUnaryWithOfficialClient: the non-streamed answer is a
// Response the official client takes, with the usage the probe reports.
func TestResponsesUnaryWithOfficialClient(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) { c.Output.Answer = "Paris" })
	client := openai.NewClient(option.WithBaseURL(sim.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: cfg.ServedModelNames[0], Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Capital of France?")},
		MaxOutputTokens: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || strings.TrimSpace(resp.OutputText()) != "Paris" {
		t.Errorf("status %s, text %q", resp.Status, resp.OutputText())
	}
	d, err := probe.NewDriver(probe.ProtocolOpenAIResponses, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := d.Probe(context.Background(), &probe.Request{Prompt: "Capital of France?", MaxTokens: 8, CaptureAnswer: true})
	if res.Outcome != probe.OutcomeSuccess || res.Answer != resp.OutputText() || res.FinishReason != "stop" ||
		res.OutputTokens != int(resp.Usage.OutputTokens) || res.InputTokens != int(resp.Usage.InputTokens) {
		t.Errorf("probe %s (%v): answer %q, finish %q, %d/%d tokens; client usage %+v", res.Outcome, res.Err, res.Answer,
			res.FinishReason, res.InputTokens, res.OutputTokens, resp.Usage)
	}
}

// TestResponsesFaultsAgainstSimulator: the simulator's injected faults
// reach the probe as the outcomes docs/metrics.md gives them.
func TestResponsesFaultsAgainstSimulator(t *testing.T) {
	sim, cfg := fastSim(t, nil)
	for _, c := range []struct {
		fault   string
		stream  bool
		want    probe.Outcome
		errWant string
		finish  string
	}{
		{"error_event:after=2,status=500", true, probe.OutcomeHTTP5xx, "response failed: server error (code 500, type server_error)", ""},
		{"error_event:after=2,status=429", true, probe.OutcomeHTTP4xx, "code 429, type rate_limit_exceeded", ""},
		{"error_event:after=2,status=400", true, probe.OutcomeHTTP4xx, "type invalid_request_error", ""},
		{"no_done", true, probe.OutcomeIncomplete, "stream ended without response.completed after 8 output deltas", ""},
		{"malformed:after=1", true, probe.OutcomeProtocolError, "not valid JSON", ""},
		{"truncate:after=3", true, probe.OutcomeIncomplete, "without response.completed", ""},
		{"none", true, probe.OutcomeSuccess, "", "length"},
		{"none", false, probe.OutcomeSuccess, "", "length"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			d, err := probe.NewDriver(probe.ProtocolOpenAIResponses, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0],
				Headers: map[string]string{simulator.HeaderFault: c.fault}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// ignore_eos (vLLM's extension) makes the answer run to
			// max_output_tokens: response.incomplete.
			res := d.Probe(ctx, &probe.Request{Prompt: "Go on.", MaxTokens: 8, Stream: c.stream, IgnoreEOS: true})
			if res.Outcome != c.want || (c.errWant != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), c.errWant))) {
				t.Fatalf("outcome %s (%v), want %s with %q", res.Outcome, res.Err, c.want, c.errWant)
			}
			if res.FinishReason != c.finish || (c.want == probe.OutcomeSuccess && res.OutputTokens != 8) {
				t.Errorf("finish %q, %d tokens", res.FinishReason, res.OutputTokens)
			}
		})
	}
}

// TestResponsesPreviousResponseID: a follow-up naming the previous
// response continues its conversation: its prompt holds the first turn's
// prompt and answer, which the prefix cache has seen; an unknown id is
// the API's 404.
func TestResponsesPreviousResponseID(t *testing.T) {
	sim, cfg := fastSim(t, func(c *simulator.Config) { c.PrefixCache.Enabled = true })
	d, err := probe.NewDriver(probe.ProtocolOpenAIResponses, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	first := d.Probe(context.Background(), &probe.Request{Prompt: strings.Repeat("tell me about tides ", 10), MaxTokens: 20, Stream: true})
	if first.Outcome != probe.OutcomeSuccess {
		t.Fatalf("first: %s %v", first.Outcome, first.Err)
	}
	second := d.Probe(context.Background(), &probe.Request{Prompt: "and the moon?", MaxTokens: 4, Stream: true,
		Extra: map[string]any{"previous_response_id": "resp_" + first.RequestID}})
	if second.Outcome != probe.OutcomeSuccess {
		t.Fatalf("second: %s %v", second.Outcome, second.Err)
	}
	if second.InputTokens <= first.InputTokens+first.OutputTokens || second.CachedInputTokens < first.InputTokens-16 {
		t.Errorf("follow-up: %d input tokens (%d cached); first turn %d in, %d out",
			second.InputTokens, second.CachedInputTokens, first.InputTokens, first.OutputTokens)
	}
	unknown := d.Probe(context.Background(), &probe.Request{Prompt: "x", MaxTokens: 4, Stream: true,
		Extra: map[string]any{"previous_response_id": "resp_nope"}})
	if unknown.Outcome != probe.OutcomeHTTP4xx || unknown.StatusCode != http.StatusNotFound || !strings.Contains(unknown.Err.Error(), "resp_nope") {
		t.Errorf("unknown previous response: %s %d %v", unknown.Outcome, unknown.StatusCode, unknown.Err)
	}
}
