//go:build !(linux || darwin || freebsd || netbsd)

package nvml

import (
	"errors"
	"runtime"
)

var errNoDlopen = errors.New("loading NVML is not supported on " + runtime.GOOS)

func dlopen(string) (uintptr, error)         { return 0, errNoDlopen }
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }
func dlclose(uintptr) error                  { return nil }
func register(any, uintptr)                  {}
