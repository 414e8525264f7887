//go:build cgo && !nonvml

package collector

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
)

// NVMLOptions is how the collector opens NVML in a build with go-nvml.
type NVMLOptions struct {
	// Open returns an unloaded NVML for a library path ("" means the
	// default soname). Nil means go-nvml's nvml.New; tests substitute
	// go-nvml's mock.
	Open func(library string) nvml.Interface
}

// The collector takes go-nvml's own nvml.Interface rather than a narrower
// interface of ours: it is what nvml.New returns, go-nvml's pkg/nvml/mock
// implements it (so unit tests need no fake of our own to maintain), and it
// carries Extensions().LookupSymbol, which every optional call needs. The
// price is a mock that panics on a method a test did not set; collection
// recovers from panics per reading, so that costs a counted rejection, as a
// go-nvml panic on garbage from a real driver would.

// nvmlSymbols are the C functions the collector may call beyond the ones
// go-nvml needs to load at all (init, count, handle by index), each checked
// with dlsym once per load: go-nvml calls through cgo without checking, and
// calling a symbol the driver lacks kills the process ("symbol lookup
// error"). Where go-nvml picks a versioned name itself (processes, event
// wait), any of the names will do. docs/gpu.md lists which driver has which.
func nvmlSymbols() [][]string {
	return [][]string{
		{"nvmlSystemGetDriverVersion"},
		{"nvmlSystemGetCudaDriverVersion_v2"},
		{"nvmlSystemGetCudaDriverVersion"},
		{"nvmlDeviceGetName"},
		{"nvmlDeviceGetUUID"},
		{"nvmlDeviceGetUtilizationRates"},
		{"nvmlDeviceGetMemoryInfo"},
		{"nvmlDeviceGetMemoryInfo_v2"},
		{"nvmlDeviceGetPowerUsage"},
		{"nvmlDeviceGetEnforcedPowerLimit"},
		{"nvmlDeviceGetTotalEnergyConsumption"},
		{"nvmlDeviceGetTemperature"},
		{"nvmlDeviceGetTemperatureV"},
		{"nvmlDeviceGetClockInfo"},
		{"nvmlDeviceGetCurrentClocksEventReasons"},
		{"nvmlDeviceGetCurrentClocksThrottleReasons"},
		{"nvmlDeviceGetCudaComputeCapability"},
		{"nvmlDeviceGetMigMode"},
		{"nvmlDeviceGetMaxMigDeviceCount"},
		{"nvmlDeviceGetMigDeviceHandleByIndex"},
		{"nvmlDeviceGetGpuInstanceId"},
		{"nvmlDeviceGetTotalEccErrors"},
		{"nvmlDeviceGetRemappedRows"},
		{"nvmlDeviceGetRetiredPagesPendingStatus"},
		{"nvmlDeviceGetCurrPcieLinkGeneration"},
		{"nvmlDeviceGetCurrPcieLinkWidth"},
		{"nvmlDeviceGetPcieReplayCounter"},
		{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"},
		{"nvmlSystemGetProcessName"},
		{"nvmlEventSetCreate"},
		{"nvmlEventSetFree"},
		{"nvmlDeviceGetSupportedEventTypes"},
		{"nvmlDeviceRegisterEvents"},
		{"nvmlEventSetWait_v2", "nvmlEventSetWait"},
	}
}

// nvmlLib is one initialised go-nvml library.
type nvmlLib struct {
	c   *GPUCollector
	lib nvml.Interface
	// has is, per first name in nvmlSymbols, whether the driver exports it.
	has map[string]bool
	xid *xidWatcher // nil when the driver cannot report XIDs
}

func (c *GPUCollector) openLibrary(cfg GPUSettings) (gpuLib, error) {
	name := libraryName(cfg)
	open := c.nvml.Open
	if open == nil {
		open = func(path string) nvml.Interface {
			if path == "" {
				return nvml.New()
			}
			return nvml.New(nvml.WithLibraryPath(path))
		}
	}
	lib := open(cfg.Library)
	if lib == nil {
		return nil, fmt.Errorf("no NVML binding for %s", name)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			// go-nvml makes this code up and drops dlopen's message, which
			// says whether the file is missing or unloadable.
			return nil, fmt.Errorf("loading %s: %w", name, dlopenError(name))
		}
		return nil, fmt.Errorf("initialising NVML from %s: %w", name, ret)
	}
	l := &nvmlLib{c: c, lib: lib, has: map[string]bool{}}
	for _, names := range nvmlSymbols() {
		l.has[names[0]] = l.lookup(names...)
	}
	driver := ""
	if l.has["nvmlSystemGetDriverVersion"] {
		driver, _ = lib.SystemGetDriverVersion()
	}
	count, ret := lib.DeviceGetCount()
	c.logger.Info("NVML loaded; exporting GPU metrics", "library", name,
		"driver_version", driver, "gpus", count, "count_err", errOrNil(ret))
	l.xid = startXIDWatcher(l)
	return l, nil
}

// dlopenError is dlopen's own message for path.
func dlopenError(path string) error {
	h := dl.New(path, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := h.Open(); err != nil {
		return err
	}
	_ = h.Close()
	return nvml.ERROR_LIBRARY_NOT_FOUND
}

// lookup reports whether the library exports any of names, logging the
// absence at Debug: an old driver is normal and costs only those metrics.
func (l *nvmlLib) lookup(names ...string) (found bool) {
	defer func() {
		if r := recover(); r != nil {
			found = false
		}
	}()
	ext := l.lib.Extensions()
	for _, n := range names {
		if ext.LookupSymbol(n) == nil {
			return true
		}
	}
	l.c.logger.Debug("NVML function not in this driver; its metrics stay absent", "function", names[0])
	return false
}

func (l *nvmlLib) shutdown() {
	if l.xid != nil {
		l.xid.stop()
	}
	if ret := l.lib.Shutdown(); ret != nvml.SUCCESS {
		l.c.logger.Warn("NVML shutdown failed", "err", ret)
	}
}

func errOrNil(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
}

// unsupported is an answer that means "this device or driver cannot", not
// a fault.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND ||
		ret == nvml.ERROR_NO_PERMISSION
}

// xidWatcher counts XID events in its own goroutine, so a scrape only reads
// counts and never waits on the event set.
type xidWatcher struct {
	l    *nvmlLib
	set  nvml.EventSet
	quit chan struct{}
	done chan struct{}

	mu     sync.Mutex
	counts map[string]map[uint64]float64 // GPU UUID → XID → events
}

// xidWaitMillis is how long one wait blocks in the driver: short enough
// that shutdown (which waits for the watcher) stays quick.
const xidWaitMillis = 200

// maxXIDCodesPerGPU bounds the series one GPU can have; NVIDIA documents
// fewer than 200 XID codes.
const maxXIDCodesPerGPU = 64

func startXIDWatcher(l *nvmlLib) (w *xidWatcher) {
	for _, s := range []string{"nvmlEventSetCreate", "nvmlEventSetFree", "nvmlDeviceGetSupportedEventTypes", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2"} {
		if !l.has[s] {
			return nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			l.c.reject("xid_setup", "", r)
			w = nil
		}
	}()
	set, ret := l.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		l.c.logger.Info("NVML cannot create an event set; XID errors will not be counted", "err", ret)
		return nil
	}
	n, ret := l.lib.DeviceGetCount()
	registered := 0
	for i := range max(n, 0) {
		dev, ret := l.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		types, ret := dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 {
			l.c.logger.Debug("GPU cannot report XID events", "gpu", i, "err", errOrNil(ret))
			continue
		}
		if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			l.c.logger.Info("Registering for XID events failed", "gpu", i, "err", ret)
			continue
		}
		registered++
	}
	if ret != nvml.SUCCESS || registered == 0 {
		_ = set.Free()
		return nil
	}
	w = &xidWatcher{l: l, set: set, quit: make(chan struct{}), done: make(chan struct{}),
		counts: map[string]map[uint64]float64{}}
	go w.run()
	return w
}

func (w *xidWatcher) run() {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		if !w.waitOnce() {
			// A failing wait must not spin: back off until asked to stop.
			select {
			case <-w.quit:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// waitOnce waits for one event; false when the wait failed.
func (w *xidWatcher) waitOnce() (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			w.l.c.reject("xid", "", r)
			ok = false
		}
	}()
	ev, ret := w.set.Wait(xidWaitMillis)
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_TIMEOUT:
		return true
	default:
		if w.l.c.once("xid_wait\x00" + ret.Error()) {
			w.l.c.logger.Warn("Waiting for NVML events failed; retrying every second", "err", ret)
		}
		return false
	}
	if ev.EventType&nvml.EventTypeXidCriticalError == 0 || ev.Device == nil {
		return true
	}
	uuid, ret := ev.Device.GetUUID()
	if ret != nvml.SUCCESS {
		uuid = ""
	}
	if ev.EventData == 0 || ev.EventData > 999 {
		w.l.c.reject("xid", uuid, ev.EventData)
		return true
	}
	if !w.count(uuid, ev.EventData) {
		w.l.c.reject("xid", uuid, ev.EventData)
		return true
	}
	// One line per GPU and code: an application faulting in a loop (XID
	// 13, 31) must not flood the log; the counter has every event.
	if w.l.c.once("xid\x00" + uuid + "\x00" + strconv.FormatUint(ev.EventData, 10)) {
		w.l.c.logger.Warn("GPU reported an XID error", "uuid", uuid, "xid", ev.EventData)
	}
	return true
}

// count adds one event; false when the GPU already has
// maxXIDCodesPerGPU other codes.
func (w *xidWatcher) count(uuid string, xid uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.counts[uuid]
	if m == nil {
		m = map[uint64]float64{}
		w.counts[uuid] = m
	}
	if _, seen := m[xid]; !seen && len(m) >= maxXIDCodesPerGPU {
		return false
	}
	m[xid]++
	return true
}

// emit adds the XID counters of one GPU.
func (w *xidWatcher) emit(r *gpuReader, uuid string, lv []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for xid, n := range w.counts[uuid] {
		r.emit(w.l.c.d.xid, prometheus.CounterValue, n, append(lv[:3:3], fmt.Sprint(xid))...)
	}
}

func (w *xidWatcher) stop() {
	close(w.quit)
	<-w.done
	func() {
		defer func() { _ = recover() }()
		_ = w.set.Free()
	}()
}

// reject counts one implausible reading and logs the first of each kind.
func (c *GPUCollector) reject(reading, gpu string, detail any) {
	c.loggedMu.Lock()
	c.rejected[reading]++
	first := !c.logged["rejected\x00"+reading]
	c.logged["rejected\x00"+reading] = true
	c.loggedMu.Unlock()
	if first {
		c.logger.Warn("NVML returned an implausible reading; not exporting it (counted in llm_gpu_rejected_readings_total)",
			"reading", reading, "gpu", gpu, "value", fmt.Sprint(detail))
	}
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
