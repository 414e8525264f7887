//go:build cgo && !nonvml

package collector

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/llm-prober/llm-prober/internal/nvmltest"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

type gpuFixture struct {
	stub *nvmltest.Stub
	c    *GPUCollector
	reg  *prometheus.Registry
	logs *testutil.SyncBuffer
}

// newGPUFixture builds a stub with the given values, loads it through
// go-nvml and registers the collector on a pedantic registry.
func newGPUFixture(t *testing.T, kv map[string]string, omit ...string) *gpuFixture {
	t.Helper()
	f := &gpuFixture{stub: nvmltest.Build(t, omit...), logs: &testutil.SyncBuffer{}}
	f.stub.Set(t, kv)
	f.c = NewGPUCollector(GPUOptions{Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(f.c.Close)
	if err := f.c.Apply(GPUSettings{Mode: GPUOn, Library: f.stub.Path}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	f.reg = prometheus.NewPedanticRegistry()
	f.reg.MustRegister(f.c)
	return f
}

func (f *gpuFixture) compare(t *testing.T, want string, names ...string) {
	t.Helper()
	if err := promtestutil.GatherAndCompare(f.reg, strings.NewReader(sortLabels(t, want)), names...); err != nil {
		t.Error(err)
	}
}

// sortLabels rewrites expected exposition with each sample's labels in
// name order, as client_golang gathers them, so tests can write the GPU's
// labels first and the metric's own after.
func sortLabels(t *testing.T, text string) string {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("expected exposition: %v", err)
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(mfs)) {
		for _, m := range mfs[name].GetMetric() {
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return cmp.Compare(a.GetName(), b.GetName()) })
		}
		if _, err := expfmt.MetricFamilyToText(&b, mfs[name]); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// gpuHelp is the exposition header of every llm_gpu_* metric, so tests list
// only samples.
func gpuHelp(names ...string) string {
	c := NewGPUCollector(GPUOptions{})
	ch := make(chan *prometheus.Desc, 32)
	c.Describe(ch)
	close(ch)
	var b strings.Builder
	for d := range ch {
		s := d.String()
		for _, n := range names {
			if strings.Contains(s, `fqName: "`+n+`"`) {
				help := s[strings.Index(s, `help: "`)+7:]
				help = help[:strings.Index(help, `", `)]
				typ := "gauge"
				if strings.HasSuffix(n, "_total") {
					typ = "counter"
				}
				fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", n, help, n, typ)
			}
		}
	}
	return b.String()
}

var allGPUMetrics = []string{
	"llm_gpu_info", "llm_gpu_utilization_ratio", "llm_gpu_memory_bandwidth_utilization_ratio",
	"llm_gpu_memory_used_bytes", "llm_gpu_memory_total_bytes", "llm_gpu_power_watts",
	"llm_gpu_power_limit_watts", "llm_gpu_energy_joules_total", "llm_gpu_temperature_celsius",
	"llm_gpu_sm_clock_hertz", "llm_gpu_clock_throttle_reason", "llm_prober_collector_success",
}

func throttleSamples(gpu, uuid, name string, bits uint64) string {
	var b strings.Builder
	for _, tr := range throttleReasons() {
		fmt.Fprintf(&b, "llm_gpu_clock_throttle_reason{gpu=%q,name=%q,reason=%q,uuid=%q} %d\n", gpu, name, tr.reason, uuid, btoi(bits&tr.bit != 0))
	}
	fmt.Fprintf(&b, "llm_gpu_clock_throttle_reason{gpu=%q,name=%q,reason=\"other\",uuid=%q} %d\n", gpu, name, uuid, btoi(bits&^0x1ff != 0))
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

const (
	h100  = "NVIDIA H100 80GB HBM3"
	uuid0 = "GPU-aaaaaaaa-bbbb-cccc-dddd-000000000000"
	uuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-000000000001"
)

func TestGPUValuesAndUnits(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, map[string]string{
		"driver":           "550.54.15",
		"dev1.name":        "NVIDIA L4",
		"dev1.util.gpu":    "100",
		"dev1.util.mem":    "3",
		"dev1.mem.total":   "24152899584",
		"dev1.mem.used":    "1048576",
		"dev1.power":       "72123",
		"dev1.power_limit": "72000",
		"dev1.energy":      "18446744073709",
		"dev1.temp":        "81",
		"dev1.clock.sm":    "2040",
		"dev1.reasons":     "0x10044", // sw_power_cap | hw_thermal_slowdown | an unknown bit
		"dev1.cc.minor":    "9",
		"dev1.cc.major":    "8",
	}))
	want := gpuHelp(allGPUMetrics...) // headers first; GatherAndCompare reorders
	want += `
llm_gpu_info{compute_capability="9.0",cuda_driver_version="12.4",driver_version="550.54.15",gpu="0",mig_mode="disabled",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 1
llm_gpu_info{compute_capability="8.9",cuda_driver_version="12.4",driver_version="550.54.15",gpu="1",mig_mode="disabled",name="NVIDIA L4",uuid="` + uuid1 + `"} 1
llm_gpu_utilization_ratio{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 0.87
llm_gpu_utilization_ratio{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 1
llm_gpu_memory_bandwidth_utilization_ratio{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 0.42
llm_gpu_memory_bandwidth_utilization_ratio{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 0.03
llm_gpu_memory_used_bytes{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 6e+10
llm_gpu_memory_used_bytes{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 1.048576e+06
llm_gpu_memory_total_bytes{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 8.5520809984e+10
llm_gpu_memory_total_bytes{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 2.4152899584e+10
llm_gpu_power_watts{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 312.5
llm_gpu_power_watts{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 72.123
llm_gpu_power_limit_watts{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 700
llm_gpu_power_limit_watts{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 72
llm_gpu_energy_joules_total{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 123456.789
llm_gpu_energy_joules_total{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 1.8446744073709e+10
llm_gpu_temperature_celsius{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 64
llm_gpu_temperature_celsius{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 81
llm_gpu_sm_clock_hertz{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 1.98e+09
llm_gpu_sm_clock_hertz{gpu="1",name="NVIDIA L4",uuid="` + uuid1 + `"} 2.04e+09
` + throttleSamples("0", uuid0, h100, 0) + throttleSamples("1", uuid1, "NVIDIA L4", 0x10044) + `
llm_prober_collector_success{collector="gpu"} 1
`
	f.compare(t, want, allGPUMetrics...)

	problems, err := promtestutil.GatherAndLint(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if n, err := promtestutil.GatherAndCount(f.reg, "llm_prober_collector_duration_seconds"); err != nil || n != 1 {
		t.Errorf("collector duration series = %d, %v", n, err)
	}
}

func TestGPUNotSupportedDropsOneMetric(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, map[string]string{"dev0.power.ret": "3"}))
	for range 3 {
		if n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_power_watts"); n != 1 {
			t.Errorf("power series = %d, want 1 (device 1 only)", n)
		}
	}
	f.compare(t, gpuHelp("llm_gpu_power_watts")+`
llm_gpu_power_watts{gpu="1",name="NVIDIA H100 80GB HBM3",uuid="`+uuid1+`"} 312.5
`, "llm_gpu_power_watts")
	// Everything else about device 0 is still there.
	for _, name := range []string{"llm_gpu_info", "llm_gpu_utilization_ratio", "llm_gpu_memory_used_bytes",
		"llm_gpu_power_limit_watts", "llm_gpu_energy_joules_total", "llm_gpu_temperature_celsius", "llm_gpu_sm_clock_hertz"} {
		if n, _ := promtestutil.GatherAndCount(f.reg, name); n != 2 {
			t.Errorf("%s series = %d, want 2", name, n)
		}
	}
	f.compare(t, gpuHelp("llm_prober_collector_success")+`llm_prober_collector_success{collector="gpu"} 1
`, "llm_prober_collector_success")
	if n := strings.Count(f.logs.String(), "not available on this device"); n != 1 {
		t.Errorf("NOT_SUPPORTED logged %d times over several scrapes, want once:\n%s", n, f.logs)
	}
}

// A fault (not "unsupported") also drops only its metric, but marks the
// collection failed.
func TestGPUFaultMarksCollectionFailed(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, map[string]string{"dev1.temp.ret": "15"}))
	if n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_temperature_celsius"); n != 1 {
		t.Errorf("temperature series = %d, want 1", n)
	}
	if n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_power_watts"); n != 2 {
		t.Errorf("power series = %d, want 2", n)
	}
	f.compare(t, gpuHelp("llm_prober_collector_success")+`llm_prober_collector_success{collector="gpu"} 0
`, "llm_prober_collector_success")
	if !strings.Contains(f.logs.String(), "GPU is lost") {
		t.Errorf("fault not logged:\n%s", f.logs)
	}
}

func TestGPUInitFailure(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	stub := nvmltest.Build(t)
	stub.Set(t, map[string]string{"init": "9"})
	for _, tc := range []struct {
		name, library string
		wantErr       string
	}{
		{"no library", missing, "cannot open shared object file"},
		{"driver not loaded", stub.Path, "Driver Not Loaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			c := NewGPUCollector(GPUOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			defer c.Close()
			err := c.Apply(GPUSettings{Mode: GPUOn, Library: tc.library})
			if err == nil || !strings.Contains(err.Error(), "gpus.enabled is true") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("enabled: true: Apply = %v, want an error mentioning %q", err, tc.wantErr)
			}
			if c.Err() == nil {
				t.Error("Err() = nil after a failed Apply")
			}

			c = NewGPUCollector(GPUOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			defer c.Close()
			if err := c.Apply(GPUSettings{Mode: GPUAuto, Library: tc.library}); err != nil {
				t.Fatalf("enabled: auto: Apply = %v, want nil", err)
			}
			// Reloads that leave gpus alone stay quiet.
			if err := c.Apply(GPUSettings{Mode: GPUAuto, Library: tc.library}); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "level=INFO") {
				t.Errorf("auto logged %d lines, want one Info line:\n%s", n, logs)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
				t.Errorf("without NVML: gathered %d families (%v), want none", len(mfs), err)
			}
		})
	}
}

func TestGPUDisabledNeverLoads(t *testing.T) {
	opened := 0
	c := NewGPUCollector(GPUOptions{NVML: NVMLOptions{Open: func(string) nvml.Interface { opened++; return nvml.New() }}})
	defer c.Close()
	if err := c.Apply(GPUSettings{Mode: GPUOff}); err != nil {
		t.Fatal(err)
	}
	if opened != 0 {
		t.Errorf("enabled: false opened NVML %d times", opened)
	}
}

func TestGPUMissingOptionalSymbols(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(1, map[string]string{"dev0.reasons": "0x20"}),
		"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTotalEnergyConsumption",
		"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetCurrentClocksEventReasons",
		"nvmlDeviceGetTemperatureV")
	lbl := `{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"}`
	// v1 memory: used includes the reserved 520809984 bytes.
	f.compare(t, gpuHelp("llm_gpu_memory_used_bytes", "llm_gpu_temperature_celsius", "llm_prober_collector_success")+`
llm_gpu_memory_used_bytes`+lbl+` 6.0520809984e+10
llm_gpu_temperature_celsius`+lbl+` 64
llm_prober_collector_success{collector="gpu"} 1
`, "llm_gpu_memory_used_bytes", "llm_gpu_temperature_celsius", "llm_prober_collector_success")
	// Throttle reasons through the pre-12.2 name.
	f.compare(t, gpuHelp("llm_gpu_clock_throttle_reason")+throttleSamples("0", uuid0, h100, 0x20), "llm_gpu_clock_throttle_reason")
	for _, name := range []string{"llm_gpu_energy_joules_total", "llm_gpu_power_limit_watts"} {
		if n, _ := promtestutil.GatherAndCount(f.reg, name); n != 0 {
			t.Errorf("%s present without its symbol", name)
		}
	}
}

func TestGPUTemperatureFallsBackToV(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(1, nil), "nvmlDeviceGetTemperature")
	f.compare(t, gpuHelp("llm_gpu_temperature_celsius")+`
llm_gpu_temperature_celsius{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="`+uuid0+`"} 64
`, "llm_gpu_temperature_celsius")
}

func TestGPUDeviceCountChanges(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, nil))
	count := func() int {
		n, err := promtestutil.GatherAndCount(f.reg, "llm_gpu_info")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("info series = %d, want 2", n)
	}
	f.stub.Set(t, nvmltest.Devices(1, nil))
	if n := count(); n != 1 {
		t.Errorf("after a GPU went away: %d series, want 1", n)
	}
	f.stub.Set(t, nvmltest.Devices(3, map[string]string{"dev2.power": "100000"}))
	if n := count(); n != 3 {
		t.Errorf("after GPUs appeared: %d series, want 3", n)
	}
	f.compare(t, gpuHelp("llm_gpu_power_watts")+`
llm_gpu_power_watts{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="`+uuid0+`"} 312.5
llm_gpu_power_watts{gpu="1",name="NVIDIA H100 80GB HBM3",uuid="`+uuid1+`"} 312.5
llm_gpu_power_watts{gpu="2",name="NVIDIA H100 80GB HBM3",uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-000000000002"} 100
`, "llm_gpu_power_watts")
	f.stub.Set(t, map[string]string{"count.ret": "999"})
	if n := count(); n != 0 {
		t.Errorf("count failing: %d series, want 0", n)
	}
	f.compare(t, gpuHelp("llm_prober_collector_success")+`llm_prober_collector_success{collector="gpu"} 0
`, "llm_prober_collector_success")
}

func TestGPUDevicesFilter(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(3, nil))
	if err := f.c.Apply(GPUSettings{Mode: GPUOn, Library: f.stub.Path, Devices: []int{2, 0, 7}}); err != nil {
		t.Fatal(err)
	}
	f.compare(t, gpuHelp("llm_gpu_temperature_celsius")+`
llm_gpu_temperature_celsius{gpu="0",name="NVIDIA H100 80GB HBM3",uuid="`+uuid0+`"} 64
llm_gpu_temperature_celsius{gpu="2",name="NVIDIA H100 80GB HBM3",uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-000000000002"} 64
`, "llm_gpu_temperature_celsius")
	promtestutil.GatherAndCount(f.reg)
	if n := strings.Count(f.logs.String(), "does not report"); n != 1 {
		t.Errorf("absent index 7 logged %d times, want once:\n%s", n, f.logs)
	}
	// Dropping the filter on reload brings every device back without
	// re-initialising NVML.
	if err := f.c.Apply(GPUSettings{Mode: GPUOn, Library: f.stub.Path}); err != nil {
		t.Fatal(err)
	}
	if n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_info"); n != 3 {
		t.Errorf("info series = %d, want 3", n)
	}
	if n := strings.Count(f.logs.String(), "NVML loaded"); n != 1 {
		t.Errorf("NVML initialised %d times, want once", n)
	}
}

func TestGPUReloadDisablesAndReenables(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(1, nil))
	if err := f.c.Apply(GPUSettings{Mode: GPUOff, Library: f.stub.Path}); err != nil {
		t.Fatal(err)
	}
	if mfs, _ := f.reg.Gather(); len(mfs) != 0 {
		t.Errorf("disabled: %d families, want none", len(mfs))
	}
	if err := f.c.Apply(GPUSettings{Mode: GPUAuto, Library: f.stub.Path}); err != nil {
		t.Fatal(err)
	}
	if n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_info"); n != 1 {
		t.Errorf("re-enabled: %d info series, want 1", n)
	}
}

// Many scrapes, value changes, device-filter reloads and a library reload at
// once; run with -race.
func TestGPUConcurrentScrapes(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(4, nil))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 30 {
				if _, err := f.reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 30 {
			f.stub.Set(t, nvmltest.Devices(1+i%4, nil))
			devices := []int{i % 4}
			if i%3 == 0 {
				devices = nil
			}
			if err := f.c.Apply(GPUSettings{Mode: GPUOn, Library: f.stub.Path, Devices: devices}); err != nil {
				t.Error(err)
			}
		}
		_ = f.c.Apply(GPUSettings{Mode: GPUOff})
		_ = f.c.Apply(GPUSettings{Mode: GPUOn, Library: f.stub.Path})
	})
	wg.Wait()
}

// A hung driver costs a scrape the timeout, not forever, and scrapes that
// arrive meanwhile join the one collection instead of piling up goroutines.
func TestGPUCollectionIsTimeBound(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(1, map[string]string{"dev0.slow_ms": "600"}))
	logs := &testutil.SyncBuffer{}
	c := NewGPUCollector(GPUOptions{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer c.Close()
	if err := c.Apply(GPUSettings{Mode: GPUOn, Library: stub.Path}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for range 3 {
		start := time.Now()
		if err := promtestutil.GatherAndCompare(reg, strings.NewReader(gpuHelp("llm_prober_collector_success")+
			`llm_prober_collector_success{collector="gpu"} 0
`), "llm_prober_collector_success"); err != nil {
			t.Error(err)
		}
		if el := time.Since(start); el > 300*time.Millisecond {
			t.Errorf("a scrape against a hung driver took %v", el)
		}
	}
	if n := strings.Count(logs.String(), "timed out"); n != 1 {
		t.Errorf("timeout logged %d times for one hung collection, want once:\n%s", n, logs)
	}
	// Once the driver answers again, so do scrapes.
	stub.Set(t, nvmltest.Devices(1, nil))
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := promtestutil.GatherAndCount(reg, "llm_gpu_info")
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("scrapes did not recover after the driver did")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkCollect8Devices(b *testing.B) {
	stub := nvmltest.Build(b)
	stub.Set(b, nvmltest.Devices(8, nil))
	c := NewGPUCollector(GPUOptions{})
	defer c.Close()
	if err := c.Apply(GPUSettings{Mode: GPUOn, Library: stub.Path}); err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/collect")
}

func TestGPUSnapshot(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, nil))
	if s := f.c.Snapshot(); !s.Loaded || s.Enabled != "true" || !s.CollectedAt.IsZero() {
		t.Fatalf("before a collection: %+v", s)
	}
	f.c.Refresh()
	s := f.c.Snapshot()
	if !s.OK || len(s.Devices) != 2 || s.CollectedAt.IsZero() {
		t.Fatalf("snapshot %+v", s)
	}
	d := s.Devices[1]
	if d.Index != 1 || d.Name != h100 || d.UUID != uuid1 || d.Utilization != 0.87 || d.MemoryUsed != 60000000000 ||
		d.MemoryTotal != 85520809984 || d.Temperature != 64 || d.Power != 312.5 || d.PowerLimit != 700 ||
		!d.HasUtilization || !d.HasMemory || !d.HasTemperature || !d.HasPower || !d.HasPowerLim {
		t.Errorf("device 1: %+v", d)
	}
	if err := f.c.Apply(GPUSettings{Mode: GPUOff}); err != nil {
		t.Fatal(err)
	}
	if s := f.c.Snapshot(); s.Loaded || s.Enabled != "false" || len(s.Devices) != 0 {
		t.Errorf("after disabling: %+v", s)
	}
}
