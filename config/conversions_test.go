package config

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

func TestServerTargets(t *testing.T) {
	cfg, err := Load("testdata/good/full.yml")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.ServerTargets()
	want := []collector.ServerTarget{{Name: "vllm", URL: "http://vllm.example:8000/metrics", Kind: collector.KindVLLM,
		Timeout: DefaultServerMetricsTime, TLSConfig: cfg.Targets[0].TLSConfig}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("ServerTargets() = %+v, want %+v", got, want)
	}
	cfg, err = Load("testdata/good/minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ServerTargets(); len(got) != 0 {
		t.Errorf("no server_metrics, got %+v", got)
	}
}

func TestGPUSettings(t *testing.T) {
	for enabled, want := range map[GPUMode]collector.GPUMode{"auto": collector.GPUAuto, "true": collector.GPUOn, "false": collector.GPUOff} {
		g := GPUs{Enabled: enabled, Library: "/lib/x.so", Devices: []int{1, 0}}
		s := g.Settings()
		if s.Mode != want || s.Mode.String() != string(enabled) || s.Library != g.Library || !slices.Equal(s.Devices, g.Devices) {
			t.Errorf("%s: %+v", enabled, s)
		}
		s.Devices[0] = 7
		if g.Devices[0] != 1 {
			t.Error("Settings shares the device list")
		}
	}
}

func TestCollectorSLO(t *testing.T) {
	cfg, err := Load("testdata/good/full.yml")
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Targets[0].Probes
	if got, want := ps[0].CollectorSLO(), (collector.SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond, Objective: 0.995}); got != want {
		t.Errorf("CollectorSLO() = %+v, want %+v", got, want)
	}
	if got := ps[1].CollectorSLO(); got != (collector.SLO{}) {
		t.Errorf("no slo: %+v", got)
	}
}

// TestTritonResolvedAtLoad: DriverOptions carries the preset applied at
// load, the same as resolving it now, and each call gets its own lists.
func TestTritonResolvedAtLoad(t *testing.T) {
	src := `targets:
  - {name: a, protocol: triton_grpc, address: "localhost:8001", model: m, probes: [{name: p, schedule: {every: 1s}}]}
  - name: b
    protocol: triton_generate
    url: http://localhost:8000
    model: m
    triton:
      preset: vllm_backend
      inputs: [{name: top_k, datatype: INT32, shape: [1], constant: 1}]
      outputs: [text_output]
    probes: [{name: p, schedule: {every: 1s}}]
  - {name: c, protocol: openai_chat, url: "http://localhost:8000", model: m, probes: [{name: p, schedule: {every: 1s}}]}
`
	cfg, err := Parse([]byte(src), "x.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range cfg.Targets {
		want, err := tg.Triton.Options()
		if err != nil {
			t.Fatal(err)
		}
		got := tg.DriverOptions().Triton
		if !reflect.DeepEqual(got, want) || len(got.Inputs) == 0 {
			t.Errorf("%s: DriverOptions().Triton = %+v, want %+v", tg.Name, got, want)
		}
		got.Inputs[0].Name = "changed"
		if tg.DriverOptions().Triton.Inputs[0].Name == "changed" {
			t.Errorf("%s: DriverOptions shares its input list", tg.Name)
		}
	}
	vllm, _ := probe.TritonPreset(probe.PresetVLLMBackend)
	if in := cfg.Targets[1].DriverOptions().Triton.Inputs; len(in) != len(vllm)+1 || in[len(in)-1].Name != "top_k" {
		t.Errorf("vllm_backend preset plus top_k: %+v", in)
	}
	if _, err := (&Triton{Preset: "trtllm"}).Options(); err == nil {
		t.Error("unknown preset: no error")
	}
}
