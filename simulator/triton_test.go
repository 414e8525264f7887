package simulator

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

// startGRPC serves Triton's gRPC API of ts's server on a loopback port and
// returns a client for it.
func startGRPC(t *testing.T, ts *testServer) tritonpb.GRPCInferenceServiceClient {
	t.Helper()
	l := testutil.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.srv.ServeGRPC(ctx, l) }()
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeGRPC: %v", err)
		}
	})
	return tritonpb.NewGRPCInferenceServiceClient(conn)
}

// TestTritonGenerateNumInputTokens: with return_num_input_tokens every
// response carries the prompt's length as planned (the ground truth's
// prompt_tokens), streamed or not; without it, none does.
func TestTritonGenerateNumInputTokens(t *testing.T) {
	ts := startServer(t, fastConfig())
	for _, stream := range []bool{true, false} {
		for _, ask := range []bool{true, false} {
			path := "/v2/models/sim-llm/generate"
			if stream {
				path += "_stream"
			}
			body := map[string]any{"text_input": "one two three four five", "max_tokens": 5, "ignore_eos": true,
				"stream": stream, "return_num_input_tokens": ask, "return_num_output_tokens": true}
			resp := ts.post(t, path, body)
			id := resp.Header.Get(HeaderRequestID)
			var objs []string
			if stream {
				evs, err := readSSE(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					objs = append(objs, e.data)
				}
			} else {
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, string(b))
			}
			resp.Body.Close()
			rec := ts.truth(t, id)
			if rec.PromptTokens != 5 || len(objs) == 0 {
				t.Fatalf("stream=%v: prompt tokens %d, %d responses", stream, rec.PromptTokens, len(objs))
			}
			for _, o := range objs {
				var m map[string]any
				if err := json.Unmarshal([]byte(o), &m); err != nil {
					t.Fatalf("stream=%v: %q: %v", stream, o, err)
				}
				n, has := m["num_input_tokens"]
				if ask && n != float64(rec.PromptTokens) {
					t.Errorf("stream=%v: num_input_tokens %v, want %d in %s", stream, n, rec.PromptTokens, o)
				}
				if !ask && has {
					t.Errorf("stream=%v: num_input_tokens sent unasked: %s", stream, o)
				}
			}
		}
	}
	code, b := ts.get(t, "/v2/models/sim-llm")
	var md struct {
		Inputs, Outputs []struct{ Name, Datatype string }
	}
	if err := json.Unmarshal(b, &md); code != 200 || err != nil {
		t.Fatalf("metadata %d %v", code, err)
	}
	in := slices.IndexFunc(md.Inputs, func(x struct{ Name, Datatype string }) bool { return x.Name == "return_num_input_tokens" })
	out := slices.IndexFunc(md.Outputs, func(x struct{ Name, Datatype string }) bool { return x.Name == "num_input_tokens" })
	if in < 0 || md.Inputs[in].Datatype != "BOOL" || out < 0 || md.Outputs[out].Datatype != "UINT32" {
		t.Errorf("metadata does not advertise return_num_input_tokens / num_input_tokens: %s", b)
	}
}

func boolRaw(v bool) []byte {
	if v {
		return []byte{1}
	}
	return []byte{0}
}

func bytesRaw(s string) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// grpcVLLMRequest is a vLLM-backend style request with raw contents.
func grpcVLLMRequest(id string, stream, askInput bool) *tritonpb.ModelInferRequest {
	m := &tritonpb.ModelInferRequest{ModelName: "sim-llm", Id: id, Parameters: map[string]*tritonpb.InferParameter{
		"triton_enable_empty_final_response": boolParam(true)}}
	add := func(name, dt string, raw []byte) {
		m.Inputs = append(m.Inputs, &tritonpb.ModelInferRequest_InferInputTensor{Name: name, Datatype: dt, Shape: []int64{1}})
		m.RawInputContents = append(m.RawInputContents, raw)
	}
	add("text_input", "BYTES", bytesRaw("alpha beta gamma"))
	add("sampling_parameters", "BYTES", bytesRaw(`{"max_tokens":4,"ignore_eos":true}`))
	add("stream", "BOOL", boolRaw(stream))
	add("return_num_input_tokens", "BOOL", boolRaw(askInput))
	return m
}

// numInputTokens reads the num_input_tokens output; ok is false when the
// response has none.
func numInputTokens(t *testing.T, r *tritonpb.ModelInferResponse) (uint32, bool) {
	t.Helper()
	for i, o := range r.GetOutputs() {
		if o.GetName() != "num_input_tokens" {
			continue
		}
		raw := r.GetRawOutputContents()[i]
		if o.GetDatatype() != "UINT32" || len(raw) != 4 {
			t.Fatalf("num_input_tokens %s with %d bytes", o.GetDatatype(), len(raw))
		}
		return binary.LittleEndian.Uint32(raw), true
	}
	return 0, false
}

// TestTritonGRPCNumInputTokens: ModelStreamInfer (streaming and not) and
// ModelInfer honour return_num_input_tokens in every data response.
func TestTritonGRPCNumInputTokens(t *testing.T) {
	ts := startServer(t, fastConfig())
	c := startGRPC(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, stream := range []bool{true, false} {
		for _, ask := range []bool{true, false} {
			id := "grpc-in-" + map[bool]string{true: "s", false: "u"}[stream] + map[bool]string{true: "1", false: "0"}[ask]
			st, err := c.ModelStreamInfer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(grpcVLLMRequest(id, stream, ask)); err != nil {
				t.Fatal(err)
			}
			_ = st.CloseSend()
			var data []*tritonpb.ModelInferResponse
			for {
				m, err := st.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if em := m.GetErrorMessage(); em != "" {
					t.Fatal(em)
				}
				if len(m.GetInferResponse().GetOutputs()) > 0 {
					data = append(data, m.GetInferResponse())
				}
			}
			rec := ts.truth(t, id)
			if rec.PromptTokens != 3 || len(data) == 0 {
				t.Fatalf("stream=%v: prompt tokens %d, %d data responses", stream, rec.PromptTokens, len(data))
			}
			for _, r := range data {
				n, has := numInputTokens(t, r)
				if has != ask || (ask && int(n) != rec.PromptTokens) {
					t.Errorf("stream=%v ask=%v: num_input_tokens %d (present %v), want %d", stream, ask, n, has, rec.PromptTokens)
				}
			}
		}
	}
	r, err := c.ModelInfer(ctx, grpcVLLMRequest("grpc-in-unary", false, true))
	if err != nil {
		t.Fatal(err)
	}
	if n, has := numInputTokens(t, r); !has || n != 3 {
		t.Errorf("ModelInfer: num_input_tokens %d (present %v), want 3", n, has)
	}
	md, err := c.ModelMetadata(ctx, &tritonpb.ModelMetadataRequest{Name: "sim-llm"})
	if err != nil {
		t.Fatal(err)
	}
	in := slices.IndexFunc(md.GetInputs(), func(x *tritonpb.ModelMetadataResponse_TensorMetadata) bool {
		return x.GetName() == "return_num_input_tokens"
	})
	out := slices.IndexFunc(md.GetOutputs(), func(x *tritonpb.ModelMetadataResponse_TensorMetadata) bool { return x.GetName() == "num_input_tokens" })
	if in < 0 || out < 0 || md.GetOutputs()[out].GetDatatype() != "UINT32" {
		t.Errorf("gRPC metadata does not advertise num_input_tokens: %v", md)
	}
}
