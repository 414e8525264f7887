package collector

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/internal/nvml"
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
	// Open returns an unloaded NVML for a library path ("" means the
	// default soname). Nil uses the purego binding; tests and a later move
	// to go-nvml substitute their own.
	Open func(library string) nvml.Interface
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
	open    func(string) nvml.Interface
	d       gpuDescs

	// applyMu serialises Apply and Close; NVML Init and Shutdown run under
	// it but outside mu, so a slow or hung library never blocks Collect.
	applyMu sync.Mutex

	mu       sync.Mutex
	applied  *GPUSettings
	applyErr error
	lib      nvml.Interface // initialised, or nil
	devices  map[int]bool   // nil: every device
	inflight *gpuScrape
	closed   bool
	// last is the newest finished collection, for Snapshot.
	last *gpuLast

	loggedMu sync.Mutex
	logged   map[string]bool
}

// gpuScrape is one NVML collection. Scrapes that arrive while it runs wait
// for it instead of starting their own, so at most one goroutine talks to
// NVML however many scrapes pile up.
type gpuScrape struct {
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
	temp, smClock, throttle, success, duration *prometheus.Desc
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
			"GPU identity, always 1; NVML device name and UUID, driver version from nvmlSystemGetDriverVersion.", "driver_version"),
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
	}
	d.success, d.duration = collectorSelfDescs("gpu")
	return d
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

// NewGPUCollector returns a collector with NVML not loaded; call Apply.
func NewGPUCollector(opts GPUOptions) *GPUCollector {
	c := &GPUCollector{
		logger:  opts.Logger,
		timeout: opts.Timeout,
		open:    opts.Open,
		d:       newGPUDescs(),
		logged:  map[string]bool{},
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultGPUTimeout
	}
	if c.open == nil {
		c.open = func(lib string) nvml.Interface { return nvml.New(nvml.WithLibraryPath(lib)) }
	}
	return c
}

func libraryName(cfg GPUSettings) string {
	if cfg.Library != "" {
		return cfg.Library
	}
	return nvml.DefaultLibraryName
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
	c.lib = nil
	c.mu.Unlock()

	if old != nil {
		// Library.Shutdown waits for a running collection's current call.
		if ret := old.Shutdown(); ret != nvml.SUCCESS {
			c.logger.Warn("NVML shutdown failed", "err", ret)
		}
	}
	if cfg.Mode == GPUOff {
		c.logger.Info("GPU metrics disabled by config (gpus.enabled: false)")
		return nil
	}
	lib, err := c.initLibrary(cfg)
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

func (c *GPUCollector) initLibrary(cfg GPUSettings) (nvml.Interface, error) {
	name := libraryName(cfg)
	lib := c.open(cfg.Library)
	if lib == nil {
		return nil, fmt.Errorf("no NVML binding for %s", name)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		// The dlopen/dlsym message says more than the code does.
		if le, ok := lib.(interface{ LoadError() error }); ok {
			if err := le.LoadError(); err != nil {
				return nil, fmt.Errorf("loading %s: %w", name, err)
			}
		}
		return nil, fmt.Errorf("initialising NVML from %s: %w", name, ret)
	}
	driver, _ := lib.SystemGetDriverVersion()
	count, ret := lib.DeviceGetCount()
	c.logger.Info("NVML loaded; exporting GPU metrics", "library", name,
		"driver_version", driver, "gpus", count, "count_err", errOrNil(ret))
	return lib, nil
}

func errOrNil(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
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
	if job != nil {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		select {
		case <-job.done:
		case <-t.C:
			c.logger.Warn("GPU collection still running at shutdown; leaving NVML loaded")
			return
		}
	}
	if lib != nil {
		lib.Shutdown()
	}
}

// Describe sends every descriptor; the collector is checked.
func (c *GPUCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.d.info, c.d.util, c.d.memBW, c.d.memUsed,
		c.d.memTotal, c.d.power, c.d.powerLimit, c.d.energy, c.d.temp, c.d.smClock,
		c.d.throttle, c.d.success, c.d.duration} {
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
		job = &gpuScrape{start: time.Now(), done: make(chan struct{})}
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
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *GPUCollector) run(job *gpuScrape, lib nvml.Interface, devices map[int]bool) {
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
	job.metrics, job.ok, job.devices = c.collect(lib, devices)
}

// once reports whether key is new, so each condition is logged one time.
func (c *GPUCollector) once(key string) bool {
	c.loggedMu.Lock()
	defer c.loggedMu.Unlock()
	if c.logged[key] {
		return false
	}
	c.logged[key] = true
	return true
}
