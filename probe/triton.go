package probe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TritonOptions configures the two Triton drivers (triton_generate,
// triton_grpc). The zero value is the TensorRT-LLM ensemble preset.
type TritonOptions struct {
	// Inputs are the model inputs sent with every probe, presets already
	// applied (see TritonPreset, MergeTensorInputs). Empty means the
	// trtllm_ensemble preset.
	Inputs []TensorInput
	// Outputs name the BYTES outputs the generated text is read from, in
	// order; empty means ["text_output"].
	Outputs []string
	// ModelVersion pins a model version ("" = the server's policy).
	ModelVersion string

	// The following apply to triton_grpc only.

	// TLS switches gRPC to TLS even when TargetOptions.TLS is all
	// defaults (a server with a publicly trusted certificate). Any
	// setting in TargetOptions.TLS implies TLS.
	TLS bool
	// KeepaliveTime sends HTTP/2 pings after this much idle time; zero
	// leaves keepalive off. Triton rejects pings more often than every
	// 5 minutes unless started with a lower
	// --grpc-http2-min-recv-ping-interval-without-data-ms.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxMessageBytes bounds one received gRPC message (and one sent);
	// zero means DefaultGRPCMaxMessageBytes.
	MaxMessageBytes int
	// Decoupled sends non-streaming probes over ModelStreamInfer (with the
	// stream input false) instead of ModelInfer, which Triton refuses for
	// models with a decoupled transaction policy.
	Decoupled bool
}

// DefaultGRPCMaxMessageBytes bounds one gRPC message unless configured.
const DefaultGRPCMaxMessageBytes = 16 << 20

// Names of outputs read besides the text, when a model returns them.
const (
	// outputNumTokens is the vLLM backend's count (return_num_output_tokens):
	// tokens generated since the previous response when streaming.
	outputNumTokens = "num_output_tokens"
	// outputNumInputTokens is the vLLM backend's prompt length
	// (return_num_input_tokens), the same in every response.
	outputNumInputTokens = "num_input_tokens"
	// outputFinishReason is the vLLM backend's (return_finish_reason) and
	// the TRT-LLM LLM-API model's; "None" on unfinished responses.
	outputFinishReason = "finish_reason"
)

// resolved returns the options with defaults applied, after checking the
// inputs (config validation does the same with positions; this guards
// programmatic use).
func (o TritonOptions) resolved() (TritonOptions, error) {
	if len(o.Inputs) == 0 {
		in, _ := TritonPreset(PresetTRTLLMEnsemble)
		o.Inputs = in
	}
	names := map[string]bool{}
	for i := range o.Inputs {
		in := &o.Inputs[i]
		if err := in.Validate(); err != nil {
			return o, err
		}
		if names[in.Name] {
			return o, fmt.Errorf("input %s appears twice", in.Name)
		}
		names[in.Name] = true
	}
	if len(o.Outputs) == 0 {
		o.Outputs = []string{"text_output"}
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultGRPCMaxMessageBytes
	}
	return o, nil
}

// isTextOutput reports whether name is one of the text outputs.
func (o *TritonOptions) isTextOutput(name string) bool { return slices.Contains(o.Outputs, name) }

// realFinishReason drops the placeholders the vLLM backend sends on
// unfinished responses (Python's str(None)).
func realFinishReason(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || s == "None" || s == "null" {
		return ""
	}
	return s
}

// tritonCounts gathers per-response token counts: a chunk's count comes
// from the server when the response carried num_output_tokens, else it is
// one decoding step (TensorRT-LLM streams one response per step).
type tritonCounts struct {
	// counted is how many chunks have our count rather than the server's;
	// the total is the server's only when none has.
	counted   int
	anyFinish bool // some response carried a finish_reason output
}

// add records an output chunk read at `at`; n and fromServer are the
// response's num_output_tokens, if it had a usable one.
func (c *tritonCounts) add(r *Result, at time.Time, n int, fromServer bool) error {
	if !fromServer || n <= 0 || n > maxTokensPerChunk {
		n, fromServer = 1, false
	}
	err := r.addChunk(at, n)
	if err != nil && !errors.Is(err, errCut) {
		return err
	}
	if !fromServer {
		c.counted++
	}
	return err
}

// setInputTokens records the server's prompt count from the first
// response that carried a non-zero one. The vLLM backend repeats the same
// value in every response; zero would mean a response built without the
// prompt (an empty final response), not an empty prompt, which vLLM refuses.
func setInputTokens(r *Result, n int, ok bool) {
	if ok && n > 0 && r.InputTokensSource == TokenSourceNone {
		r.InputTokens, r.InputTokensSource = n, TokenSourceServer
	}
}

// finish sets the output token count and its source.
func (c *tritonCounts) finish(r *Result) {
	if len(r.Chunks) == 0 {
		return
	}
	r.countChunkTokens()
	if c.counted == 0 {
		r.OutputTokensSource = TokenSourceServer
	}
}
