package collector

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultGPUTimeout bounds one NVML collection. Local NVML calls take
// microseconds to milliseconds; a driver that hangs (a GPU falling off the
// bus) must cost a scrape this much at most, well inside Prometheus' default
// 10s scrape timeout.
const DefaultGPUTimeout = 3 * time.Second

// GPUOptions configures a GPUCollector.
type GPUOptions struct {
	Logger *slog.Logger
	// Timeout bounds each collection; 0 means DefaultGPUTimeout.
	Timeout time.Duration
	// NVML holds what only a build with NVML (cgo, without -tags nonvml)
	// understands: how to open the library.
	NVML NVMLOptions
}

// gpuLib is one initialised NVML as the collector's scrape machinery sees
// it; the build with go-nvml provides it (gpu_nvml.go), the one without
// never has one.
type gpuLib interface {
	// collect reads every selected device once; it runs in one goroutine
	// at a time.
	collect(devices map[int]bool) (metrics []prometheus.Metric, ok bool, snap []GPUDeviceSnapshot)
	// shutdown stops background work and releases NVML.
	shutdown()
}

// GPUMode says whether the GPU collector loads NVML.
type GPUMode int

// GPU modes; the zero value is GPUAuto.
const (
	// GPUAuto loads NVML when it can and carries on without GPU metrics
	// (one Info line) when it cannot.
	GPUAuto GPUMode = iota
	// GPUOn loads NVML and makes failing to do so Apply's error.
	GPUOn
	// GPUOff never loads NVML.
	GPUOff
)

// String is the mode as gpus.enabled spells it: auto, true or false.
func (m GPUMode) String() string {
	switch m {
	case GPUOn:
		return "true"
	case GPUOff:
		return "false"
	}
	return "auto"
}

// GPUSettings is what Apply brings the collector in line with: the gpus
// config section in the collector's terms (config.GPUs.Settings).
type GPUSettings struct {
	Mode GPUMode
	// Library is the NVML library path; "" is the default soname.
	Library string
	// Devices limits collection to these GPU indexes; empty is every GPU.
	Devices []int
}

// GPUCollector exports per-GPU metrics read through NVML at scrape time.
// Until Apply loads NVML it collects nothing, so a host without GPUs shows
// no GPU series at all rather than failures.
type GPUCollector struct {
	logger  *slog.Logger
	timeout time.Duration
	nvml    NVMLOptions
	d       gpuDescs

	// applyMu serialises Apply and Close; NVML Init and Shutdown run under
	// it but outside mu, so a slow or hung library never blocks Collect.
	applyMu sync.Mutex

	mu       sync.Mutex
	applied  *GPUSettings
	applyErr error
	lib      gpuLib       // initialised, or nil
	devices  map[int]bool // nil: every device
	inflight *gpuScrape
	closed   bool
	// last is the newest finished collection, for Snapshot.
	last *gpuLast

	loggedMu sync.Mutex
	logged   map[string]bool
	// rejected counts readings the library returned that were implausible
	// (or panicked go-nvml), by reading; they are never exported as
	// measurements. It outlives reloads, as counters must.
	rejected map[string]float64
}

// gpuScrape is one NVML collection. Scrapes that arrive while it runs wait
// for it instead of starting their own, so at most one goroutine talks to
// NVML however many scrapes pile up.
type gpuScrape struct {
	lib      gpuLib
	start    time.Time
	done     chan struct{}
	metrics  []prometheus.Metric
	ok       bool
	duration time.Duration
	timedOut atomic.Bool
	devices  []GPUDeviceSnapshot
}

type gpuDescs struct {
	info, util, memBW, memUsed, memTotal, power, powerLimit, energy,
	temp, smClock, throttle, xid, ecc, remapped, remapPending, remapFailed,
	retiredPending, pcieGen, pcieWidth, pcieReplays, processes, procMem,
	migInfo, migMemUsed, migMemTotal, rejected, success, duration *prometheus.Desc
}

// collectorSelfDescs are llm_prober_collector_success and
// llm_prober_collector_duration_seconds for one scrape-time collector. The
// collector name is a const label, so each collector can describe its own
// pair (distinct descriptors) while the help text, shared here, stays
// identical as the registry requires. Other scrape-time collectors should
// use this too.
func collectorSelfDescs(collector string) (success, duration *prometheus.Desc) {
	cl := prometheus.Labels{"collector": collector}
	success = prometheus.NewDesc("llm_prober_collector_success",
		"Whether the collector's last scrape-time collection succeeded (1) or not (0).", nil, cl)
	duration = prometheus.NewDesc("llm_prober_collector_duration_seconds",
		"How long the collector's last scrape-time collection took.", nil, cl)
	return success, duration
}

func newGPUDescs() gpuDescs {
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"gpu", "uuid", "name"}, extra...), nil)
	}
	d := gpuDescs{
		info: desc("llm_gpu_info",
			"GPU identity, always 1: NVML device name and UUID, driver_version (nvmlSystemGetDriverVersion), cuda_driver_version (nvmlSystemGetCudaDriverVersion_v2, major.minor), compute_capability (nvmlDeviceGetCudaComputeCapability), mig_mode (nvmlDeviceGetMigMode current: enabled, disabled, or empty where unsupported).",
			"driver_version", "cuda_driver_version", "compute_capability", "mig_mode"),
		util: desc("llm_gpu_utilization_ratio",
			"Fraction of the last sample period (1/6 s to 1 s) in which at least one kernel ran (nvmlDeviceGetUtilizationRates .gpu / 100). Not SM occupancy."),
		memBW: desc("llm_gpu_memory_bandwidth_utilization_ratio",
			"Fraction of the last sample period in which device memory was being read or written (nvmlDeviceGetUtilizationRates .memory / 100). A time-busy proxy, not bytes per second."),
		memUsed: desc("llm_gpu_memory_used_bytes",
			"Device memory allocated, in bytes (nvmlDeviceGetMemoryInfo_v2 .used, which excludes driver-reserved memory; v1 .used on older drivers)."),
		memTotal: desc("llm_gpu_memory_total_bytes",
			"Device memory installed, in bytes (nvmlDeviceGetMemoryInfo .total)."),
		power: desc("llm_gpu_power_watts",
			"Board power draw in watts (nvmlDeviceGetPowerUsage mW / 1000; a 1 s average on Ampere and newer except GA100, instantaneous before)."),
		powerLimit: desc("llm_gpu_power_limit_watts",
			"Enforced power limit in watts (nvmlDeviceGetEnforcedPowerLimit mW / 1000)."),
		energy: desc("llm_gpu_energy_joules_total",
			"Energy consumed since the driver was last loaded, in joules (nvmlDeviceGetTotalEnergyConsumption mJ / 1000)."),
		temp: desc("llm_gpu_temperature_celsius",
			"GPU die temperature in degrees Celsius (nvmlDeviceGetTemperature, NVML_TEMPERATURE_GPU)."),
		smClock: desc("llm_gpu_sm_clock_hertz",
			"Current SM clock in hertz (nvmlDeviceGetClockInfo NVML_CLOCK_SM MHz * 1e6)."),
		throttle: desc("llm_gpu_clock_throttle_reason",
			"1 while NVML reports this reason for holding clocks down, else 0 (nvmlDeviceGetCurrentClocksEventReasons bits; other = bits this prober does not know).", "reason"),
		xid: desc("llm_gpu_xid_errors_total",
			"XID errors the driver reported for this GPU since the prober loaded NVML, by XID code (nvmlEventSetWait_v2, event type XidCriticalError; 999 = unknown).", "xid"),
		ecc: desc("llm_gpu_ecc_errors_total",
			"ECC memory errors (nvmlDeviceGetTotalEccErrors): error corrected or uncorrected; period volatile (since the driver loaded) or aggregate (the GPU's lifetime).", "error", "period"),
		remapped: desc("llm_gpu_remapped_rows_total",
			"Memory rows remapped after errors, by the error that caused it: correctable or uncorrectable (nvmlDeviceGetRemappedRows; Ampere and newer).", "error"),
		remapPending: desc("llm_gpu_row_remap_pending",
			"1 when a row remap is pending and the GPU needs a reset to apply it (nvmlDeviceGetRemappedRows isPending)."),
		remapFailed: desc("llm_gpu_row_remap_failed",
			"1 when a row remap has failed: the GPU should be replaced (nvmlDeviceGetRemappedRows failureOccurred)."),
		retiredPending: desc("llm_gpu_retired_pages_pending",
			"1 when memory pages are waiting to be retired at the next driver reload (nvmlDeviceGetRetiredPagesPendingStatus; before Ampere)."),
		pcieGen: desc("llm_gpu_pcie_link_generation",
			"Current PCIe link generation (nvmlDeviceGetCurrPcieLinkGeneration); lower than the maximum when the link trained down or idles."),
		pcieWidth: desc("llm_gpu_pcie_link_width",
			"Current PCIe link width in lanes (nvmlDeviceGetCurrPcieLinkWidth)."),
		pcieReplays: desc("llm_gpu_pcie_replays_total",
			"PCIe replays since the driver loaded (nvmlDeviceGetPcieReplayCounter): link errors the link layer retried."),
		processes: desc("llm_gpu_processes",
			"Compute processes running on the GPU (nvmlDeviceGetComputeRunningProcesses_v3)."),
		procMem: desc("llm_gpu_process_memory_used_bytes",
			"Device memory used by one compute process, the 10 largest per GPU (nvmlDeviceGetComputeRunningProcesses_v3 usedGpuMemory; process from nvmlSystemGetProcessName).", "pid", "process"),
		migInfo: desc("llm_gpu_mig_info",
			"One MIG GPU instance of this GPU, always 1 (nvmlDeviceGetMigDeviceHandleByIndex; gpu_instance from nvmlDeviceGetGpuInstanceId, mig_uuid and profile from the MIG device's UUID and name).", "gpu_instance", "mig_uuid", "profile"),
		migMemUsed: desc("llm_gpu_mig_memory_used_bytes",
			"Device memory used in one MIG GPU instance, in bytes (nvmlDeviceGetMemoryInfo_v2 on the MIG device handle).", "gpu_instance"),
		migMemTotal: desc("llm_gpu_mig_memory_total_bytes",
			"Device memory of one MIG GPU instance, in bytes (nvmlDeviceGetMemoryInfo_v2 on the MIG device handle).", "gpu_instance"),
	}
	d.rejected = prometheus.NewDesc("llm_gpu_rejected_readings_total",
		"Readings NVML returned that the prober rejected as implausible (out of range, a list longer than its buffer, a call that panicked) instead of exporting, by reading.",
		[]string{"reading"}, nil)
	d.success, d.duration = collectorSelfDescs("gpu")
	return d
}

// NewGPUCollector returns a collector with NVML not loaded; call Apply.
func NewGPUCollector(opts GPUOptions) *GPUCollector {
	c := &GPUCollector{
		logger:   opts.Logger,
		timeout:  opts.Timeout,
		nvml:     opts.NVML,
		d:        newGPUDescs(),
		logged:   map[string]bool{},
		rejected: map[string]float64{},
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultGPUTimeout
	}
	return c
}

// defaultNVMLLibrary is the soname the driver installs; dlopen searches the
// loader's normal path for it.
const defaultNVMLLibrary = "libnvidia-ml.so.1"

func libraryName(cfg GPUSettings) string {
	if cfg.Library != "" {
		return cfg.Library
	}
	return defaultNVMLLibrary
}

// Apply brings the collector in line with cfg: loads or unloads NVML and
// sets the device filter. With GPUOn (enabled: true), failing to initialise
// NVML is an error (the caller decides whether that stops the process); with
// GPUAuto it is one Info line. An unchanged cfg is a no-op returning the previous
// result, so reloads of other config sections never re-initialise NVML.
func (c *GPUCollector) Apply(cfg GPUSettings) error {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	cfg.Devices = slices.Clone(cfg.Devices)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if c.applied != nil && gpuConfigEqual(*c.applied, cfg) {
		err := c.applyErr
		c.mu.Unlock()
		return err
	}
	prev, old := c.applied, c.lib
	c.applied = &cfg
	c.applyErr = nil
	c.devices = nil
	if len(cfg.Devices) > 0 {
		c.devices = map[int]bool{}
		for _, i := range cfg.Devices {
			c.devices[i] = true
		}
	}
	if old != nil && cfg.Mode != GPUOff && libraryName(*prev) == libraryName(cfg) {
		c.mu.Unlock()
		return nil
	}
	job := c.inflight
	c.lib = nil
	c.mu.Unlock()

	if old != nil {
		c.retire(old, job)
	}
	if cfg.Mode == GPUOff {
		c.logger.Info("GPU metrics disabled by config (gpus.enabled: false)")
		return nil
	}
	lib, err := c.openLibrary(cfg)
	if err != nil {
		if cfg.Mode == GPUOn {
			err = fmt.Errorf("gpus.enabled is true but NVML cannot be used: %w", err)
			c.mu.Lock()
			c.applyErr = err
			c.mu.Unlock()
			return err
		}
		c.logger.Info("NVML not available; running without GPU metrics (set gpus.enabled: false to skip looking)", "err", err)
		return nil
	}
	c.mu.Lock()
	c.lib = lib
	c.mu.Unlock()
	return nil
}

func gpuConfigEqual(a, b GPUSettings) bool {
	return a.Mode == b.Mode && a.Library == b.Library && slices.Equal(a.Devices, b.Devices)
}

// Err is the error of the last Apply that failed (only enabled: true fails).
func (c *GPUCollector) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyErr
}

// Close waits (up to the collection timeout) for a running collection, then
// shuts NVML down. Later Applies do nothing. If a collection is stuck inside
// the driver, NVML is left loaded: the process is exiting anyway, and
// unloading under a running call would be worse.
func (c *GPUCollector) Close() {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	c.mu.Lock()
	lib, job := c.lib, c.inflight
	c.lib, c.closed = nil, true
	c.mu.Unlock()
	if lib != nil {
		c.retire(lib, job)
	}
}

// retire shuts lib down once job, a collection that may be calling into
// it, has finished: go-nvml's Shutdown dlcloses the library, and unmapping
// it under a running call would crash the process. A collection stuck in
// the driver past the timeout leaves the library loaded instead.
func (c *GPUCollector) retire(lib gpuLib, job *gpuScrape) {
	if job != nil && job.lib == lib {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		select {
		case <-job.done:
		case <-t.C:
			c.logger.Warn("GPU collection still running; leaving that NVML loaded rather than unloading it under the call")
			return
		}
	}
	lib.shutdown()
}

// Describe sends every descriptor; the collector is checked.
func (c *GPUCollector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.d
	for _, d := range []*prometheus.Desc{d.info, d.util, d.memBW, d.memUsed,
		d.memTotal, d.power, d.powerLimit, d.energy, d.temp, d.smClock,
		d.throttle, d.xid, d.ecc, d.remapped, d.remapPending, d.remapFailed,
		d.retiredPending, d.pcieGen, d.pcieWidth, d.pcieReplays, d.processes,
		d.procMem, d.migInfo, d.migMemUsed, d.migMemTotal, d.rejected,
		d.success, d.duration} {
		ch <- d
	}
}

// Collect joins or starts one NVML collection and waits for it at most the
// timeout; past that it reports failure and returns, leaving the collection
// to finish (and be discarded) in the background.
func (c *GPUCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	lib := c.lib
	if lib == nil {
		c.mu.Unlock()
		return
	}
	job := c.inflight
	if job == nil {
		job = &gpuScrape{lib: lib, start: time.Now(), done: make(chan struct{})}
		c.inflight = job
		go c.run(job, lib, c.devices)
	}
	c.mu.Unlock()

	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case <-job.done:
		for _, m := range job.metrics {
			ch <- m
		}
		ch <- prometheus.MustNewConstMetric(c.d.success, prometheus.GaugeValue, boolFloat(job.ok))
		ch <- prometheus.MustNewConstMetric(c.d.duration, prometheus.GaugeValue, job.duration.Seconds())
	case <-t.C:
		if job.timedOut.CompareAndSwap(false, true) {
			c.logger.Warn("GPU collection timed out; NVML may be hung", "timeout", c.timeout)
		}
		ch <- prometheus.MustNewConstMetric(c.d.success, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(c.d.duration, prometheus.GaugeValue, time.Since(job.start).Seconds())
	}
	c.loggedMu.Lock()
	for reading, n := range c.rejected {
		ch <- prometheus.MustNewConstMetric(c.d.rejected, prometheus.CounterValue, n, reading)
	}
	c.loggedMu.Unlock()
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *GPUCollector) run(job *gpuScrape, lib gpuLib, devices map[int]bool) {
	defer func() {
		if r := recover(); r != nil {
			// A binding bug must cost one scrape, not the process.
			c.logger.Error("GPU collection panicked", "err", fmt.Sprint(r))
			job.metrics, job.ok, job.devices = nil, false, nil
		}
		job.duration = time.Since(job.start)
		c.mu.Lock()
		if c.inflight == job {
			c.inflight = nil
		}
		c.last = &gpuLast{at: job.start.Add(job.duration), duration: job.duration, ok: job.ok, devices: job.devices}
		c.mu.Unlock()
		close(job.done)
	}()
	job.metrics, job.ok, job.devices = lib.collect(devices)
}
