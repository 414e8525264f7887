//go:build cgo && !nonvml

package collector

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/prometheus/client_golang/prometheus"
)

// FuzzGPUReadings feeds arbitrary readings, and lists longer or shorter
// than they claim, through go-nvml's mock: a collection never panics out
// of the collector, and nothing outside what a GPU can produce is exported
// as a measurement.
func FuzzGPUReadings(f *testing.F) {
	f.Add(uint32(87), uint32(42), uint64(60e9), uint64(85e9), uint32(312500), uint32(64), uint32(1980), 5, 16, uint16(3), uint64(1<<30), uint32(4242), uint32(1), uint32(7))
	f.Add(uint32(250), uint32(1000), uint64(99e12), uint64(1), uint32(4e9), uint32(4e9), uint32(4e9), -1, 4096, uint16(5000), ^uint64(0), uint32(0), uint32(7), uint32(99))
	// Memory garbage: process amounts are then bounded without the total.
	f.Add(uint32(0), uint32(0), uint64(10), uint64(5), uint32(0), uint32(0), uint32(0), 4, 8, uint16(2), uint64(1e9), uint32(7), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, util, memUtil uint32, used, total uint64, mw, temp, mhz uint32, gen, width int,
		nProcs uint16, procMem uint64, pid, migMode, migCount uint32) {
		dev := &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) { return "GPU-f", nvml.SUCCESS },
			GetNameFunc: func() (string, nvml.Return) { return "fuzz", nvml.SUCCESS },
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: util, Memory: memUtil}, nvml.SUCCESS
			},
			GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
				return nvml.Memory_v2{Used: used, Total: total}, nvml.SUCCESS
			},
			GetPowerUsageFunc:             func() (uint32, nvml.Return) { return mw, nvml.SUCCESS },
			GetTemperatureFunc:            func(nvml.TemperatureSensors) (uint32, nvml.Return) { return temp, nvml.SUCCESS },
			GetClockInfoFunc:              func(nvml.ClockType) (uint32, nvml.Return) { return mhz, nvml.SUCCESS },
			GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return gen, nvml.SUCCESS },
			GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return width, nvml.SUCCESS },
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
				ps := make([]nvml.ProcessInfo, nProcs)
				for i := range ps {
					ps[i] = nvml.ProcessInfo{Pid: pid + uint32(i), UsedGpuMemory: procMem}
				}
				return ps, nvml.SUCCESS
			},
			GetMigModeFunc:           func() (int, int, nvml.Return) { return int(migMode), 0, nvml.SUCCESS },
			GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return int(migCount), nvml.SUCCESS },
			GetMigDeviceHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) {
				return nil, nvml.ERROR_NOT_FOUND
			},
		}
		lib := &mock.Interface{
			InitFunc:     func() nvml.Return { return nvml.SUCCESS },
			ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
			ExtensionsFunc: func() nvml.ExtendedInterface {
				return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
					if s == "nvmlDeviceGetMemoryInfo_v2" || s == "nvmlDeviceGetUtilizationRates" || s == "nvmlDeviceGetPowerUsage" ||
						s == "nvmlDeviceGetTemperature" || s == "nvmlDeviceGetClockInfo" || s == "nvmlDeviceGetCurrPcieLinkGeneration" ||
						s == "nvmlDeviceGetCurrPcieLinkWidth" || s == "nvmlDeviceGetComputeRunningProcesses_v3" ||
						s == "nvmlDeviceGetMigMode" || s == "nvmlDeviceGetMaxMigDeviceCount" || s == "nvmlDeviceGetMigDeviceHandleByIndex" ||
						s == "nvmlDeviceGetUUID" || s == "nvmlDeviceGetName" {
						return nil
					}
					return errors.New("undefined symbol")
				}}
			},
			DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
			DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
		}
		c := NewGPUCollector(GPUOptions{NVML: NVMLOptions{Open: func(string) nvml.Interface { return lib }}})
		defer c.Close()
		if err := c.Apply(GPUSettings{Mode: GPUOn}); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		bounds := map[string][2]float64{
			"llm_gpu_utilization_ratio":                  {0, 1},
			"llm_gpu_memory_bandwidth_utilization_ratio": {0, 1},
			"llm_gpu_power_watts":                        {0, maxPlausibleWatts},
			"llm_gpu_temperature_celsius":                {-50, maxPlausibleCelsius},
			"llm_gpu_sm_clock_hertz":                     {0, maxPlausibleHertz},
			"llm_gpu_pcie_link_generation":               {1, maxPlausiblePCIeGen},
			"llm_gpu_pcie_link_width":                    {1, maxPlausibleLanes},
			"llm_gpu_processes":                          {0, maxPlausibleProcesses},
		}
		procLimit := float64(total)
		if used > total {
			procLimit = maxPlausibleBytes
		}
		bounds["llm_gpu_process_memory_used_bytes"] = [2]float64{0, procLimit}
		series := map[string]int{}
		for _, mf := range mfs {
			series[mf.GetName()] += len(mf.GetMetric())
			b, ok := bounds[mf.GetName()]
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); ok && (v < b[0] || v > b[1]) {
					t.Errorf("%s = %v exported, outside [%v, %v]", mf.GetName(), v, b[0], b[1])
				}
			}
		}
		if series["llm_gpu_process_memory_used_bytes"] > gpuTopProcesses {
			t.Errorf("%d process series, more than %d", series["llm_gpu_process_memory_used_bytes"], gpuTopProcesses)
		}
		if used > total && series["llm_gpu_memory_used_bytes"] != 0 {
			t.Errorf("used %d > total %d exported", used, total)
		}
		if series["llm_gpu_info"] != 1 {
			t.Errorf("%d info series", series["llm_gpu_info"])
		}
	})
}
