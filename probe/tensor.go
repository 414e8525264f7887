package probe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file is the tensor mapping shared by the two Triton drivers: which
// model inputs a probe's request becomes, with which datatype and shape, and
// how tensors are encoded (raw little-endian for gRPC, JSON scalars for the
// generate extension).

// Tensor datatypes the mapping supports (KServe v2 names).
const (
	DatatypeBytes  = "BYTES"
	DatatypeBool   = "BOOL"
	DatatypeInt32  = "INT32"
	DatatypeInt64  = "INT64"
	DatatypeUint32 = "UINT32"
	DatatypeUint64 = "UINT64"
	DatatypeFP32   = "FP32"
	DatatypeFP64   = "FP64"
)

// TensorDatatypes lists the datatypes an input may have.
func TensorDatatypes() []string {
	return []string{DatatypeBytes, DatatypeBool, DatatypeInt32, DatatypeInt64,
		DatatypeUint32, DatatypeUint64, DatatypeFP32, DatatypeFP64}
}

// Value sources: what of the probe's Request an input carries.
const (
	SourcePrompt      = "prompt"      // the prompt text (BYTES)
	SourceMaxTokens   = "max_tokens"  // the sampled max_tokens (integer types)
	SourceStream      = "stream"      // whether the probe streams (BOOL)
	SourceTemperature = "temperature" // workload temperature; input left out when unset
	SourceTopP        = "top_p"       // workload top_p; left out when unset
	SourceSeed        = "seed"        // workload seed; left out when unset
	SourceMinTokens   = "min_tokens"  // workload min_tokens; left out when 0
	SourceIgnoreEOS   = "ignore_eos"  // workload ignore_eos (BOOL)
	// SourceSamplingParameters is the vLLM backend's sampling_parameters:
	// a JSON object of vLLM SamplingParams built from the request.
	SourceSamplingParameters = "sampling_parameters"
)

// TensorSources lists the value sources an input may name.
func TensorSources() []string {
	return []string{SourcePrompt, SourceMaxTokens, SourceStream, SourceTemperature, SourceTopP,
		SourceSeed, SourceMinTokens, SourceIgnoreEOS, SourceSamplingParameters}
}

// Presets of the Triton tensor mapping.
const (
	PresetTRTLLMEnsemble = "trtllm_ensemble"
	PresetVLLMBackend    = "vllm_backend"
	PresetNone           = "none"
)

// TritonPresets lists the preset names.
func TritonPresets() []string {
	return []string{PresetTRTLLMEnsemble, PresetVLLMBackend, PresetNone}
}

// maxTensorElements bounds one input's element count: probes send scalars
// and short lists, so anything larger is a configuration mistake.
const maxTensorElements = 4096

// TensorInput is one model input built for every probe. Exactly one of
// Source and Constant is set.
type TensorInput struct {
	Name     string
	Datatype string
	// Shape is the concrete shape sent (no -1: a request's dims are
	// known). Models with max_batch_size > 0 need the leading batch
	// dimension, e.g. [1, 1].
	Shape  []int64
	Source string
	// Constant is a bool, an integer (int64 or uint64), a float64, a
	// string, or a list of those with one entry per element.
	Constant any
}

// TritonPreset returns the inputs of a preset. The TensorRT-LLM ensemble
// has max_batch_size > 0, hence the [1, 1] shapes; the vLLM backend forces
// max_batch_size 0, hence [1].
func TritonPreset(name string) ([]TensorInput, error) {
	b := []int64{1, 1}
	one := []int64{1}
	switch name {
	case PresetTRTLLMEnsemble:
		return []TensorInput{
			{Name: "text_input", Datatype: DatatypeBytes, Shape: b, Source: SourcePrompt},
			{Name: "max_tokens", Datatype: DatatypeInt32, Shape: b, Source: SourceMaxTokens},
			{Name: "stream", Datatype: DatatypeBool, Shape: b, Source: SourceStream},
			// Older releases of the ensemble require both; "" means none.
			{Name: "bad_words", Datatype: DatatypeBytes, Shape: b, Constant: ""},
			{Name: "stop_words", Datatype: DatatypeBytes, Shape: b, Constant: ""},
			{Name: "temperature", Datatype: DatatypeFP32, Shape: b, Source: SourceTemperature},
			{Name: "top_p", Datatype: DatatypeFP32, Shape: b, Source: SourceTopP},
			{Name: "random_seed", Datatype: DatatypeUint64, Shape: b, Source: SourceSeed},
		}, nil
	case PresetVLLMBackend:
		return []TensorInput{
			{Name: "text_input", Datatype: DatatypeBytes, Shape: one, Source: SourcePrompt},
			{Name: "stream", Datatype: DatatypeBool, Shape: one, Source: SourceStream},
			{Name: "sampling_parameters", Datatype: DatatypeBytes, Shape: one, Source: SourceSamplingParameters},
			{Name: "exclude_input_in_output", Datatype: DatatypeBool, Shape: one, Constant: true},
			// The backend's own token counts and finish reason: the counts
			// make input and output tokens the server's, the finish reason
			// makes a truncated generate_stream detectable.
			{Name: "return_num_input_tokens", Datatype: DatatypeBool, Shape: one, Constant: true},
			{Name: "return_num_output_tokens", Datatype: DatatypeBool, Shape: one, Constant: true},
			{Name: "return_finish_reason", Datatype: DatatypeBool, Shape: one, Constant: true},
		}, nil
	case PresetNone, "":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown preset %q (want %s)", name, strings.Join(TritonPresets(), ", "))
}

// MergeTensorInputs returns the preset's inputs with overrides applied: an
// override with a preset input's name replaces it in place, others are
// appended in order.
func MergeTensorInputs(preset, overrides []TensorInput) []TensorInput {
	out := slices.Clone(preset)
	for _, o := range overrides {
		if i := slices.IndexFunc(out, func(in TensorInput) bool { return in.Name == o.Name }); i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
	}
	return out
}

// Elements is the element count of the input's shape.
func (in *TensorInput) Elements() int64 {
	n := int64(1)
	for _, d := range in.Shape {
		n *= d
	}
	return n
}

// Validate checks the input on its own: known datatype, a concrete shape of
// bounded size, a source that fits the datatype and carries one element, a
// constant that fits the datatype and the shape.
func (in *TensorInput) Validate() error {
	if in.Name == "" {
		return errors.New("input needs a name")
	}
	if !slices.Contains(TensorDatatypes(), in.Datatype) {
		return fmt.Errorf("input %s: unknown datatype %q (want %s)", in.Name, in.Datatype, strings.Join(TensorDatatypes(), ", "))
	}
	if err := ValidateShape(in.Shape); err != nil {
		return fmt.Errorf("input %s: %w", in.Name, err)
	}
	n := in.Elements()
	switch {
	case in.Source != "" && in.Constant != nil:
		return fmt.Errorf("input %s: set either a value source or a constant, not both", in.Name)
	case in.Source != "":
		if n != 1 {
			return fmt.Errorf("input %s: source %s gives one element but shape %v has %d", in.Name, in.Source, in.Shape, n)
		}
		want := sourceDatatypes(in.Source)
		if want == nil {
			return fmt.Errorf("input %s: unknown value source %q (want %s)", in.Name, in.Source, strings.Join(TensorSources(), ", "))
		}
		if !slices.Contains(want, in.Datatype) {
			return fmt.Errorf("input %s: source %s cannot be sent as %s (want %s)", in.Name, in.Source, in.Datatype, strings.Join(want, ", "))
		}
	case in.Constant != nil:
		vals := constantElements(in.Constant)
		if int64(len(vals)) != n {
			return fmt.Errorf("input %s: constant has %d elements but shape %v has %d", in.Name, len(vals), in.Shape, n)
		}
		for _, v := range vals {
			if _, err := appendElement(nil, in.Datatype, v); err != nil {
				return fmt.Errorf("input %s: %w", in.Name, err)
			}
		}
	default:
		return fmt.Errorf("input %s: needs a value source or a constant", in.Name)
	}
	return nil
}

// ValidateShape checks that a request shape is concrete and small.
func ValidateShape(shape []int64) error {
	if len(shape) == 0 || len(shape) > 8 {
		return fmt.Errorf("shape needs 1 to 8 dimensions, got %d", len(shape))
	}
	n := int64(1)
	for _, d := range shape {
		if d < 1 {
			return fmt.Errorf("impossible shape %v: every dimension must be at least 1 (a request's shape is concrete; -1 belongs in the model config)", shape)
		}
		n *= d
		if n > maxTensorElements {
			return fmt.Errorf("shape %v has more than %d elements", shape, maxTensorElements)
		}
	}
	return nil
}

var intTypes = []string{DatatypeInt32, DatatypeInt64, DatatypeUint32, DatatypeUint64}

func sourceDatatypes(src string) []string {
	switch src {
	case SourcePrompt, SourceSamplingParameters:
		return []string{DatatypeBytes}
	case SourceMaxTokens, SourceMinTokens:
		return append(slices.Clone(intTypes), DatatypeFP32, DatatypeFP64)
	case SourceSeed:
		return intTypes
	case SourceStream, SourceIgnoreEOS:
		return []string{DatatypeBool}
	case SourceTemperature, SourceTopP:
		return []string{DatatypeFP32, DatatypeFP64}
	}
	return nil
}

func constantElements(c any) []any {
	if l, ok := c.([]any); ok {
		return l
	}
	return []any{c}
}

// values resolves the input for one request: its elements, or ok=false
// when the source is unset and the input is left out (optional inputs).
func (in *TensorInput) values(req *Request) (vals []any, ok bool) {
	if in.Constant != nil {
		return constantElements(in.Constant), true
	}
	var v any
	switch in.Source {
	case SourcePrompt:
		v = req.promptText()
	case SourceMaxTokens:
		if req.MaxTokens <= 0 {
			return nil, false
		}
		v = int64(req.MaxTokens)
	case SourceMinTokens:
		if req.MinTokens <= 0 {
			return nil, false
		}
		v = int64(req.MinTokens)
	case SourceStream:
		v = req.Stream
	case SourceIgnoreEOS:
		v = req.IgnoreEOS
	case SourceTemperature:
		if req.Temperature == nil {
			return nil, false
		}
		v = *req.Temperature
	case SourceTopP:
		if req.TopP == nil {
			return nil, false
		}
		v = *req.TopP
	case SourceSeed:
		if req.Seed == nil {
			return nil, false
		}
		v = *req.Seed
	case SourceSamplingParameters:
		v = samplingParameters(req)
	default:
		return nil, false
	}
	return []any{v}, true
}

// samplingParameters is the vLLM backend's sampling_parameters JSON: the
// vLLM SamplingParams fields a probe sets.
func samplingParameters(req *Request) string {
	m := map[string]any{}
	req.putVLLMSampling(m)
	b, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// appendElement appends one element in Triton's raw little-endian layout;
// BYTES elements get their 4-byte length prefix.
func appendElement(dst []byte, datatype string, v any) ([]byte, error) {
	switch datatype {
	case DatatypeBytes:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case bool:
			s = strconv.FormatBool(x)
		case int64, uint64, int, float64:
			s = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("cannot send %T as BYTES", v)
		}
		return AppendBytesElement(dst, []byte(s))
	case DatatypeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("BOOL needs true or false, got %v", v)
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case DatatypeInt32, DatatypeInt64, DatatypeUint32, DatatypeUint64:
		i, u, neg, err := integer(v)
		if err != nil {
			return nil, err
		}
		switch datatype {
		case DatatypeInt32:
			if (neg && i < math.MinInt32) || (!neg && u > math.MaxInt32) {
				return nil, fmt.Errorf("%v is out of range for INT32", v)
			}
			return binary.LittleEndian.AppendUint32(dst, uint32(int32(i))), nil
		case DatatypeInt64:
			if !neg && u > math.MaxInt64 {
				return nil, fmt.Errorf("%v is out of range for INT64", v)
			}
			return binary.LittleEndian.AppendUint64(dst, uint64(i)), nil
		case DatatypeUint32:
			if neg || u > math.MaxUint32 {
				return nil, fmt.Errorf("%v is out of range for UINT32", v)
			}
			return binary.LittleEndian.AppendUint32(dst, uint32(u)), nil
		default:
			if neg {
				return nil, fmt.Errorf("%v is out of range for UINT64", v)
			}
			return binary.LittleEndian.AppendUint64(dst, u), nil
		}
	case DatatypeFP32, DatatypeFP64:
		f, err := float(v)
		if err != nil {
			return nil, err
		}
		if datatype == DatatypeFP32 {
			if math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%v is out of range for FP32", v)
			}
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	}
	return nil, fmt.Errorf("unsupported datatype %q", datatype)
}

// integer reads an integer value; i is valid when neg, u otherwise (and i
// too when u fits an int64).
func integer(v any) (i int64, u uint64, neg bool, err error) {
	switch x := v.(type) {
	case int:
		return integer(int64(x))
	case int64:
		if x < 0 {
			return x, 0, true, nil
		}
		return x, uint64(x), false, nil
	case uint64:
		return int64(x), x, false, nil
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.Abs(x) > 1<<53 {
			return 0, 0, false, fmt.Errorf("%v is not a whole number", v)
		}
		return integer(int64(x))
	}
	return 0, 0, false, fmt.Errorf("want a whole number, got %v", v)
}

func float(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("want a number, got %v", v)
}

// maxBytesElement bounds one BYTES element (the 4-byte length prefix
// allows 4 GiB; a prompt is far smaller).
const maxBytesElement = math.MaxUint32

// AppendBytesElement appends one BYTES element as Triton lays it out in
// raw contents: a 4-byte little-endian length, then the bytes.
func AppendBytesElement(dst, b []byte) ([]byte, error) {
	if uint64(len(b)) > maxBytesElement {
		return nil, errors.New("BYTES element longer than 4 GiB")
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...), nil
}

// DecodeBytesTensor splits raw BYTES contents into elements. The elements
// alias raw. It fails on a truncated length or element and on more than
// maxElems elements, never panics.
func DecodeBytesTensor(raw []byte, maxElems int) ([][]byte, error) {
	var out [][]byte
	for len(raw) > 0 {
		if len(out) >= maxElems {
			return nil, fmt.Errorf("BYTES tensor has more than %d elements", maxElems)
		}
		if len(raw) < 4 {
			return nil, fmt.Errorf("BYTES tensor: %d trailing bytes are not a length prefix", len(raw))
		}
		n := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		if uint64(n) > uint64(len(raw)) {
			return nil, fmt.Errorf("BYTES tensor: element of %d bytes but only %d left", n, len(raw))
		}
		out = append(out, raw[:n:n])
		raw = raw[n:]
	}
	return out, nil
}

// encodeRaw encodes all elements of the input for raw_input_contents.
func (in *TensorInput) encodeRaw(vals []any) ([]byte, error) {
	var b []byte
	for _, v := range vals {
		var err error
		if b, err = appendElement(b, in.Datatype, v); err != nil {
			return nil, fmt.Errorf("input %s: %w", in.Name, err)
		}
	}
	return b, nil
}

// jsonValue is the input as the generate extension takes it: a scalar, or
// a list for several elements. Values are converted to the datatype's JSON
// kind so that Triton's conversion to the tensor type succeeds.
func (in *TensorInput) jsonValue(vals []any) (any, error) {
	conv := make([]any, 0, len(vals))
	for _, v := range vals {
		// appendElement is the one place that checks ranges and kinds.
		if _, err := appendElement(nil, in.Datatype, v); err != nil {
			return nil, fmt.Errorf("input %s: %w", in.Name, err)
		}
		switch in.Datatype {
		case DatatypeBytes:
			if s, ok := v.(string); ok {
				conv = append(conv, s)
			} else {
				conv = append(conv, fmt.Sprint(v))
			}
		case DatatypeFP32, DatatypeFP64:
			f, _ := float(v)
			conv = append(conv, f)
		case DatatypeBool:
			conv = append(conv, v)
		default:
			i, u, neg, _ := integer(v)
			if neg {
				conv = append(conv, i)
			} else {
				conv = append(conv, u)
			}
		}
	}
	if len(conv) == 1 {
		return conv[0], nil
	}
	return conv, nil
}
