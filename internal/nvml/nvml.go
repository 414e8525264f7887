// Package nvml is a small, cgo-free binding to NVIDIA's management library
// (libnvidia-ml.so.1), loaded at run time with purego so the prober binary
// stays static and runs unchanged on hosts without a GPU driver.
//
// Its shape follows github.com/NVIDIA/go-nvml (an Interface with Init and
// Shutdown, device handles, getters returning (value, Return)) so code written
// against it can move to go-nvml by changing imports, and tests can supply
// their own Interface. Only what the prober exports is bound.
//
// The exact exported symbol names are used (nvmlInit_v2, …_v2 handles and
// counts): the header's macros that map plain names to versioned ones do not
// help a dlsym binding, and the unversioned v1 entry points differ in
// behaviour (v1 init fails when any one GPU is bad; v1 indices differ).
package nvml

// DefaultLibraryName is the soname the driver installs; dlopen searches the
// loader's normal path for it.
const DefaultLibraryName = "libnvidia-ml.so.1"

// Interface is the library-level API, shaped like go-nvml's nvml.Interface.
type Interface interface {
	// Init loads the library on first use and calls nvmlInit_v2. Calls are
	// counted; each successful Init needs one Shutdown.
	Init() Return
	// Shutdown undoes one Init; the last one calls nvmlShutdown and unloads
	// the library.
	Shutdown() Return
	// ErrorString describes r, using the library's own text when loaded.
	ErrorString(r Return) string
	SystemGetDriverVersion() (string, Return)
	DeviceGetCount() (int, Return)
	// DeviceGetHandleByIndex never returns a nil Device: on failure the
	// Device's getters return the same error.
	DeviceGetHandleByIndex(index int) (Device, Return)
	// LookupSymbol reports whether the loaded library exports name (go-nvml's
	// ExtendedInterface). It returns an error before Init.
	LookupSymbol(name string) error
}

// Device is one GPU handle, shaped like go-nvml's nvml.Device. A getter whose
// symbol the loaded library lacks returns ERROR_FUNCTION_NOT_FOUND.
type Device interface {
	GetName() (string, Return)
	GetUUID() (string, Return)
	// GetUtilizationRates: percentages (0–100) of the last sample period.
	GetUtilizationRates() (Utilization, Return)
	// GetMemoryInfo (v1): bytes; Used includes memory the driver reserves.
	GetMemoryInfo() (Memory, Return)
	// GetMemoryInfo_v2: bytes; Used excludes Reserved. Needs R510+.
	GetMemoryInfo_v2() (Memory_v2, Return)
	// GetPowerUsage: milliwatts.
	GetPowerUsage() (uint32, Return)
	// GetEnforcedPowerLimit: milliwatts.
	GetEnforcedPowerLimit() (uint32, Return)
	// GetTotalEnergyConsumption: millijoules since the driver was loaded.
	GetTotalEnergyConsumption() (uint64, Return)
	// GetTemperature: degrees Celsius (nvmlDeviceGetTemperature, deprecated
	// in NVML 13 but still exported).
	GetTemperature(sensor TemperatureSensors) (uint32, Return)
	// GetTemperatureV: degrees Celsius through nvmlDeviceGetTemperatureV
	// (NVML 12.8+), the successor of GetTemperature.
	GetTemperatureV(sensor TemperatureSensors) (int32, Return)
	// GetClockInfo: current clock in MHz.
	GetClockInfo(clock ClockType) (uint32, Return)
	// GetCurrentClocksEventReasons: ClocksEventReason bits (NVML 12.2+).
	GetCurrentClocksEventReasons() (uint64, Return)
	// GetCurrentClocksThrottleReasons: the older name of the same call and
	// bits, for drivers before 12.2.
	GetCurrentClocksThrottleReasons() (uint64, Return)
}

// Utilization mirrors nvmlUtilization_t (8 bytes).
type Utilization struct {
	Gpu    uint32
	Memory uint32
}

// Memory mirrors nvmlMemory_t (24 bytes).
type Memory struct {
	Total uint64
	Free  uint64
	Used  uint64
}

// Memory_v2 mirrors nvmlMemory_v2_t (40 bytes; Go pads after Version exactly
// as C does).
type Memory_v2 struct {
	Version  uint32
	Total    uint64
	Reserved uint64
	Free     uint64
	Used     uint64
}

// temperature mirrors nvmlTemperature_t (12 bytes).
type temperature struct {
	Version     uint32
	SensorType  uint32
	Temperature int32
}

// Struct versions: NVML_STRUCT_VERSION(T, v) = sizeof(T) | v<<24.
const (
	memoryV2Version    = 40 | 2<<24 // 0x02000028
	temperatureVersion = 12 | 1<<24 // 0x0100000C
)

// TemperatureSensors is nvmlTemperatureSensors_t.
type TemperatureSensors int32

// TEMPERATURE_GPU is the GPU die sensor.
const TEMPERATURE_GPU TemperatureSensors = 0

// ClockType is nvmlClockType_t.
type ClockType int32

// Clock domains.
const (
	CLOCK_GRAPHICS ClockType = 0
	CLOCK_SM       ClockType = 1
	CLOCK_MEM      ClockType = 2
	CLOCK_VIDEO    ClockType = 3
)

// Clock event (formerly "throttle") reason bits.
const (
	ClocksEventReasonGpuIdle                   uint64 = 0x1
	ClocksEventReasonApplicationsClocksSetting uint64 = 0x2
	ClocksEventReasonSwPowerCap                uint64 = 0x4
	ClocksThrottleReasonHwSlowdown             uint64 = 0x8
	ClocksEventReasonSyncBoost                 uint64 = 0x10
	ClocksEventReasonSwThermalSlowdown         uint64 = 0x20
	ClocksThrottleReasonHwThermalSlowdown      uint64 = 0x40
	ClocksThrottleReasonHwPowerBrakeSlowdown   uint64 = 0x80
	ClocksEventReasonDisplayClockSetting       uint64 = 0x100
)
