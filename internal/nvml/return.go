package nvml

import "strconv"

// Return is nvmlReturn_t. It implements error so a failed call can be
// wrapped with %w; SUCCESS is not an error and callers compare against it.
type Return int32

// Return codes from nvml.h.
const (
	SUCCESS                         Return = 0
	ERROR_UNINITIALIZED             Return = 1
	ERROR_INVALID_ARGUMENT          Return = 2
	ERROR_NOT_SUPPORTED             Return = 3
	ERROR_NO_PERMISSION             Return = 4
	ERROR_ALREADY_INITIALIZED       Return = 5
	ERROR_NOT_FOUND                 Return = 6
	ERROR_INSUFFICIENT_SIZE         Return = 7
	ERROR_INSUFFICIENT_POWER        Return = 8
	ERROR_DRIVER_NOT_LOADED         Return = 9
	ERROR_TIMEOUT                   Return = 10
	ERROR_IRQ_ISSUE                 Return = 11
	ERROR_LIBRARY_NOT_FOUND         Return = 12
	ERROR_FUNCTION_NOT_FOUND        Return = 13
	ERROR_CORRUPTED_INFOROM         Return = 14
	ERROR_GPU_IS_LOST               Return = 15
	ERROR_RESET_REQUIRED            Return = 16
	ERROR_OPERATING_SYSTEM          Return = 17
	ERROR_LIB_RM_VERSION_MISMATCH   Return = 18
	ERROR_IN_USE                    Return = 19
	ERROR_MEMORY                    Return = 20
	ERROR_NO_DATA                   Return = 21
	ERROR_VGPU_ECC_NOT_SUPPORTED    Return = 22
	ERROR_INSUFFICIENT_RESOURCES    Return = 23
	ERROR_FREQ_NOT_SUPPORTED        Return = 24
	ERROR_ARGUMENT_VERSION_MISMATCH Return = 25
	ERROR_DEPRECATED                Return = 26
	ERROR_NOT_READY                 Return = 27
	ERROR_GPU_NOT_FOUND             Return = 28
	ERROR_INVALID_STATE             Return = 29
	ERROR_UNKNOWN                   Return = 999
)

// Built-in names, so a Return reads well without a loaded library (the
// common case for ERROR_LIBRARY_NOT_FOUND). Read-only after init.
var returnNames = map[Return]string{
	SUCCESS:                         "SUCCESS",
	ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED",
	ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION",
	ERROR_ALREADY_INITIALIZED:       "ERROR_ALREADY_INITIALIZED",
	ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	ERROR_INSUFFICIENT_POWER:        "ERROR_INSUFFICIENT_POWER",
	ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
	ERROR_TIMEOUT:                   "ERROR_TIMEOUT",
	ERROR_IRQ_ISSUE:                 "ERROR_IRQ_ISSUE",
	ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND",
	ERROR_CORRUPTED_INFOROM:         "ERROR_CORRUPTED_INFOROM",
	ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	ERROR_OPERATING_SYSTEM:          "ERROR_OPERATING_SYSTEM",
	ERROR_LIB_RM_VERSION_MISMATCH:   "ERROR_LIB_RM_VERSION_MISMATCH",
	ERROR_IN_USE:                    "ERROR_IN_USE",
	ERROR_MEMORY:                    "ERROR_MEMORY",
	ERROR_NO_DATA:                   "ERROR_NO_DATA",
	ERROR_VGPU_ECC_NOT_SUPPORTED:    "ERROR_VGPU_ECC_NOT_SUPPORTED",
	ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	ERROR_FREQ_NOT_SUPPORTED:        "ERROR_FREQ_NOT_SUPPORTED",
	ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	ERROR_DEPRECATED:                "ERROR_DEPRECATED",
	ERROR_NOT_READY:                 "ERROR_NOT_READY",
	ERROR_GPU_NOT_FOUND:             "ERROR_GPU_NOT_FOUND",
	ERROR_INVALID_STATE:             "ERROR_INVALID_STATE",
	ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
}

// String is the constant's name, or the number for codes newer than this
// binding.
func (r Return) String() string {
	if s, ok := returnNames[r]; ok {
		return s
	}
	return "nvmlReturn(" + strconv.Itoa(int(r)) + ")"
}

func (r Return) Error() string { return r.String() }

// Unsupported reports whether r means "this device or driver cannot give
// this value" rather than a fault: the metric is absent, the device is fine.
func (r Return) Unsupported() bool {
	switch r {
	case ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, ERROR_NO_PERMISSION:
		return true
	}
	return false
}
