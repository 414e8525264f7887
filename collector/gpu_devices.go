//go:build cgo && !nonvml

package collector

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/internal/display"
)

// gpuReader reads one device. A getter that fails drops its own metrics
// only; the device and the rest of its metrics stay.
type gpuReader struct {
	l   *nvmlLib
	out []prometheus.Metric
	ok  bool
	// devices are the same readings as plain values, for Snapshot.
	devices []GPUDeviceSnapshot
}

// check handles a getter's result: true to emit. "Cannot" answers
// (NOT_SUPPORTED, a symbol the driver lacks, NO_PERMISSION) are logged once
// at Info and leave the collection successful; faults are logged once per
// code at Warn and mark it failed.
func (r *gpuReader) check(dev, metric string, ret nvml.Return) bool {
	if ret == nvml.SUCCESS {
		return true
	}
	c := r.l.c
	key := dev + "\x00" + metric + "\x00" + strconv.Itoa(int(ret))
	if unsupported(ret) {
		if c.once(key) {
			c.logger.Info("GPU metric not available on this device; leaving it out", "gpu", dev, "metric", metric, "err", ret)
		}
		return false
	}
	r.ok = false
	if c.once(key) {
		c.logger.Warn("Reading a GPU metric failed", "gpu", dev, "metric", metric, "err", ret)
	}
	return false
}

// has reports whether the driver exports symbol; without it the reading is
// skipped (and was logged at Debug when NVML loaded).
func (r *gpuReader) has(symbol string) bool { return r.l.has[symbol] }

// plausible passes v when it lies in [lo, hi]; otherwise the reading is
// counted as rejected and not exported.
func (r *gpuReader) plausible(reading, dev string, v, lo, hi float64) bool {
	if v >= lo && v <= hi {
		return true
	}
	r.l.c.reject(reading, dev, v)
	return false
}

// guard runs one reading, turning a panic inside go-nvml (it slices by the
// count the driver returns) or a mock into a counted rejection of that
// reading alone.
func (r *gpuReader) guard(reading, dev string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			r.l.c.reject(reading, dev, p)
		}
	}()
	f()
}

func (r *gpuReader) emit(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	r.out = append(r.out, prometheus.MustNewConstMetric(d, t, v, lv...))
}

type throttleReason struct {
	bit    uint64
	reason string
}

// throttleReasons maps NVML's clock event bits to label values.
func throttleReasons() [9]throttleReason {
	return [...]throttleReason{
		{nvml.ClocksEventReasonGpuIdle, "gpu_idle"},
		{nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
		{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"},
		{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
		{nvml.ClocksEventReasonSyncBoost, "sync_boost"},
		{nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
		{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
		{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
		{nvml.ClocksEventReasonDisplayClockSetting, "display_clock_setting"},
	}
}

// gpuTopProcesses bounds llm_gpu_process_memory_used_bytes per GPU: a
// shared node can run hundreds of CUDA processes, and the ones holding the
// most memory are the ones that explain a model server's headroom.
const gpuTopProcesses = 10

// Bounds past which a reading is garbage, not a measurement: no GPU draws
// 10 kW, runs at 10 GHz or 250 °C, or has a PCIe link wider than 32 lanes
// or newer than generation 10.
const (
	maxPlausibleWatts   = 10000
	maxPlausibleHertz   = 10e9
	maxPlausibleCelsius = 250
	maxPlausibleLanes   = 32
	maxPlausiblePCIeGen = 10
	// maxPlausibleBytes bounds a memory amount when the GPU's total is
	// unknown: 1 PiB, far beyond any GPU.
	maxPlausibleBytes = 1 << 50
	// maxPlausibleProcesses bounds one GPU's process list.
	maxPlausibleProcesses = 4096
	// maxMIGInstances bounds the MIG slots read per GPU (A100/H100 have 7).
	maxMIGInstances = 16
	// nvmlValueNotAvailable is NVML_VALUE_NOT_AVAILABLE, what
	// usedGpuMemory holds where the driver cannot tell (MIG, some
	// permission setups).
	nvmlValueNotAvailable = ^uint64(0)
)

// collect reads every selected device once. It is the only code that calls
// NVML per scrape, and runs in one goroutine at a time.
func (l *nvmlLib) collect(devices map[int]bool) ([]prometheus.Metric, bool, []GPUDeviceSnapshot) {
	c, lib := l.c, l.lib
	r := &gpuReader{l: l, ok: true}
	sys := systemInfo{}
	if r.has("nvmlSystemGetDriverVersion") {
		var ret nvml.Return
		sys.driver, ret = lib.SystemGetDriverVersion()
		r.check("system", "driver_version", ret)
	}
	r.guard("cuda_driver_version", "system", func() {
		var v int
		var ret nvml.Return
		switch {
		case r.has("nvmlSystemGetCudaDriverVersion_v2"):
			v, ret = lib.SystemGetCudaDriverVersion_v2()
		case r.has("nvmlSystemGetCudaDriverVersion"):
			v, ret = lib.SystemGetCudaDriverVersion()
		default:
			return
		}
		// CUDA encodes 12.4 as 12040.
		if r.check("system", "cuda_driver_version", ret) && r.plausible("cuda_driver_version", "system", float64(v), 1000, 99990) {
			sys.cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
		}
	})
	n, ret := lib.DeviceGetCount()
	if !r.check("system", "device_count", ret) {
		return r.out, false, nil
	}
	for i := range devices {
		if i >= n && c.once("absent\x00"+strconv.Itoa(i)) {
			c.logger.Warn("gpus.devices names a GPU index NVML does not report", "gpu", i, "gpus", n)
		}
	}
	for i := range n {
		if devices != nil && !devices[i] {
			continue
		}
		idx := strconv.Itoa(i)
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if !r.check(idx, "handle", ret) {
			continue
		}
		r.devices = append(r.devices, GPUDeviceSnapshot{Index: i})
		r.guard("device", idx, func() { l.readDevice(r, dev, idx, sys) })
	}
	return r.out, r.ok, r.devices
}

type systemInfo struct{ driver, cuda string }

func (l *nvmlLib) readDevice(r *gpuReader, dev nvml.Device, idx string, sys systemInfo) {
	d := &l.c.d
	// An identity that cannot be read leaves its label empty rather than
	// hiding the device's measurements.
	var uuid, name string
	if r.has("nvmlDeviceGetUUID") {
		var ret nvml.Return
		uuid, ret = dev.GetUUID()
		r.check(idx, "uuid", ret)
	}
	if r.has("nvmlDeviceGetName") {
		var ret nvml.Return
		name, ret = dev.GetName()
		r.check(idx, "name", ret)
	}
	lv := []string{idx, uuid, name}
	snap := &r.devices[len(r.devices)-1]
	snap.UUID, snap.Name = uuid, name

	var cc, migMode string
	r.guard("compute_capability", idx, func() {
		if !r.has("nvmlDeviceGetCudaComputeCapability") {
			return
		}
		major, minor, ret := dev.GetCudaComputeCapability()
		if r.check(idx, "compute_capability", ret) && r.plausible("compute_capability", idx, float64(major), 1, 99) &&
			r.plausible("compute_capability", idx, float64(minor), 0, 99) {
			cc = fmt.Sprintf("%d.%d", major, minor)
		}
	})
	migOn := false
	r.guard("mig_mode", idx, func() {
		if !r.has("nvmlDeviceGetMigMode") {
			return
		}
		// Pre-Ampere GPUs answer NOT_SUPPORTED: MIG is simply off there.
		current, _, ret := dev.GetMigMode()
		if ret == nvml.ERROR_NOT_SUPPORTED || !r.check(idx, "mig_mode", ret) {
			return
		}
		switch current {
		case nvml.DEVICE_MIG_ENABLE:
			migMode, migOn = "enabled", true
		case nvml.DEVICE_MIG_DISABLE:
			migMode = "disabled"
		default:
			l.c.reject("mig_mode", idx, current)
		}
	})
	r.emit(d.info, prometheus.GaugeValue, 1, idx, uuid, name, sys.driver, sys.cuda, cc, migMode)

	r.guard("utilization", idx, func() { l.readUtilization(r, dev, idx, lv, snap) })
	r.guard("memory", idx, func() { l.readMemory(r, dev, idx, lv, snap) })
	r.guard("power", idx, func() { l.readPower(r, dev, idx, lv, snap) })
	r.guard("temperature", idx, func() { l.readTemperature(r, dev, idx, lv, snap) })
	r.guard("sm_clock", idx, func() {
		if !r.has("nvmlDeviceGetClockInfo") {
			return
		}
		if mhz, ret := dev.GetClockInfo(nvml.CLOCK_SM); r.check(idx, "sm_clock", ret) &&
			r.plausible("sm_clock", idx, float64(mhz)*1e6, 0, maxPlausibleHertz) {
			r.emit(d.smClock, prometheus.GaugeValue, float64(mhz)*1e6, lv...)
		}
	})
	r.guard("clock_throttle_reason", idx, func() { l.readClockEvents(r, dev, idx, lv) })
	r.guard("ecc", idx, func() { l.readECC(r, dev, idx, lv) })
	r.guard("remapped_rows", idx, func() { l.readRemaps(r, dev, idx, lv) })
	r.guard("pcie", idx, func() { l.readPCIe(r, dev, idx, lv) })
	r.guard("processes", idx, func() { l.readProcesses(r, dev, idx, lv, snap.HasMemory, snap.MemoryTotal) })
	if migOn {
		r.guard("mig", idx, func() { l.readMIG(r, dev, idx, lv) })
	}
	if l.xid != nil && uuid != "" {
		l.xid.emit(r, uuid, lv)
	}
}

func (l *nvmlLib) readUtilization(r *gpuReader, dev nvml.Device, idx string, lv []string, snap *GPUDeviceSnapshot) {
	if !r.has("nvmlDeviceGetUtilizationRates") {
		return
	}
	u, ret := dev.GetUtilizationRates()
	if !r.check(idx, "utilization", ret) {
		return
	}
	if r.plausible("utilization", idx, float64(u.Gpu), 0, 100) {
		r.emit(l.c.d.util, prometheus.GaugeValue, float64(u.Gpu)/100, lv...)
		snap.Utilization, snap.HasUtilization = float64(u.Gpu)/100, true
	}
	if r.plausible("memory_bandwidth_utilization", idx, float64(u.Memory), 0, 100) {
		r.emit(l.c.d.memBW, prometheus.GaugeValue, float64(u.Memory)/100, lv...)
	}
}

func (l *nvmlLib) readMemory(r *gpuReader, dev nvml.Device, idx string, lv []string, snap *GPUDeviceSnapshot) {
	var used, total uint64
	ret := nvml.ERROR_FUNCTION_NOT_FOUND
	// v2's used excludes driver-reserved memory (as nvidia-smi shows); v1,
	// which every driver has, counts it as used. R510 answered v2 with
	// FUNCTION_NOT_FOUND, newer drivers with ARGUMENT_VERSION_MISMATCH.
	if r.has("nvmlDeviceGetMemoryInfo_v2") {
		var m nvml.Memory_v2
		m, ret = dev.GetMemoryInfo_v2()
		used, total = m.Used, m.Total
	}
	if (ret == nvml.ERROR_FUNCTION_NOT_FOUND || ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH ||
		ret == nvml.ERROR_NOT_SUPPORTED) && r.has("nvmlDeviceGetMemoryInfo") {
		var m nvml.Memory
		m, ret = dev.GetMemoryInfo()
		used, total = m.Used, m.Total
	}
	if !r.check(idx, "memory", ret) {
		return
	}
	if used > total {
		l.c.reject("memory", idx, fmt.Sprintf("used %d > total %d", used, total))
		return
	}
	r.emit(l.c.d.memUsed, prometheus.GaugeValue, float64(used), lv...)
	r.emit(l.c.d.memTotal, prometheus.GaugeValue, float64(total), lv...)
	snap.MemoryUsed, snap.MemoryTotal, snap.HasMemory = float64(used), float64(total), true
}

func (l *nvmlLib) readPower(r *gpuReader, dev nvml.Device, idx string, lv []string, snap *GPUDeviceSnapshot) {
	d := &l.c.d
	if r.has("nvmlDeviceGetPowerUsage") {
		if p, ret := dev.GetPowerUsage(); r.check(idx, "power", ret) &&
			r.plausible("power", idx, float64(p)/1000, 0, maxPlausibleWatts) {
			r.emit(d.power, prometheus.GaugeValue, float64(p)/1000, lv...)
			snap.Power, snap.HasPower = float64(p)/1000, true
		}
	}
	if r.has("nvmlDeviceGetEnforcedPowerLimit") {
		if p, ret := dev.GetEnforcedPowerLimit(); r.check(idx, "power_limit", ret) &&
			r.plausible("power_limit", idx, float64(p)/1000, 0, maxPlausibleWatts) {
			r.emit(d.powerLimit, prometheus.GaugeValue, float64(p)/1000, lv...)
			snap.PowerLimit, snap.HasPowerLim = float64(p)/1000, true
		}
	}
	if r.has("nvmlDeviceGetTotalEnergyConsumption") {
		if e, ret := dev.GetTotalEnergyConsumption(); r.check(idx, "energy", ret) {
			r.emit(d.energy, prometheus.CounterValue, float64(e)/1000, lv...)
		}
	}
}

func (l *nvmlLib) readTemperature(r *gpuReader, dev nvml.Device, idx string, lv []string, snap *GPUDeviceSnapshot) {
	// nvmlDeviceGetTemperature is deprecated in NVML 13 but exported by every
	// driver so far; its successor exists only from 12.8 (R570).
	var temp float64
	ret := nvml.ERROR_FUNCTION_NOT_FOUND
	if r.has("nvmlDeviceGetTemperature") {
		var t uint32
		t, ret = dev.GetTemperature(nvml.TEMPERATURE_GPU)
		temp = float64(t)
	}
	if ret == nvml.ERROR_FUNCTION_NOT_FOUND && r.has("nvmlDeviceGetTemperatureV") {
		var t nvml.Temperature
		t, ret = dev.GetTemperatureV().V1()
		temp = float64(t.Temperature)
	}
	if r.check(idx, "temperature", ret) && r.plausible("temperature", idx, temp, -50, maxPlausibleCelsius) {
		r.emit(l.c.d.temp, prometheus.GaugeValue, temp, lv...)
		snap.Temperature, snap.HasTemperature = temp, true
	}
}

func (l *nvmlLib) readClockEvents(r *gpuReader, dev nvml.Device, idx string, lv []string) {
	// The "event reasons" name arrived with 12.2 (R535); older drivers
	// export the same call and bits as "throttle reasons".
	var bits uint64
	var ret nvml.Return
	switch {
	case r.has("nvmlDeviceGetCurrentClocksEventReasons"):
		bits, ret = dev.GetCurrentClocksEventReasons()
	case r.has("nvmlDeviceGetCurrentClocksThrottleReasons"):
		bits, ret = dev.GetCurrentClocksThrottleReasons()
	default:
		return
	}
	if !r.check(idx, "clock_throttle_reason", ret) {
		return
	}
	known := uint64(0)
	for _, tr := range throttleReasons() {
		known |= tr.bit
		r.emit(l.c.d.throttle, prometheus.GaugeValue, boolFloat(bits&tr.bit != 0), append(lv[:3:3], tr.reason)...)
	}
	r.emit(l.c.d.throttle, prometheus.GaugeValue, boolFloat(bits&^known != 0), append(lv[:3:3], "other")...)
}

func (l *nvmlLib) readECC(r *gpuReader, dev nvml.Device, idx string, lv []string) {
	if !r.has("nvmlDeviceGetTotalEccErrors") {
		return
	}
	for _, e := range []struct {
		typ   nvml.MemoryErrorType
		label string
	}{{nvml.MEMORY_ERROR_TYPE_CORRECTED, "corrected"}, {nvml.MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"}} {
		for _, p := range []struct {
			ctr   nvml.EccCounterType
			label string
		}{{nvml.VOLATILE_ECC, "volatile"}, {nvml.AGGREGATE_ECC, "aggregate"}} {
			// NOT_SUPPORTED when the board has no ECC or it is off.
			n, ret := dev.GetTotalEccErrors(e.typ, p.ctr)
			if !r.check(idx, "ecc", ret) {
				return
			}
			r.emit(l.c.d.ecc, prometheus.CounterValue, float64(n), append(lv[:3:3], e.label, p.label)...)
		}
	}
}

func (l *nvmlLib) readRemaps(r *gpuReader, dev nvml.Device, idx string, lv []string) {
	d := &l.c.d
	// Row remapping is Ampere's successor of page retirement: each GPU
	// answers one and NOT_SUPPORTED to the other (remapping also with MIG
	// on).
	if r.has("nvmlDeviceGetRemappedRows") {
		corr, unc, pending, failed, ret := dev.GetRemappedRows()
		if r.check(idx, "remapped_rows", ret) && r.plausible("remapped_rows", idx, float64(corr), 0, 1e6) &&
			r.plausible("remapped_rows", idx, float64(unc), 0, 1e6) {
			r.emit(d.remapped, prometheus.CounterValue, float64(corr), append(lv[:3:3], "correctable")...)
			r.emit(d.remapped, prometheus.CounterValue, float64(unc), append(lv[:3:3], "uncorrectable")...)
			r.emit(d.remapPending, prometheus.GaugeValue, boolFloat(pending), lv...)
			r.emit(d.remapFailed, prometheus.GaugeValue, boolFloat(failed), lv...)
		}
	}
	if r.has("nvmlDeviceGetRetiredPagesPendingStatus") {
		pending, ret := dev.GetRetiredPagesPendingStatus()
		if r.check(idx, "retired_pages", ret) {
			r.emit(d.retiredPending, prometheus.GaugeValue, boolFloat(pending == nvml.FEATURE_ENABLED), lv...)
		}
	}
}

func (l *nvmlLib) readPCIe(r *gpuReader, dev nvml.Device, idx string, lv []string) {
	d := &l.c.d
	if r.has("nvmlDeviceGetCurrPcieLinkGeneration") {
		if g, ret := dev.GetCurrPcieLinkGeneration(); r.check(idx, "pcie_link_generation", ret) &&
			r.plausible("pcie_link_generation", idx, float64(g), 1, maxPlausiblePCIeGen) {
			r.emit(d.pcieGen, prometheus.GaugeValue, float64(g), lv...)
		}
	}
	if r.has("nvmlDeviceGetCurrPcieLinkWidth") {
		if w, ret := dev.GetCurrPcieLinkWidth(); r.check(idx, "pcie_link_width", ret) &&
			r.plausible("pcie_link_width", idx, float64(w), 1, maxPlausibleLanes) {
			r.emit(d.pcieWidth, prometheus.GaugeValue, float64(w), lv...)
		}
	}
	if r.has("nvmlDeviceGetPcieReplayCounter") {
		if n, ret := dev.GetPcieReplayCounter(); r.check(idx, "pcie_replays", ret) &&
			r.plausible("pcie_replays", idx, float64(n), 0, 1<<32) {
			r.emit(d.pcieReplays, prometheus.CounterValue, float64(n), lv...)
		}
	}
}

// readProcesses exports the compute processes holding the most memory. The
// list is best-effort: early R535 drivers wrote 32-byte entries into the
// 24-byte array, so entries with pid 0 or more memory than the GPU has are
// garbage, rejected one by one.
func (l *nvmlLib) readProcesses(r *gpuReader, dev nvml.Device, idx string, lv []string, haveTotal bool, total float64) {
	if !r.has("nvmlDeviceGetComputeRunningProcesses_v3") {
		return
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if !r.check(idx, "processes", ret) {
		return
	}
	if len(procs) > maxPlausibleProcesses {
		l.c.reject("processes", idx, fmt.Sprintf("%d processes", len(procs)))
		return
	}
	// Without the GPU's own total, no process can hold more than any GPU.
	limit := float64(maxPlausibleBytes)
	if haveTotal {
		limit = total
	}
	valid := make([]nvml.ProcessInfo, 0, len(procs))
	for _, p := range procs {
		// NVML_VALUE_NOT_AVAILABLE is a running process with no amount to
		// export, not garbage.
		if p.Pid == 0 || (p.UsedGpuMemory != nvmlValueNotAvailable && float64(p.UsedGpuMemory) > limit) {
			l.c.reject("process", idx, fmt.Sprintf("pid %d used %d", p.Pid, p.UsedGpuMemory))
			continue
		}
		valid = append(valid, p)
	}
	r.emit(l.c.d.processes, prometheus.GaugeValue, float64(len(valid)), lv...)
	slices.SortFunc(valid, func(a, b nvml.ProcessInfo) int {
		return cmp.Or(cmp.Compare(used(b), used(a)), cmp.Compare(a.Pid, b.Pid))
	})
	shown := 0
	for _, p := range valid {
		if shown == gpuTopProcesses || p.UsedGpuMemory == nvmlValueNotAvailable {
			break
		}
		shown++
		pid := strconv.FormatUint(uint64(p.Pid), 10)
		r.emit(l.c.d.procMem, prometheus.GaugeValue, float64(p.UsedGpuMemory), append(lv[:3:3], pid, l.processName(p.Pid))...)
	}
}

// used orders "not available" after every real amount.
func used(p nvml.ProcessInfo) uint64 {
	if p.UsedGpuMemory == nvmlValueNotAvailable {
		return 0
	}
	return p.UsedGpuMemory
}

// processName is the executable's base name, bounded; "" when the process
// has gone or the driver cannot say.
func (l *nvmlLib) processName(pid uint32) string {
	if !l.has["nvmlSystemGetProcessName"] {
		return ""
	}
	name, ret := l.lib.SystemGetProcessName(int(pid))
	if ret != nvml.SUCCESS || name == "" {
		return ""
	}
	return display.Cut(filepath.Base(name), 64)
}

// readMIG exports one series set per MIG GPU instance. Utilisation is not
// per instance in NVML (DCGM's profiling fields are); memory is.
func (l *nvmlLib) readMIG(r *gpuReader, dev nvml.Device, idx string, lv []string) {
	d := &l.c.d
	if !r.has("nvmlDeviceGetMaxMigDeviceCount") || !r.has("nvmlDeviceGetMigDeviceHandleByIndex") {
		return
	}
	n, ret := dev.GetMaxMigDeviceCount()
	if !r.check(idx, "mig", ret) || !r.plausible("mig", idx, float64(n), 0, maxMIGInstances) {
		return
	}
	for i := range n {
		mig, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if !r.check(idx, "mig", ret) {
			continue
		}
		gi := ""
		if r.has("nvmlDeviceGetGpuInstanceId") {
			if id, ret := mig.GetGpuInstanceId(); r.check(idx, "mig", ret) {
				gi = strconv.Itoa(id)
			}
		}
		if gi == "" {
			continue
		}
		var migUUID, profile string
		if r.has("nvmlDeviceGetUUID") {
			migUUID, _ = mig.GetUUID()
		}
		if r.has("nvmlDeviceGetName") {
			profile, _ = mig.GetName()
		}
		r.emit(d.migInfo, prometheus.GaugeValue, 1, append(lv[:3:3], gi, migUUID, profile)...)
		var m nvml.Memory_v2
		ret = nvml.ERROR_FUNCTION_NOT_FOUND
		if r.has("nvmlDeviceGetMemoryInfo_v2") {
			m, ret = mig.GetMemoryInfo_v2()
		}
		if ret != nvml.SUCCESS && r.has("nvmlDeviceGetMemoryInfo") {
			var m1 nvml.Memory
			m1, ret = mig.GetMemoryInfo()
			m.Used, m.Total = m1.Used, m1.Total
		}
		if r.check(idx, "mig_memory", ret) {
			if m.Used > m.Total {
				l.c.reject("mig_memory", idx, fmt.Sprintf("used %d > total %d", m.Used, m.Total))
				continue
			}
			r.emit(d.migMemUsed, prometheus.GaugeValue, float64(m.Used), append(lv[:3:3], gi)...)
			r.emit(d.migMemTotal, prometheus.GaugeValue, float64(m.Total), append(lv[:3:3], gi)...)
		}
	}
}
