package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/llm-prober/llm-prober/internal/nvmltest"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

func TestServeGPUsEnabledWithoutNVMLFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cfgPath := testutil.WriteConfig(t, goodConfig+"gpus: {enabled: true, library: "+missing+"}\n", map[string]string{"key": "sk-x\n"})
	logs := &testutil.SyncBuffer{}
	empty := ""
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := serve(ctx, serveOptions{
		configFile:      cfgPath,
		webFlags:        &web.FlagConfig{WebListenAddresses: &[]string{"127.0.0.1:0"}, WebSystemdSocket: new(false), WebConfigFile: &empty},
		shutdownTimeout: time.Second,
		logger:          promslog.New(&promslog.Config{Writer: logs}),
		stderr:          logs,
		reloadSignals:   make(chan os.Signal),
	})
	if code != 1 {
		t.Errorf("serve = %d, want 1", code)
	}
	if !strings.Contains(logs.String(), "llm-prober: gpus.enabled is true but NVML cannot be used: loading ") {
		t.Errorf("no clear startup error:\n%s", logs)
	}
}

func TestServeGPUsAutoWithoutNVMLIsQuiet(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	td := startDaemon(t, goodConfig+"gpus: {enabled: auto, library: "+missing+"}\n")
	_, _, body := get(t, "GET", td.url+"/metrics")
	if strings.Contains(body, "llm_gpu_") || strings.Contains(body, `collector="gpu"`) {
		t.Error("GPU series without NVML")
	}
	if n := strings.Count(td.logs.String(), "NVML not available"); n != 1 {
		t.Errorf("NVML absence logged %d times, want once:\n%s", n, td.logs)
	}
}

func TestServeGPUMetricsFromStub(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(2, nil))
	td := startDaemon(t, goodConfig+"gpus: {enabled: true, library: "+stub.Path+"}\n")
	if v := metricValue(t, td, `llm_gpu_power_watts{gpu="1",name="NVIDIA H100 80GB HBM3",uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-000000000001"}`); v != "312.5" {
		t.Errorf("power = %q, want 312.5", v)
	}
	if v := metricValue(t, td, `llm_prober_collector_success{collector="gpu"}`); v != "1" {
		t.Errorf("collector success = %q", v)
	}
	// Reloading with GPUs off drops the series.
	testutil.WriteFile(t, td.cfgPath, goodConfig+"gpus: {enabled: false}\n")
	if code, _, body := get(t, "POST", td.url+"/-/reload"); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	_, _, body := get(t, "GET", td.url+"/metrics")
	if strings.Contains(body, "llm_gpu_") {
		t.Error("GPU series after gpus.enabled: false")
	}
}

// TestReloadToGPUsEnabledWithoutNVMLFails: a reload to gpus.enabled: true
// where NVML cannot be loaded is a failed reload: the status and the
// reload gauge say so, and the running configuration (GPU metrics from
// the library it loaded included) stays.
func TestReloadToGPUsEnabledWithoutNVMLFails(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(1, nil))
	td := startDaemon(t, goodConfig+"gpus: {enabled: auto, library: "+stub.Path+"}\n")
	power := `llm_gpu_power_watts{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-000000000000"}`
	if v := metricValue(t, td, power); v == "" {
		t.Fatal("no GPU metrics from the stub")
	}
	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	testutil.WriteFile(t, td.cfgPath, strings.Replace(goodConfig, "name: first", "name: changed", 1)+"gpus: {enabled: true, library: "+missing+"}\n")
	status, _, body := get(t, "POST", td.url+"/-/reload")
	if status != 500 || !strings.Contains(body, "gpus.enabled is true but NVML cannot be used") {
		t.Errorf("reload: %d %s, want 500 saying NVML cannot be used", status, body)
	}
	if v := metricValue(t, td, "llm_prober_config_last_reload_successful"); v != "0" {
		t.Errorf("llm_prober_config_last_reload_successful = %s, want 0", v)
	}
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") || !strings.Contains(cfg, "enabled: auto") {
		t.Errorf("the running config was not kept:\n%s", cfg)
	}
	if v := metricValue(t, td, power); v == "" {
		t.Error("GPU metrics gone after the failed reload")
	}
}
