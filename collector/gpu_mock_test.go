//go:build cgo && !nonvml

package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// mockGPU is one go-nvml mock device with the getters every test needs;
// tests set the rest. Methods left nil panic when called, which the
// collector must turn into a counted rejection.
func mockGPU(uuid string) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA A100-SXM4-80GB", nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 80 << 30, Used: 70 << 30, Free: 10 << 30}, nvml.SUCCESS
		},
	}
}

// mockLib is a go-nvml mock library over devices, exporting exactly the
// symbols named.
func mockLib(symbols []string, devices ...*mock.Device) *mock.Interface {
	has := map[string]bool{}
	for _, s := range symbols {
		has[s] = true
	}
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if has[s] {
					return nil
				}
				return errors.New("undefined symbol: " + s)
			}}
		},
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], nvml.SUCCESS
		},
		SystemGetProcessNameFunc: func(pid int) (string, nvml.Return) {
			return fmt.Sprintf("/opt/bin/worker-%d", pid), nvml.SUCCESS
		},
	}
}

func newMockCollector(t *testing.T, lib nvml.Interface) (*GPUCollector, *prometheus.Registry, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	c := NewGPUCollector(GPUOptions{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		NVML:   NVMLOptions{Open: func(string) nvml.Interface { return lib }},
	})
	t.Cleanup(c.Close)
	if err := c.Apply(GPUSettings{Mode: GPUOn}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return c, reg, logs
}

const uuidA = "GPU-a100a100-0000-0000-0000-000000000000"

// Only the ten processes holding the most memory are exported; one whose
// amount the driver cannot tell counts as running but has no series.
func TestGPUMockProcessesTopN(t *testing.T) {
	dev := mockGPU(uuidA)
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		var ps []nvml.ProcessInfo
		for i := range 15 {
			ps = append(ps, nvml.ProcessInfo{Pid: uint32(100 + i), UsedGpuMemory: uint64(i+1) << 30})
		}
		ps = append(ps, nvml.ProcessInfo{Pid: 999, UsedGpuMemory: ^uint64(0)})
		return ps, nvml.SUCCESS
	}
	_, reg, _ := newMockCollector(t, mockLib([]string{"nvmlDeviceGetUUID", "nvmlDeviceGetName",
		"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlSystemGetProcessName"}, dev))
	var want strings.Builder
	want.WriteString(gpuHelp("llm_gpu_processes", "llm_gpu_process_memory_used_bytes"))
	fmt.Fprintf(&want, "llm_gpu_processes{gpu=\"0\",name=\"NVIDIA A100-SXM4-80GB\",uuid=%q} 16\n", uuidA)
	for i := 14; i >= 5; i-- {
		fmt.Fprintf(&want, "llm_gpu_process_memory_used_bytes{gpu=\"0\",name=\"NVIDIA A100-SXM4-80GB\",pid=\"%d\",process=\"worker-%d\",uuid=%q} %d\n",
			100+i, 100+i, uuidA, uint64(i+1)<<30)
	}
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want.String()), "llm_gpu_processes", "llm_gpu_process_memory_used_bytes"); err != nil {
		t.Error(err)
	}
}

// A driver exporting only the core API: nothing optional is called (a
// mock method left nil would panic and be counted), and the device still
// has its identity and memory.
func TestGPUMockOnlyCoreSymbols(t *testing.T) {
	dev := mockGPU(uuidA)
	c, reg, logs := newMockCollector(t, mockLib([]string{"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo_v2"}, dev))
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(gpuHelp("llm_gpu_info", "llm_gpu_memory_used_bytes", "llm_prober_collector_success")+`
llm_gpu_info{compute_capability="",cuda_driver_version="",driver_version="",gpu="0",mig_mode="",name="NVIDIA A100-SXM4-80GB",uuid="`+uuidA+`"} 1
llm_gpu_memory_used_bytes{gpu="0",name="NVIDIA A100-SXM4-80GB",uuid="`+uuidA+`"} 7.516192768e+10
llm_prober_collector_success{collector="gpu"} 1
`), "llm_gpu_info", "llm_gpu_memory_used_bytes", "llm_prober_collector_success"); err != nil {
		t.Error(err)
	}
	c.loggedMu.Lock()
	rejected := len(c.rejected)
	c.loggedMu.Unlock()
	if rejected != 0 {
		t.Errorf("a function the driver lacks was called: rejections %v\n%s", c.rejected, logs)
	}
	if !strings.Contains(logs.String(), "function=nvmlDeviceGetTotalEccErrors") {
		t.Errorf("a missing function is not logged at Debug:\n%s", logs)
	}
}

// A panic inside go-nvml (here: a mock method nobody set) costs only its
// own reading, counted, and the collection goes on.
func TestGPUMockPanicIsOneRejectedReading(t *testing.T) {
	dev := mockGPU(uuidA)
	dev.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }
	_, reg, _ := newMockCollector(t, mockLib([]string{"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo_v2",
		"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth"}, dev))
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(gpuHelp("llm_gpu_memory_used_bytes", "llm_prober_collector_success")+`
# HELP llm_gpu_rejected_readings_total Readings NVML returned that the prober rejected as implausible (out of range, a list longer than its buffer, a call that panicked) instead of exporting, by reading.
# TYPE llm_gpu_rejected_readings_total counter
llm_gpu_rejected_readings_total{reading="pcie"} 1
llm_gpu_memory_used_bytes{gpu="0",name="NVIDIA A100-SXM4-80GB",uuid="`+uuidA+`"} 7.516192768e+10
llm_prober_collector_success{collector="gpu"} 1
`), "llm_gpu_rejected_readings_total", "llm_gpu_memory_used_bytes", "llm_prober_collector_success"); err != nil {
		t.Error(err)
	}
}

// XID events arrive through the event set in the background; a scrape
// reads the counts without waiting on it.
func TestGPUMockXID(t *testing.T) {
	dev := mockGPU(uuidA)
	dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS }
	dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	events := make(chan nvml.EventData, 4)
	events <- nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	events <- nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			select {
			case ev := <-events:
				return ev, nvml.SUCCESS
			default:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	lib := mockLib([]string{"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlEventSetCreate", "nvmlEventSetFree",
		"nvmlDeviceGetSupportedEventTypes", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2"}, dev)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	_, reg, _ := newMockCollector(t, lib)
	want := gpuHelp("llm_gpu_xid_errors_total") + `llm_gpu_xid_errors_total{gpu="0",name="NVIDIA A100-SXM4-80GB",uuid="` + uuidA + `",xid="79"} 2
`
	waitFor(t, "two XID 79 events", func() bool {
		return promtestutil.GatherAndCompare(reg, strings.NewReader(want), "llm_gpu_xid_errors_total") == nil
	})
}

// A reload that turns GPUs off while a collection is inside the driver
// waits for it before shutting NVML down: go-nvml's Shutdown dlcloses the
// library, and unmapping it under a running call would crash the process.
func TestGPUMockShutdownWaitsForCollection(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	dev := mockGPU(uuidA)
	dev.GetNameFunc = func() (string, nvml.Return) {
		close(entered)
		<-release
		return "NVIDIA A100-SXM4-80GB", nvml.SUCCESS
	}
	lib := mockLib([]string{"nvmlDeviceGetUUID", "nvmlDeviceGetName"}, dev)
	shutdown := make(chan struct{})
	lib.ShutdownFunc = func() nvml.Return { close(shutdown); return nvml.SUCCESS }
	c, reg, _ := newMockCollector(t, lib)
	gathered := make(chan struct{})
	go func() { defer close(gathered); _, _ = reg.Gather() }()
	<-entered
	applied := make(chan error, 1)
	go func() { applied <- c.Apply(GPUSettings{Mode: GPUOff}) }()
	select {
	case <-shutdown:
		t.Fatal("NVML shut down while a collection was inside it")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-gathered
	select {
	case <-shutdown:
	case <-time.After(5 * time.Second):
		t.Fatal("NVML never shut down after the collection ended")
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
}
