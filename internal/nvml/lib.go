package nvml

import (
	"bytes"
	"fmt"
	"math"
	"sync"
)

// Option configures a Library.
type Option func(*Library)

// WithLibraryPath loads path instead of DefaultLibraryName. An absolute path
// is how tests load a stub: changing LD_LIBRARY_PATH inside a running process
// does not affect dlopen.
func WithLibraryPath(path string) Option {
	return func(l *Library) {
		if path != "" {
			l.path = path
		}
	}
}

// Library is one dlopen'ed NVML. All of its state lives here, so several
// can coexist (tests load one stub per test). It is safe for concurrent use:
// calls take a read lock, Init and Shutdown the write lock, so the library is
// never unloaded under a running call.
type Library struct {
	path string

	mu      sync.RWMutex
	handle  uintptr
	refs    int
	gen     uint64 // bumped by each first Init, so stale Devices fail cleanly
	loadErr error
	fn      functions
}

// functions holds the resolved entry points; a nil field is a symbol the
// loaded library does not export.
type functions struct {
	init            func() Return
	shutdown        func() Return
	errorString     func(Return) string
	driverVersion   func(*byte, uint32) Return
	count           func(*uint32) Return
	handleByIndex   func(uint32, *uintptr) Return
	name            func(uintptr, *byte, uint32) Return
	uuid            func(uintptr, *byte, uint32) Return
	utilization     func(uintptr, *Utilization) Return
	memory          func(uintptr, *Memory) Return
	memoryV2        func(uintptr, *Memory_v2) Return
	power           func(uintptr, *uint32) Return
	powerLimit      func(uintptr, *uint32) Return
	energy          func(uintptr, *uint64) Return
	temperature     func(uintptr, TemperatureSensors, *uint32) Return
	temperatureV    func(uintptr, *temperature) Return
	clock           func(uintptr, ClockType, *uint32) Return
	eventReasons    func(uintptr, *uint64) Return
	throttleReasons func(uintptr, *uint64) Return
}

// symbol ties an exported name to the field it fills.
type symbol struct {
	name     string
	fptr     any
	required bool
}

func (f *functions) symbols() []symbol {
	return []symbol{
		{"nvmlInit_v2", &f.init, true},
		{"nvmlShutdown", &f.shutdown, true},
		{"nvmlDeviceGetCount_v2", &f.count, true},
		{"nvmlDeviceGetHandleByIndex_v2", &f.handleByIndex, true},
		{"nvmlErrorString", &f.errorString, false},
		{"nvmlSystemGetDriverVersion", &f.driverVersion, false},
		{"nvmlDeviceGetName", &f.name, false},
		{"nvmlDeviceGetUUID", &f.uuid, false},
		{"nvmlDeviceGetUtilizationRates", &f.utilization, false},
		{"nvmlDeviceGetMemoryInfo", &f.memory, false},
		{"nvmlDeviceGetMemoryInfo_v2", &f.memoryV2, false},
		{"nvmlDeviceGetPowerUsage", &f.power, false},
		{"nvmlDeviceGetEnforcedPowerLimit", &f.powerLimit, false},
		{"nvmlDeviceGetTotalEnergyConsumption", &f.energy, false},
		{"nvmlDeviceGetTemperature", &f.temperature, false},
		{"nvmlDeviceGetTemperatureV", &f.temperatureV, false},
		{"nvmlDeviceGetClockInfo", &f.clock, false},
		{"nvmlDeviceGetCurrentClocksEventReasons", &f.eventReasons, false},
		{"nvmlDeviceGetCurrentClocksThrottleReasons", &f.throttleReasons, false},
	}
}

// New returns an unloaded Library; nothing is opened until Init.
func New(opts ...Option) *Library {
	l := &Library{path: DefaultLibraryName}
	for _, o := range opts {
		o(l)
	}
	return l
}

var _ Interface = (*Library)(nil)

// Path is the file or soname Init opens.
func (l *Library) Path() string { return l.path }

// LoadError explains the last Init that returned ERROR_LIBRARY_NOT_FOUND or
// ERROR_FUNCTION_NOT_FOUND (the dlopen or dlsym message); nil otherwise.
func (l *Library) LoadError() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.loadErr
}

// load opens the library and resolves symbols. Every symbol goes through
// dlsym first: purego.RegisterLibFunc panics on a missing one, and an odd or
// old library must never crash the prober.
func (l *Library) load() (Return, error) {
	h, err := dlopen(l.path)
	if err != nil {
		return ERROR_LIBRARY_NOT_FOUND, fmt.Errorf("dlopen %s: %w", l.path, err)
	}
	var fn functions
	for _, s := range fn.symbols() {
		addr, err := dlsym(h, s.name)
		if err != nil || addr == 0 {
			if s.required {
				_ = dlclose(h)
				return ERROR_FUNCTION_NOT_FOUND, fmt.Errorf("%s does not export %s; not an NVML library, or one older than CUDA 4", l.path, s.name)
			}
			continue
		}
		register(s.fptr, addr)
	}
	l.handle, l.fn = h, fn
	return SUCCESS, nil
}

func (l *Library) unload() {
	if l.handle != 0 {
		_ = dlclose(l.handle)
	}
	l.handle, l.fn = 0, functions{}
}

// Init loads the library on the first call and initialises NVML.
func (l *Library) Init() Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		ret, err := l.load()
		l.loadErr = err
		if err != nil {
			return ret
		}
	}
	ret := l.fn.init()
	if ret != SUCCESS {
		if l.refs == 0 {
			l.unload()
		}
		return ret
	}
	if l.refs == 0 {
		l.gen++
	}
	l.refs++
	return SUCCESS
}

// Shutdown undoes one Init; the last unloads the library.
func (l *Library) Shutdown() Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return ERROR_UNINITIALIZED
	}
	ret := l.fn.shutdown()
	l.refs--
	if l.refs == 0 {
		l.unload()
	}
	return ret
}

// ErrorString prefers the library's text, falling back to the constant name.
func (l *Library) ErrorString(r Return) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.refs > 0 && l.fn.errorString != nil {
		if s := l.fn.errorString(r); s != "" {
			return s
		}
	}
	return r.String()
}

// LookupSymbol reports whether the loaded library exports name.
func (l *Library) LookupSymbol(name string) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.refs == 0 {
		return ERROR_UNINITIALIZED
	}
	if _, err := dlsym(l.handle, name); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// call runs f under the read lock when the library is initialised and, for a
// device, still the generation that made the handle.
func (l *Library) call(gen uint64, f func(*functions) Return) Return {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.refs == 0 || (gen != 0 && gen != l.gen) {
		return ERROR_UNINITIALIZED
	}
	return f(&l.fn)
}

// SystemGetDriverVersion is the kernel driver's version, e.g. "550.54.15".
func (l *Library) SystemGetDriverVersion() (string, Return) {
	var buf [80]byte // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
	ret := l.call(0, func(f *functions) Return {
		if f.driverVersion == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return f.driverVersion(&buf[0], uint32(len(buf)))
	})
	return cString(buf[:], ret)
}

// DeviceGetCount counts GPUs, including ones the caller may not open.
func (l *Library) DeviceGetCount() (int, Return) {
	var n uint32
	ret := l.call(0, func(f *functions) Return { return f.count(&n) })
	if ret != SUCCESS {
		return 0, ret
	}
	return int(n), ret
}

// DeviceGetHandleByIndex returns the GPU at NVML index i (not the CUDA
// index, and not stable across reboots: key series by UUID as well).
func (l *Library) DeviceGetHandleByIndex(i int) (Device, Return) {
	d := &device{lib: l}
	if i < 0 || i > math.MaxUint32 {
		return d, ERROR_INVALID_ARGUMENT
	}
	var h uintptr
	ret := l.call(0, func(f *functions) Return {
		d.gen = l.gen
		return f.handleByIndex(uint32(i), &h)
	})
	if ret == SUCCESS && h == 0 {
		// A library that says SUCCESS but hands back NULL would make every
		// later call undefined; treat it as a fault instead.
		ret = ERROR_UNKNOWN
	}
	if ret != SUCCESS {
		d.gen = 0 // getters of a failed handle report UNINITIALIZED
		return d, ret
	}
	d.handle = h
	return d, SUCCESS
}

func cString(buf []byte, ret Return) (string, Return) {
	if ret != SUCCESS {
		return "", ret
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), ret
}

// device is a handle bound to the Library and Init generation that made it.
// Generations start at 1, so gen 0 marks a handle that was never valid.
type device struct {
	lib    *Library
	handle uintptr
	gen    uint64
}

var _ Device = (*device)(nil)

func (d *device) do(f func(*functions) Return) Return {
	if d.gen == 0 {
		return ERROR_UNINITIALIZED
	}
	return d.lib.call(d.gen, f)
}

func (d *device) str(pick func(*functions) func(uintptr, *byte, uint32) Return) (string, Return) {
	var buf [96]byte // NVML_DEVICE_NAME_V2_BUFFER_SIZE = NVML_DEVICE_UUID_V2_BUFFER_SIZE
	ret := d.do(func(f *functions) Return {
		fn := pick(f)
		if fn == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return fn(d.handle, &buf[0], uint32(len(buf)))
	})
	return cString(buf[:], ret)
}

func (d *device) GetName() (string, Return) {
	return d.str(func(f *functions) func(uintptr, *byte, uint32) Return { return f.name })
}

func (d *device) GetUUID() (string, Return) {
	return d.str(func(f *functions) func(uintptr, *byte, uint32) Return { return f.uuid })
}

// deviceGet calls a getter shaped nvmlDeviceGetX(device, *T) with v as the
// starting value (versioned structs carry their version in it) and returns
// the zero T on failure, so a caller never sees a half-filled value.
func deviceGet[T any](d *device, v T, pick func(*functions) func(uintptr, *T) Return) (T, Return) {
	ret := d.do(func(f *functions) Return {
		fn := pick(f)
		if fn == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return fn(d.handle, &v)
	})
	if ret != SUCCESS {
		var zero T
		return zero, ret
	}
	return v, ret
}

func (d *device) GetUtilizationRates() (Utilization, Return) {
	return deviceGet(d, Utilization{}, func(f *functions) func(uintptr, *Utilization) Return { return f.utilization })
}

func (d *device) GetMemoryInfo() (Memory, Return) {
	return deviceGet(d, Memory{}, func(f *functions) func(uintptr, *Memory) Return { return f.memory })
}

func (d *device) GetMemoryInfo_v2() (Memory_v2, Return) {
	return deviceGet(d, Memory_v2{Version: memoryV2Version}, func(f *functions) func(uintptr, *Memory_v2) Return { return f.memoryV2 })
}

func (d *device) GetPowerUsage() (uint32, Return) {
	return deviceGet(d, 0, func(f *functions) func(uintptr, *uint32) Return { return f.power })
}

func (d *device) GetEnforcedPowerLimit() (uint32, Return) {
	return deviceGet(d, 0, func(f *functions) func(uintptr, *uint32) Return { return f.powerLimit })
}

func (d *device) GetTotalEnergyConsumption() (uint64, Return) {
	return deviceGet(d, 0, func(f *functions) func(uintptr, *uint64) Return { return f.energy })
}

func (d *device) GetCurrentClocksEventReasons() (uint64, Return) {
	return deviceGet(d, 0, func(f *functions) func(uintptr, *uint64) Return { return f.eventReasons })
}

func (d *device) GetCurrentClocksThrottleReasons() (uint64, Return) {
	return deviceGet(d, 0, func(f *functions) func(uintptr, *uint64) Return { return f.throttleReasons })
}

func (d *device) GetTemperature(sensor TemperatureSensors) (uint32, Return) {
	var v uint32
	ret := d.do(func(f *functions) Return {
		if f.temperature == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return f.temperature(d.handle, sensor, &v)
	})
	if ret != SUCCESS {
		return 0, ret
	}
	return v, ret
}

func (d *device) GetTemperatureV(sensor TemperatureSensors) (int32, Return) {
	t := temperature{Version: temperatureVersion, SensorType: uint32(sensor)}
	ret := d.do(func(f *functions) Return {
		if f.temperatureV == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return f.temperatureV(d.handle, &t)
	})
	if ret != SUCCESS {
		return 0, ret
	}
	return t.Temperature, ret
}

func (d *device) GetClockInfo(clock ClockType) (uint32, Return) {
	var v uint32
	ret := d.do(func(f *functions) Return {
		if f.clock == nil {
			return ERROR_FUNCTION_NOT_FOUND
		}
		return f.clock(d.handle, clock, &v)
	})
	if ret != SUCCESS {
		return 0, ret
	}
	return v, ret
}
