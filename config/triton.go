package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/probe"
)

// Triton is the tensor mapping and gRPC settings of a triton_generate or
// triton_grpc target:
//
//	triton:
//	  preset: trtllm_ensemble        # or vllm_backend, none
//	  inputs:                        # added to the preset; same name replaces
//	    - {name: top_k, datatype: INT32, shape: [1, 1], constant: 1}
//	    - {name: prompt, datatype: BYTES, shape: [1, 1], value: prompt}
//	  outputs: [text_output]
type Triton struct {
	// Preset is trtllm_ensemble (the default), vllm_backend or none.
	Preset string        `yaml:"preset,omitempty"`
	Inputs []TritonInput `yaml:"inputs,omitempty"`
	// Outputs are the BYTES outputs text is read from (default text_output).
	Outputs      []string `yaml:"outputs,omitempty"`
	ModelVersion string   `yaml:"model_version,omitempty"`

	// gRPC only.
	TLS              bool           `yaml:"tls,omitempty"`
	KeepaliveTime    model.Duration `yaml:"keepalive_time,omitempty"`
	KeepaliveTimeout model.Duration `yaml:"keepalive_timeout,omitempty"`
	MaxMessageBytes  int            `yaml:"max_message_bytes,omitempty"`
	// Decoupled sends non-streaming probes over ModelStreamInfer, since
	// Triton refuses ModelInfer for decoupled models.
	Decoupled bool `yaml:"decoupled,omitempty"`
}

// TritonInput is one model input. Value names what of the probe it carries
// (prompt, max_tokens, stream, temperature, top_p, seed, min_tokens,
// ignore_eos, sampling_parameters); Constant is a fixed scalar or list.
// Exactly one of them is set; a constant string that happens to equal a
// source name stays a constant.
type TritonInput struct {
	Name     string  `yaml:"name"`
	Datatype string  `yaml:"datatype"`
	Shape    []int64 `yaml:"shape"`
	Value    string  `yaml:"value,omitempty"`
	Constant any     `yaml:"constant,omitempty"`
}

const (
	maxGRPCMessageBytes = 1 << 30
	minKeepaliveTime    = model.Duration(10e9)
)

func (in *TritonInput) probeInput() probe.TensorInput {
	return probe.TensorInput{
		Name: in.Name, Datatype: in.Datatype, Shape: in.Shape,
		Source: in.Value, Constant: normaliseConstant(in.Constant),
	}
}

// normaliseConstant turns YAML's int into int64 (lists too), the integer
// kinds the probe package encodes.
func normaliseConstant(c any) any {
	switch x := c.(type) {
	case int:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = normaliseConstant(v)
		}
		return out
	}
	return c
}

// Options is the probe-side form, preset applied. It fails only on an
// unknown preset, which validation rejects first; a loaded Target keeps the
// result (DriverOptions copies it).
func (t *Triton) Options() (probe.TritonOptions, error) {
	if t == nil {
		in, err := probe.TritonPreset(probe.PresetTRTLLMEnsemble)
		if err != nil {
			return probe.TritonOptions{}, err
		}
		return probe.TritonOptions{Inputs: in}, nil
	}
	preset := t.Preset
	if preset == "" {
		preset = probe.PresetTRTLLMEnsemble
	}
	base, err := probe.TritonPreset(preset)
	if err != nil {
		return probe.TritonOptions{}, err
	}
	over := make([]probe.TensorInput, 0, len(t.Inputs))
	for i := range t.Inputs {
		over = append(over, t.Inputs[i].probeInput())
	}
	return probe.TritonOptions{
		Inputs:           probe.MergeTensorInputs(base, over),
		Outputs:          slices.Clone(t.Outputs),
		ModelVersion:     t.ModelVersion,
		TLS:              t.TLS,
		KeepaliveTime:    time.Duration(t.KeepaliveTime),
		KeepaliveTimeout: time.Duration(t.KeepaliveTimeout),
		MaxMessageBytes:  t.MaxMessageBytes,
		Decoupled:        t.Decoupled,
	}, nil
}

// resolveTriton applies every target's Triton preset once, at load.
func (c *Config) resolveTriton(d *decoder) {
	for i, t := range c.Targets {
		resolveTargetTriton(d, fmt.Sprintf("targets[%d]", i), t)
	}
	for _, name := range sortedModules(c.Modules) {
		resolveTargetTriton(d, join("modules", name), &c.Modules[name].Target)
	}
}

// resolveTargetTriton applies t's Triton preset.
func resolveTargetTriton(d *decoder, path string, t *Target) {
	if t == nil {
		return
	}
	opts, err := t.Triton.Options()
	if err != nil {
		d.at(path+".triton.preset", "%v", err)
		return
	}
	t.triton = opts
}

// validateTriton checks the triton: block, each problem at its key.
func validateTriton(d *decoder, path string, t *Target) {
	tr := t.Triton
	if tr == nil {
		return
	}
	tp := path + ".triton"
	isTriton := func(p probe.Protocol) bool { return p.Settings == probe.SettingsTriton }
	if !protocolIs(t.Protocol, isTriton) {
		d.at(tp, "triton settings apply to %s only, not %s", protocolNames(isTriton), t.Protocol)
		return
	}
	if tr.Preset != "" && !slices.Contains(probe.TritonPresets(), tr.Preset) {
		d.at(tp+".preset", "unknown preset %q; want one of %s", tr.Preset, strings.Join(probe.TritonPresets(), ", "))
	}
	names := map[string]int{}
	for i := range tr.Inputs {
		in := &tr.Inputs[i]
		ip := fmt.Sprintf("%s.inputs[%d]", tp, i)
		if in.Name == "" {
			d.at(ip+".name", "missing input name")
		} else if prev, dup := names[in.Name]; dup {
			d.at(ip+".name", "input %q appears twice (also inputs[%d])", in.Name, prev)
		} else {
			names[in.Name] = i
		}
		if !slices.Contains(probe.TensorDatatypes(), in.Datatype) {
			if in.Datatype == "" {
				d.at(ip+".datatype", "missing datatype; want one of %s", strings.Join(probe.TensorDatatypes(), ", "))
			} else {
				d.at(ip+".datatype", "unknown datatype %q; want one of %s", in.Datatype, strings.Join(probe.TensorDatatypes(), ", "))
			}
			continue
		}
		// Validate the shape on its own first so its error points at it.
		if err := probe.ValidateShape(in.Shape); err != nil {
			d.at(ip+".shape", "%v", err)
			continue
		}
		switch {
		case in.Value != "" && in.Constant != nil:
			d.at(ip+".constant", "set either value (a source) or constant, not both")
			continue
		case in.Value == "" && in.Constant == nil:
			d.at(ip, "input %q needs value: <source> (%s) or constant: <value>", in.Name, strings.Join(probe.TensorSources(), ", "))
			continue
		}
		pi := in.probeInput()
		if err := pi.Validate(); err != nil {
			key := ".value"
			if in.Constant != nil {
				key = ".constant"
			}
			d.at(ip+key, "%v", err)
		}
	}
	for i, o := range tr.Outputs {
		if o == "" {
			d.at(fmt.Sprintf("%s.outputs[%d]", tp, i), "empty output name")
		}
	}
	isGRPC := func(p probe.Protocol) bool { return isTriton(p) && p.Endpoint == probe.EndpointAddress }
	grpcOnly := func(key string, set bool) {
		if set && !protocolIs(t.Protocol, isGRPC) {
			d.at(tp+"."+key, "%s applies to %s only", key, joinAnd(protocolsWhere(isGRPC)))
		}
	}
	grpcOnly("tls", tr.TLS)
	grpcOnly("keepalive_time", tr.KeepaliveTime != 0)
	grpcOnly("keepalive_timeout", tr.KeepaliveTimeout != 0)
	grpcOnly("max_message_bytes", tr.MaxMessageBytes != 0)
	grpcOnly("decoupled", tr.Decoupled)
	if tr.KeepaliveTime != 0 && tr.KeepaliveTime < minKeepaliveTime {
		d.at(tp+".keepalive_time", "keepalive_time %s is below gRPC's minimum of 10s (and Triton's default policy wants 5m)", tr.KeepaliveTime)
	}
	positive(d, tp+".keepalive_timeout", tr.KeepaliveTimeout)
	if tr.MaxMessageBytes < 0 || tr.MaxMessageBytes > maxGRPCMessageBytes {
		d.at(tp+".max_message_bytes", "want 1 to %d bytes, got %d", maxGRPCMessageBytes, tr.MaxMessageBytes)
	}
}
