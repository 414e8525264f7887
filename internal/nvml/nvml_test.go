package nvml_test

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/llm-prober/llm-prober/internal/nvml"
	"github.com/llm-prober/llm-prober/internal/nvml/nvmltest"
)

func mustInit(t *testing.T, l *nvml.Library) {
	t.Helper()
	if ret := l.Init(); ret != nvml.SUCCESS {
		t.Fatalf("Init: %v (%v)", ret, l.LoadError())
	}
	t.Cleanup(func() { l.Shutdown() })
}

func TestValuesThroughTheABI(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(2, map[string]string{
		"driver":       "550.54.15",
		"dev1.reasons": "0x44",
	}))
	l := nvml.New(nvml.WithLibraryPath(stub.Path))
	mustInit(t, l)

	if v, ret := l.SystemGetDriverVersion(); ret != nvml.SUCCESS || v != "550.54.15" {
		t.Errorf("driver = %q, %v", v, ret)
	}
	n, ret := l.DeviceGetCount()
	if ret != nvml.SUCCESS || n != 2 {
		t.Fatalf("count = %d, %v", n, ret)
	}
	d, ret := l.DeviceGetHandleByIndex(1)
	if ret != nvml.SUCCESS {
		t.Fatalf("handle: %v", ret)
	}
	check := func(what string, got, want any, ret nvml.Return) {
		t.Helper()
		if ret != nvml.SUCCESS || got != want {
			t.Errorf("%s = %v (%v), want %v", what, got, ret, want)
		}
	}
	name, ret := d.GetName()
	check("name", name, "NVIDIA H100 80GB HBM3", ret)
	uuid, ret := d.GetUUID()
	check("uuid", uuid, "GPU-aaaaaaaa-bbbb-cccc-dddd-000000000001", ret)
	u, ret := d.GetUtilizationRates()
	check("utilization", u, nvml.Utilization{Gpu: 87, Memory: 42}, ret)
	m1, ret := d.GetMemoryInfo()
	check("memory v1", m1, nvml.Memory{Total: 85520809984, Free: 25000000000, Used: 60520809984}, ret)
	m2, ret := d.GetMemoryInfo_v2()
	check("memory v2", m2, nvml.Memory_v2{Version: 0x02000028, Total: 85520809984, Reserved: 520809984, Free: 25000000000, Used: 60000000000}, ret)
	p, ret := d.GetPowerUsage()
	check("power", p, uint32(312500), ret)
	pl, ret := d.GetEnforcedPowerLimit()
	check("power limit", pl, uint32(700000), ret)
	e, ret := d.GetTotalEnergyConsumption()
	check("energy", e, uint64(123456789), ret)
	temp, ret := d.GetTemperature(nvml.TEMPERATURE_GPU)
	check("temperature", temp, uint32(64), ret)
	tv, ret := d.GetTemperatureV(nvml.TEMPERATURE_GPU)
	check("temperatureV", tv, int32(64), ret)
	c, ret := d.GetClockInfo(nvml.CLOCK_SM)
	check("sm clock", c, uint32(1980), ret)
	r, ret := d.GetCurrentClocksEventReasons()
	check("reasons", r, uint64(0x44), ret)
	r, ret = d.GetCurrentClocksThrottleReasons()
	check("throttle reasons", r, uint64(0x44), ret)

	if err := l.LookupSymbol("nvmlDeviceGetMemoryInfo_v2"); err != nil {
		t.Errorf("LookupSymbol: %v", err)
	}
	if err := l.LookupSymbol("nvmlNoSuchThing"); err == nil {
		t.Error("LookupSymbol of a missing symbol succeeded")
	}
	if s := l.ErrorString(nvml.ERROR_NOT_SUPPORTED); s != "Not Supported" {
		t.Errorf("ErrorString = %q, want the library's text", s)
	}
}

func TestReturnCodesPassThrough(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(1, map[string]string{
		"dev0.power.ret":  "3",
		"dev0.energy.ret": "15",
	}))
	l := nvml.New(nvml.WithLibraryPath(stub.Path))
	mustInit(t, l)
	d, _ := l.DeviceGetHandleByIndex(0)
	if v, ret := d.GetPowerUsage(); ret != nvml.ERROR_NOT_SUPPORTED || v != 0 {
		t.Errorf("power = %d, %v; want 0, ERROR_NOT_SUPPORTED", v, ret)
	}
	_, ret := d.GetTotalEnergyConsumption()
	if ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("energy: %v, want ERROR_GPU_IS_LOST", ret)
	}
	var err error = ret
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) || err.Error() != "ERROR_GPU_IS_LOST" {
		t.Errorf("Return as error: %v", err)
	}
	if _, ret := l.DeviceGetHandleByIndex(5); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("handle beyond count: %v", ret)
	}
}

func TestMissingOptionalSymbols(t *testing.T) {
	stub := nvmltest.Build(t,
		"nvmlDeviceGetMemoryInfo_v2",
		"nvmlDeviceGetTotalEnergyConsumption",
		"nvmlDeviceGetTemperatureV",
		"nvmlDeviceGetCurrentClocksEventReasons",
	)
	stub.Set(t, nvmltest.Devices(1, nil))
	l := nvml.New(nvml.WithLibraryPath(stub.Path))
	mustInit(t, l)
	d, _ := l.DeviceGetHandleByIndex(0)
	if _, ret := d.GetMemoryInfo_v2(); ret != nvml.ERROR_FUNCTION_NOT_FOUND {
		t.Errorf("memory v2: %v", ret)
	}
	if _, ret := d.GetTotalEnergyConsumption(); ret != nvml.ERROR_FUNCTION_NOT_FOUND {
		t.Errorf("energy: %v", ret)
	}
	if _, ret := d.GetTemperatureV(nvml.TEMPERATURE_GPU); ret != nvml.ERROR_FUNCTION_NOT_FOUND {
		t.Errorf("temperatureV: %v", ret)
	}
	if _, ret := d.GetCurrentClocksEventReasons(); ret != nvml.ERROR_FUNCTION_NOT_FOUND {
		t.Errorf("event reasons: %v", ret)
	}
	if m, ret := d.GetMemoryInfo(); ret != nvml.SUCCESS || m.Total == 0 {
		t.Errorf("memory v1 = %+v, %v", m, ret)
	}
	if err := l.LookupSymbol("nvmlDeviceGetMemoryInfo_v2"); err == nil {
		t.Error("LookupSymbol found an omitted symbol")
	}
}

func TestLoadFailures(t *testing.T) {
	t.Run("missing file", func(t *testing.T) {
		l := nvml.New(nvml.WithLibraryPath(filepath.Join(t.TempDir(), "libnvidia-ml.so.1")))
		if ret := l.Init(); ret != nvml.ERROR_LIBRARY_NOT_FOUND {
			t.Fatalf("Init: %v", ret)
		}
		if err := l.LoadError(); err == nil || !strings.Contains(err.Error(), "dlopen") {
			t.Errorf("LoadError = %v", err)
		}
	})
	t.Run("not NVML", func(t *testing.T) {
		stub := nvmltest.Build(t, "nvmlInit_v2")
		l := nvml.New(nvml.WithLibraryPath(stub.Path))
		if ret := l.Init(); ret != nvml.ERROR_FUNCTION_NOT_FOUND {
			t.Fatalf("Init: %v", ret)
		}
		if err := l.LoadError(); err == nil || !strings.Contains(err.Error(), "nvmlInit_v2") {
			t.Errorf("LoadError = %v", err)
		}
	})
	t.Run("driver not loaded", func(t *testing.T) {
		stub := nvmltest.Build(t)
		stub.Set(t, map[string]string{"init": "9"})
		l := nvml.New(nvml.WithLibraryPath(stub.Path))
		if ret := l.Init(); ret != nvml.ERROR_DRIVER_NOT_LOADED {
			t.Fatalf("Init: %v", ret)
		}
		if err := l.LoadError(); err != nil {
			t.Errorf("LoadError = %v, want nil: the library itself loaded", err)
		}
	})
}

// An uninitialised or shut-down library answers with errors and non-nil
// devices, never a crash.
func TestUninitialised(t *testing.T) {
	l := nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1"))
	if _, ret := l.DeviceGetCount(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("count: %v", ret)
	}
	d, ret := l.DeviceGetHandleByIndex(0)
	if ret != nvml.ERROR_UNINITIALIZED || d == nil {
		t.Fatalf("handle: %v, %v", d, ret)
	}
	if _, ret := d.GetPowerUsage(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("power on a bad handle: %v", ret)
	}
	if ret := l.Shutdown(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("Shutdown: %v", ret)
	}
	if err := l.LookupSymbol("nvmlInit_v2"); err == nil {
		t.Error("LookupSymbol before Init succeeded")
	}

	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(1, nil))
	l = nvml.New(nvml.WithLibraryPath(stub.Path))
	if ret := l.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	d, _ = l.DeviceGetHandleByIndex(0)
	if ret := l.Shutdown(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := d.GetPowerUsage(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("power after Shutdown: %v", ret)
	}
	// A handle from before a Shutdown/Init cycle stays invalid: the library
	// was unloaded in between.
	if ret := l.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	defer l.Shutdown()
	if _, ret := d.GetPowerUsage(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("power through a stale handle: %v", ret)
	}
}

func TestInitIsCounted(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(1, nil))
	l := nvml.New(nvml.WithLibraryPath(stub.Path))
	for range 2 {
		if ret := l.Init(); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	l.Shutdown()
	if _, ret := l.DeviceGetCount(); ret != nvml.SUCCESS {
		t.Errorf("count after one of two Shutdowns: %v", ret)
	}
	l.Shutdown()
	if _, ret := l.DeviceGetCount(); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("count after the last Shutdown: %v", ret)
	}
}

// Calls and Shutdown race freely; run with -race.
func TestConcurrentCalls(t *testing.T) {
	stub := nvmltest.Build(t)
	stub.Set(t, nvmltest.Devices(4, nil))
	l := nvml.New(nvml.WithLibraryPath(stub.Path))
	if ret := l.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 200 {
				d, ret := l.DeviceGetHandleByIndex(g % 4)
				if ret != nvml.SUCCESS {
					return // shut down under us: fine, as long as nothing crashes
				}
				d.GetPowerUsage()
				d.GetName()
			}
		})
	}
	l.Shutdown()
	wg.Wait()
}
