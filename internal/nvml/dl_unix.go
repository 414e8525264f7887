//go:build linux || darwin || freebsd || netbsd

package nvml

import "github.com/ebitengine/purego"

// RTLD_LAZY as go-nvml uses, proven against real drivers; RTLD_LOCAL because
// every symbol is looked up through the handle, so nothing needs to be global.
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
}

func dlsym(handle uintptr, name string) (uintptr, error) { return purego.Dlsym(handle, name) }

func dlclose(handle uintptr) error { return purego.Dlclose(handle) }

// register binds fptr to the C function at addr; addr is never 0 here
// because dlsym succeeded, so purego does not panic.
func register(fptr any, addr uintptr) { purego.RegisterFunc(fptr, addr) }
