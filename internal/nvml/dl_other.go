//go:build !(linux || darwin || freebsd || netbsd) || nonvml

package nvml

import "errors"

// errNoDlopen: this build cannot load shared libraries (an OS purego does not
// cover, or -tags nonvml for a fully static binary).
var errNoDlopen = errors.New("this llm-prober build cannot load NVML (built with -tags nonvml, or for an OS without dlopen)")

// CanLoad reports whether this build can load NVML at all.
const CanLoad = false

func dlopen(string) (uintptr, error)         { return 0, errNoDlopen }
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }
func dlclose(uintptr) error                  { return nil }
func register(any, uintptr)                  {}
