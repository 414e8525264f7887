package probe

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

func TestVLLMPresetAsksForInputTokens(t *testing.T) {
	in, err := TritonPreset(PresetVLLMBackend)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(in, func(x TensorInput) bool { return x.Name == "return_num_input_tokens" })
	if i < 0 || in[i].Datatype != DatatypeBool || in[i].Constant != true || !slices.Equal(in[i].Shape, []int64{1}) {
		t.Fatalf("vllm_backend preset: return_num_input_tokens missing or wrong: %+v", in)
	}
}

// TestGenerateInputTokens: the first non-zero num_input_tokens is the
// server's prompt count; without one the count stays unknown.
func TestGenerateInputTokens(t *testing.T) {
	cases := []struct {
		name   string
		steps  []step
		stream bool
		want   int
	}{
		{"stream", []step{ev(`{"text_output":"a","num_input_tokens":0}`), ev(`{"text_output":"b","num_input_tokens":[7]}`),
			ev(`{"text_output":"c","num_input_tokens":9}`)}, true, 7},
		{"stream without", []step{ev(`{"text_output":"a"}`), ev(`{"text_output":"b"}`)}, true, 0},
		{"stream garbage", []step{ev(`{"text_output":"a","num_input_tokens":"x"}`), ev(`{"text_output":"b","num_input_tokens":-3}`)}, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, sseHandler(c.steps...))
			d, _ := newDriver(t, ProtocolTritonGenerate, ts.URL, nil)
			r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 4, Stream: c.stream}, 5*time.Second)
			wantOutcome(t, r, OutcomeSuccess, "")
			wantSrc := TokenSourceServer
			if c.want == 0 {
				wantSrc = TokenSourceNone
			}
			if r.InputTokens != c.want || r.InputTokensSource != wantSrc {
				t.Errorf("input tokens %d (%q), want %d (%q)", r.InputTokens, r.InputTokensSource, c.want, wantSrc)
			}
		})
	}
	ts := startServer(t, statusHandler(200, "application/json", `{"model_name":"m","text_output":"hello","num_input_tokens":[12],"num_output_tokens":3}`))
	d, _ := newDriver(t, ProtocolTritonGenerate, ts.URL, nil)
	r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 4}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.InputTokens != 12 || r.InputTokensSource != TokenSourceServer {
		t.Errorf("unary: input tokens %d (%q)", r.InputTokens, r.InputTokensSource)
	}
}

// withInputTokens adds a num_input_tokens output to a stream response.
func withInputTokens(m *tritonpb.ModelStreamInferResponse, n uint32) *tritonpb.ModelStreamInferResponse {
	ir := m.GetInferResponse()
	ir.Outputs = append(ir.Outputs, &tritonpb.ModelInferResponse_InferOutputTensor{Name: "num_input_tokens", Datatype: DatatypeUint32, Shape: []int64{1}})
	ir.RawOutputContents = append(ir.RawOutputContents, binary.LittleEndian.AppendUint32(nil, n))
	return m
}

func TestGRPCInputTokens(t *testing.T) {
	f, tr := false, true
	for _, c := range []struct {
		name   string
		script []*tritonpb.ModelStreamInferResponse
		want   int
	}{
		{"first non-zero", []*tritonpb.ModelStreamInferResponse{withInputTokens(textResponse("a ", &f), 0),
			withInputTokens(textResponse("b ", &f), 21), withInputTokens(textResponse("c ", &tr), 5)}, 21},
		{"absent", []*tritonpb.ModelStreamInferResponse{textResponse("a ", &f), textResponse("b ", &tr)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := startFakeTriton(t, func(_ *tritonpb.ModelInferRequest, send func(*tritonpb.ModelStreamInferResponse) error) error {
				for _, m := range c.script {
					if err := send(m); err != nil {
						return err
					}
				}
				return nil
			})
			for _, stream := range []bool{true, false} {
				d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) { o.Address = addr; o.Triton.Decoupled = true })
				r := probeOnce(t, d, &Request{Prompt: "hi", MaxTokens: 4, Stream: stream}, 5*time.Second)
				wantOutcome(t, r, OutcomeSuccess, "")
				wantSrc := TokenSourceServer
				if c.want == 0 {
					wantSrc = TokenSourceNone
				}
				if r.InputTokens != c.want || r.InputTokensSource != wantSrc {
					t.Errorf("stream=%v: input tokens %d (%q), want %d (%q)", stream, r.InputTokens, r.InputTokensSource, c.want, wantSrc)
				}
			}
		})
	}
}
