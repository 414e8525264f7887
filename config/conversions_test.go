package config

import (
	"slices"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/collector"
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
