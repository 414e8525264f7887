package collector

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/internal/nvml"
)

// gpuReader reads one device. A getter that fails drops its own metrics
// only; the device and the rest of its metrics stay.
type gpuReader struct {
	c   *GPUCollector
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
	key := dev + "\x00" + metric + "\x00" + strconv.Itoa(int(ret))
	if ret.Unsupported() {
		if r.c.once(key) {
			r.c.logger.Info("GPU metric not available on this device; leaving it out", "gpu", dev, "metric", metric, "err", ret)
		}
		return false
	}
	r.ok = false
	if r.c.once(key) {
		r.c.logger.Warn("Reading a GPU metric failed", "gpu", dev, "metric", metric, "err", ret)
	}
	return false
}

func (r *gpuReader) emit(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	r.out = append(r.out, prometheus.MustNewConstMetric(d, t, v, lv...))
}

// collect reads every selected device once. It is the only code that calls
// NVML per scrape, and runs in one goroutine at a time.
func (c *GPUCollector) collect(lib nvml.Interface, devices map[int]bool) ([]prometheus.Metric, bool, []GPUDeviceSnapshot) {
	r := &gpuReader{c: c, ok: true}
	driver, ret := lib.SystemGetDriverVersion()
	r.check("system", "driver_version", ret)
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
		c.readDevice(r, dev, idx, driver)
	}
	return r.out, r.ok, r.devices
}

func (c *GPUCollector) readDevice(r *gpuReader, dev nvml.Device, idx, driver string) {
	d := &c.d
	// An identity that cannot be read leaves its label empty rather than
	// hiding the device's measurements.
	uuid, ret := dev.GetUUID()
	r.check(idx, "uuid", ret)
	name, ret := dev.GetName()
	r.check(idx, "name", ret)
	lv := []string{idx, uuid, name}
	r.emit(d.info, prometheus.GaugeValue, 1, idx, uuid, name, driver)
	snap := &r.devices[len(r.devices)-1]
	snap.UUID, snap.Name = uuid, name

	if u, ret := dev.GetUtilizationRates(); r.check(idx, "utilization", ret) {
		r.emit(d.util, prometheus.GaugeValue, float64(u.Gpu)/100, lv...)
		snap.Utilization, snap.HasUtilization = float64(u.Gpu)/100, true
		r.emit(d.memBW, prometheus.GaugeValue, float64(u.Memory)/100, lv...)
	}

	// v2's used excludes driver-reserved memory (as nvidia-smi shows); v1,
	// which every driver has, counts it as used.
	if m, ret := dev.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
		r.emit(d.memUsed, prometheus.GaugeValue, float64(m.Used), lv...)
		r.emit(d.memTotal, prometheus.GaugeValue, float64(m.Total), lv...)
		snap.MemoryUsed, snap.MemoryTotal, snap.HasMemory = float64(m.Used), float64(m.Total), true
	} else if ret == nvml.ERROR_FUNCTION_NOT_FOUND || ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH || ret == nvml.ERROR_NOT_SUPPORTED {
		if m, ret := dev.GetMemoryInfo(); r.check(idx, "memory", ret) {
			r.emit(d.memUsed, prometheus.GaugeValue, float64(m.Used), lv...)
			r.emit(d.memTotal, prometheus.GaugeValue, float64(m.Total), lv...)
			snap.MemoryUsed, snap.MemoryTotal, snap.HasMemory = float64(m.Used), float64(m.Total), true
		}
	} else {
		r.check(idx, "memory", ret)
	}

	if p, ret := dev.GetPowerUsage(); r.check(idx, "power", ret) {
		r.emit(d.power, prometheus.GaugeValue, float64(p)/1000, lv...)
		snap.Power, snap.HasPower = float64(p)/1000, true
	}
	if p, ret := dev.GetEnforcedPowerLimit(); r.check(idx, "power_limit", ret) {
		r.emit(d.powerLimit, prometheus.GaugeValue, float64(p)/1000, lv...)
		snap.PowerLimit, snap.HasPowerLim = float64(p)/1000, true
	}
	if e, ret := dev.GetTotalEnergyConsumption(); r.check(idx, "energy", ret) {
		r.emit(d.energy, prometheus.CounterValue, float64(e)/1000, lv...)
	}

	// nvmlDeviceGetTemperature is deprecated in NVML 13 but exported by every
	// driver so far; its successor exists only from 12.8.
	t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU)
	temp := float64(t)
	if ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		var tv int32
		tv, ret = dev.GetTemperatureV(nvml.TEMPERATURE_GPU)
		temp = float64(tv)
	}
	if r.check(idx, "temperature", ret) {
		r.emit(d.temp, prometheus.GaugeValue, temp, lv...)
		snap.Temperature, snap.HasTemperature = temp, true
	}

	if mhz, ret := dev.GetClockInfo(nvml.CLOCK_SM); r.check(idx, "sm_clock", ret) {
		r.emit(d.smClock, prometheus.GaugeValue, float64(mhz)*1e6, lv...)
	}

	// The "event reasons" name arrived with 12.2; older drivers export the
	// same call and bits as "throttle reasons".
	bits, ret := dev.GetCurrentClocksEventReasons()
	if ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		bits, ret = dev.GetCurrentClocksThrottleReasons()
	}
	if r.check(idx, "clock_throttle_reason", ret) {
		known := uint64(0)
		for _, tr := range throttleReasons() {
			known |= tr.bit
			r.emit(d.throttle, prometheus.GaugeValue, boolFloat(bits&tr.bit != 0), idx, uuid, name, tr.reason)
		}
		r.emit(d.throttle, prometheus.GaugeValue, boolFloat(bits&^known != 0), idx, uuid, name, "other")
	}
}
