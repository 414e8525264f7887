package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

func TestBytesTensorRoundTrip(t *testing.T) {
	elems := [][]byte{[]byte("hello"), {}, []byte("wörld\x00with nul"), bytes.Repeat([]byte{0xff}, 300)}
	var raw []byte
	for _, e := range elems {
		var err error
		if raw, err = AppendBytesElement(raw, e); err != nil {
			t.Fatal(err)
		}
	}
	// The reference's example: shape [1] "hello" → 05 00 00 00 68 65 6c 6c 6f.
	if want := []byte{5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}; !bytes.Equal(raw[:9], want) {
		t.Fatalf("prefix % x, want % x", raw[:9], want)
	}
	got, err := DecodeBytesTensor(raw, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(elems) {
		t.Fatalf("%d elements, want %d", len(got), len(elems))
	}
	for i := range elems {
		if !bytes.Equal(got[i], elems[i]) {
			t.Errorf("element %d = %q, want %q", i, got[i], elems[i])
		}
	}
	for _, bad := range [][]byte{{1, 0}, {5, 0, 0, 0, 'a'}, {0xff, 0xff, 0xff, 0xff}} {
		if _, err := DecodeBytesTensor(bad, 16); err == nil {
			t.Errorf("% x decoded without error", bad)
		}
	}
	if _, err := DecodeBytesTensor(raw, 2); err == nil {
		t.Error("element bound not enforced")
	}
}

func FuzzDecodeBytesTensor(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 'x'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		elems, err := DecodeBytesTensor(raw, 64)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		var back []byte
		for _, e := range elems {
			back, _ = AppendBytesElement(back, e)
		}
		if !bytes.Equal(back, raw) {
			t.Fatalf("round trip changed % x into % x", raw, back)
		}
	})
}

func TestTensorEncodingPerDatatype(t *testing.T) {
	cases := []struct {
		dt   string
		v    any
		want []byte
	}{
		{DatatypeBool, true, []byte{1}},
		{DatatypeInt32, int64(-2), []byte{0xfe, 0xff, 0xff, 0xff}},
		{DatatypeInt64, int64(300), []byte{0x2c, 1, 0, 0, 0, 0, 0, 0}},
		{DatatypeUint32, int64(7), []byte{7, 0, 0, 0}},
		{DatatypeUint64, uint64(1 << 40), []byte{0, 0, 0, 0, 0, 1, 0, 0}},
		{DatatypeFP32, 1.0, []byte{0, 0, 0x80, 0x3f}},
		{DatatypeFP64, 0.5, []byte{0, 0, 0, 0, 0, 0, 0xe0, 0x3f}},
		{DatatypeBytes, "", []byte{0, 0, 0, 0}},
	}
	for _, c := range cases {
		got, err := appendElement(nil, c.dt, c.v)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s %v = % x, %v; want % x", c.dt, c.v, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		dt string
		v  any
	}{{DatatypeInt32, int64(1 << 40)}, {DatatypeUint32, int64(-1)}, {DatatypeBool, "yes"}, {DatatypeFP32, "x"}, {DatatypeInt64, 1.5}} {
		if _, err := appendElement(nil, bad.dt, bad.v); err == nil {
			t.Errorf("%s %v accepted", bad.dt, bad.v)
		}
	}
}

func TestPresetsValidateAndFTEnsembleIsExpressible(t *testing.T) {
	for _, p := range TritonPresets() {
		in, err := TritonPreset(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (TritonOptions{Inputs: in}).resolved(); p != PresetNone && err != nil {
			t.Errorf("preset %s: %v", p, err)
		}
	}
	// The FasterTransformer-era ensemble of perf_analyzer's examples.
	b := []int64{1, 1}
	ft := []TensorInput{
		{Name: "prompt", Datatype: DatatypeBytes, Shape: b, Source: SourcePrompt},
		{Name: "request_output_len", Datatype: DatatypeUint32, Shape: b, Source: SourceMaxTokens},
		{Name: "runtime_top_k", Datatype: DatatypeUint32, Shape: b, Constant: int64(1)},
		{Name: "runtime_top_p", Datatype: DatatypeFP32, Shape: b, Constant: 0.0},
		{Name: "temperature", Datatype: DatatypeFP32, Shape: b, Constant: 1.0},
		{Name: "random_seed", Datatype: DatatypeUint64, Shape: b, Constant: int64(0)},
		{Name: "start_id", Datatype: DatatypeUint32, Shape: b, Constant: int64(1)},
		{Name: "end_id", Datatype: DatatypeUint32, Shape: b, Constant: int64(2)},
		{Name: "bad_words_list", Datatype: DatatypeInt32, Shape: []int64{1, 2, 1}, Constant: []any{int64(0), int64(-1)}},
	}
	o, err := (TritonOptions{Inputs: ft, Outputs: []string{"OUTPUT_0"}}).resolved()
	if err != nil {
		t.Fatal(err)
	}
	d := &tritonGRPCDriver{triton: o}
	m, err := d.buildRequest(&Request{Prompt: "hi", MaxTokens: 9}, "id", "ensemble")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != len(ft) || len(m.RawInputContents) != len(ft) {
		t.Fatalf("%d inputs, %d raw contents", len(m.Inputs), len(m.RawInputContents))
	}
	if got := binary.LittleEndian.Uint32(m.RawInputContents[1]); got != 9 {
		t.Errorf("request_output_len = %d", got)
	}
	if got := m.GetParameters()["triton_enable_empty_final_response"].GetBoolParam(); !got {
		t.Error("empty final response not requested")
	}
	bad := []TensorInput{
		{Name: "x", Datatype: "FP16", Shape: b, Constant: 1.0},
		{Name: "x", Datatype: DatatypeInt32, Shape: []int64{-1}, Constant: int64(1)},
		{Name: "x", Datatype: DatatypeInt32, Shape: []int64{2}, Source: SourceMaxTokens},
		{Name: "x", Datatype: DatatypeBool, Shape: b, Source: SourcePrompt},
		{Name: "x", Datatype: DatatypeInt32, Shape: []int64{3}, Constant: []any{int64(1)}},
	}
	for _, in := range bad {
		if err := in.Validate(); err == nil {
			t.Errorf("%+v accepted", in)
		}
	}
}

// fakeTriton scripts ModelStreamInfer answers.
type fakeTriton struct {
	tritonpb.UnimplementedGRPCInferenceServiceServer
	script func(req *tritonpb.ModelInferRequest, send func(*tritonpb.ModelStreamInferResponse) error) error
}

func (f *fakeTriton) ServerReady(context.Context, *tritonpb.ServerReadyRequest) (*tritonpb.ServerReadyResponse, error) {
	return &tritonpb.ServerReadyResponse{Ready: true}, nil
}

func (f *fakeTriton) ModelReady(context.Context, *tritonpb.ModelReadyRequest) (*tritonpb.ModelReadyResponse, error) {
	return &tritonpb.ModelReadyResponse{Ready: true}, nil
}

func (f *fakeTriton) ModelStreamInfer(st grpc.BidiStreamingServer[tritonpb.ModelInferRequest, tritonpb.ModelStreamInferResponse]) error {
	req, err := st.Recv()
	if err != nil {
		return err
	}
	if err := f.script(req, st.Send); err != nil {
		return err
	}
	// Like Triton: the RPC ends once the client half-closed.
	for {
		if _, err := st.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func startFakeTriton(t *testing.T, script func(*tritonpb.ModelInferRequest, func(*tritonpb.ModelStreamInferResponse) error) error) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	tritonpb.RegisterGRPCInferenceServiceServer(gs, &fakeTriton{script: script})
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	return l.Addr().String()
}

func textResponse(text string, final *bool) *tritonpb.ModelStreamInferResponse {
	raw, _ := AppendBytesElement(nil, []byte(text))
	r := &tritonpb.ModelInferResponse{
		Outputs:           []*tritonpb.ModelInferResponse_InferOutputTensor{{Name: "text_output", Datatype: "BYTES", Shape: []int64{1, 1}}},
		RawOutputContents: [][]byte{raw},
	}
	if final != nil {
		r.Parameters = map[string]*tritonpb.InferParameter{"triton_final_response": {ParameterChoice: &tritonpb.InferParameter_BoolParam{BoolParam: *final}}}
	}
	return &tritonpb.ModelStreamInferResponse{InferResponse: r}
}

// TestDecoupledStreamEnd covers how a decoupled stream may end: with the
// empty final response we ask for, with the final flag on the last data
// response (a server ignoring the request), without the parameter at all
// (an old server), and the failures.
func TestDecoupledStreamEnd(t *testing.T) {
	f, tr := false, true
	cases := []struct {
		name    string
		script  []*tritonpb.ModelStreamInferResponse
		err     error
		want    Outcome
		chunks  int
		errText string
	}{
		{"empty final response", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f), textResponse("b ", &f),
			{InferResponse: &tritonpb.ModelInferResponse{Parameters: map[string]*tritonpb.InferParameter{
				"triton_final_response": {ParameterChoice: &tritonpb.InferParameter_BoolParam{BoolParam: true}}}}}}, nil, OutcomeSuccess, 2, ""},
		{"final flag on last data", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f), textResponse("b ", &f), textResponse("c ", &tr)}, nil, OutcomeSuccess, 3, ""},
		{"no final parameter (old server)", []*tritonpb.ModelStreamInferResponse{textResponse("a ", nil), textResponse("b ", nil)}, nil, OutcomeSuccess, 2, ""},
		{"final flag missing", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f), textResponse("b ", &f)}, nil, OutcomeIncomplete, 2, "triton_final_response"},
		{"error_message", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f), {ErrorMessage: "boom"}}, nil, OutcomeGRPCError, 1, "boom"},
		{"status", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f)}, status.Error(codes.Internal, "backend died"), OutcomeGRPCError, 1, "backend died"},
		{"empty text first", []*tritonpb.ModelStreamInferResponse{textResponse("", &f), textResponse("x", &tr)}, nil, OutcomeSuccess, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := startFakeTriton(t, func(_ *tritonpb.ModelInferRequest, send func(*tritonpb.ModelStreamInferResponse) error) error {
				for _, m := range c.script {
					time.Sleep(5 * time.Millisecond)
					if err := send(m); err != nil {
						return err
					}
				}
				return c.err
			})
			d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) { o.Address = addr })
			r := probeOnce(t, d, streamReq(), 5*time.Second)
			wantOutcome(t, r, c.want, c.errText)
			if len(r.Chunks) != c.chunks {
				t.Errorf("%d chunks, want %d", len(r.Chunks), c.chunks)
			}
			if c.want == OutcomeSuccess && (r.TTFT <= 0 || r.OutputTokensSource != TokenSourceCounted || r.OutputTokens != c.chunks) {
				t.Errorf("ttft %v tokens %d (%s)", r.TTFT, r.OutputTokens, r.OutputTokensSource)
			}
		})
	}
}

// TestGRPCMetadataAndRequest checks what goes on the wire.
func TestGRPCMetadataAndRequest(t *testing.T) {
	var got *tritonpb.ModelInferRequest
	addr := startFakeTriton(t, func(req *tritonpb.ModelInferRequest, send func(*tritonpb.ModelStreamInferResponse) error) error {
		got = req
		tr := true
		return send(textResponse("x", &tr))
	})
	d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) {
		o.Address = addr
		o.BearerToken = "s3cret"
		o.Triton.ModelVersion = "2"
	})
	r := probeOnce(t, d, &Request{ID: "req-1", Prompt: "hello", MaxTokens: 5, Stream: true}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if got.GetId() != "req-1" || got.GetModelName() != "small" || got.GetModelVersion() != "2" {
		t.Errorf("request id/model/version: %q %q %q", got.GetId(), got.GetModelName(), got.GetModelVersion())
	}
	names := []string{}
	for _, in := range got.GetInputs() {
		names = append(names, in.GetName())
		if in.GetContents() != nil {
			t.Errorf("input %s mixes typed contents with raw", in.GetName())
		}
	}
	// temperature, top_p and random_seed are unset in the request: left out.
	if strings.Join(names, ",") != "text_input,max_tokens,stream,bad_words,stop_words" {
		t.Errorf("inputs %v", names)
	}
	if !bytes.Equal(got.GetRawInputContents()[0], []byte{5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}) {
		t.Errorf("text_input raw % x", got.GetRawInputContents()[0])
	}
}

// TestGenerateRequestBody checks the generate extension's JSON.
func TestGenerateRequestBody(t *testing.T) {
	rec := &recorded{}
	ts := startServer(t, rec.wrap(sseHandler(ev(`{"text_output":"a"}`), ev(`{"text_output":"b"}`))))
	temp := 0.5
	d, _ := newDriver(t, ProtocolTritonGenerate, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 7, Stream: true, Temperature: &temp}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	_, body, path := rec.get()
	if path != "/v2/models/small/generate_stream" {
		t.Errorf("path %s", path)
	}
	if body["text_input"] != "hi" || body["max_tokens"] != float64(7) || body["stream"] != true ||
		body["temperature"] != 0.5 || body["bad_words"] != "" || body["id"] == nil {
		t.Errorf("body %v", body)
	}
	if _, ok := body["top_p"]; ok {
		t.Error("unset top_p sent")
	}
	if len(r.Chunks) != 2 || r.OutputTokensSource != TokenSourceCounted {
		t.Errorf("chunks %d source %s", len(r.Chunks), r.OutputTokensSource)
	}
}

func TestGenerateOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		h       http.Handler
		stream  bool
		want    Outcome
		errText string
	}{
		{"clean close", sseHandler(ev(`{"text_output":"a"}`)), true, OutcomeSuccess, ""},
		{"no responses", sseHandler(), true, OutcomeIncomplete, "before any response"},
		{"finish reason missing", sseHandler(ev(`{"text_output":"a","finish_reason":"None"}`)), true, OutcomeIncomplete, "finish_reason"},
		{"finish reason present", sseHandler(ev(`{"text_output":"a","finish_reason":"None"}`), ev(`{"text_output":"","finish_reason":"length"}`)), true, OutcomeSuccess, ""},
		{"mid-stream error", sseHandler(ev(`{"text_output":"a"}`), ev(`{"error":"inference failed"}`)), true, OutcomeHTTP5xx, "inference failed"},
		{"invalid json", sseHandler(ev(`{"text_output":`)), true, OutcomeProtocolError, "not a valid"},
		{"not found", statusHandler(404, "application/json", `{"error":"Request for unknown model"}`), true, OutcomeHTTP4xx, "unknown model"},
		{"unavailable", statusHandler(503, "application/json", `{"error":"busy"}`), false, OutcomeHTTP5xx, "busy"},
		{"unary ok", statusHandler(200, "application/json", `{"model_name":"m","text_output":"hello","num_output_tokens":3}`), false, OutcomeSuccess, ""},
		{"unary without output", statusHandler(200, "application/json", `{"model_name":"m"}`), false, OutcomeProtocolError, "text_output"},
		{"reset", hijackHandler(2), true, OutcomeIncomplete, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, c.h)
			d, _ := newDriver(t, ProtocolTritonGenerate, ts.URL, nil)
			r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 4, Stream: c.stream}, 5*time.Second)
			wantOutcome(t, r, c.want, c.errText)
			if c.name == "unary ok" && (r.OutputTokens != 3 || r.OutputTokensSource != TokenSourceServer) {
				t.Errorf("tokens %d (%s)", r.OutputTokens, r.OutputTokensSource)
			}
		})
	}
}

// FuzzGenerateStream feeds arbitrary bodies through the generate_stream
// reader: it must classify, never panic, and keep Chunks consistent.
func FuzzGenerateStream(f *testing.F) {
	f.Add([]byte("data: {\"text_output\":\"a\"}\n\ndata: {\"text_output\":\"b\",\"num_output_tokens\":[2]}\n\n"))
	f.Add([]byte("data: {\"text_output\":[\"a\",\"\"],\"finish_reason\":[\"None\"]}\n\ndata: {\"text_output\":\"\",\"finish_reason\":\"stop\"}\n\n"))
	f.Add([]byte("data: {\"error\":\"x\"}\n\n"))
	f.Add([]byte("event: error\ndata: boom\n\n"))
	f.Add([]byte("data: {\"text_output\":1}\n\n"))
	f.Add([]byte("data: [[[[[[\n\n"))
	d := &tritonGenerateDriver{triton: TritonOptions{Outputs: []string{"text_output"}},
		t: &httpTarget{opts: TargetOptions{MaxLineBytes: 1 << 12, MaxResponseBytes: 1 << 16}.withDefaults()}}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		r := &Result{Start: time.Now(), Streamed: true}
		ex := &exchange{t: d.t, parent: context.Background(), ctx: ctx, cancel: cancel, start: r.Start,
			body: &watchedBody{r: bytes.NewReader(body), stall: newStallWatch(time.Hour, func() {})}}
		d.readStream(ex, r)
		if r.Outcome == "" {
			t.Fatal("no outcome")
		}
		if r.Outcome == OutcomeSuccess && r.Err != nil {
			t.Fatalf("success with error %v", r.Err)
		}
		n := 0
		for _, c := range r.Chunks {
			if c.Tokens < 1 {
				t.Fatalf("chunk with %d tokens", c.Tokens)
			}
			n += c.Tokens
		}
		if len(r.Chunks) > 0 && r.OutputTokens != n {
			t.Fatalf("output tokens %d, chunks sum %d", r.OutputTokens, n)
		}
	})
}
