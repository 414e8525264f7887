//go:build (linux || darwin || freebsd || netbsd) && !nonvml

package nvml

// purego resolves dlopen from the system C library through dynamic imports,
// so a binary that links this file is dynamically linked against libc (and
// needs its loader, e.g. /lib64/ld-linux-x86-64.so.2) even with
// CGO_ENABLED=0. That is inherent: libnvidia-ml.so.1 is itself a glibc
// library and cannot be loaded into a process without the dynamic loader.
// Build with -tags nonvml for a fully static binary without GPU metrics.

import "github.com/ebitengine/purego"

// RTLD_LAZY as go-nvml uses, proven against real drivers; RTLD_LOCAL because
// every symbol is looked up through the handle, so nothing needs to be global.
// CanLoad reports whether this build can load NVML at all.
const CanLoad = true

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
}

func dlsym(handle uintptr, name string) (uintptr, error) { return purego.Dlsym(handle, name) }

func dlclose(handle uintptr) error { return purego.Dlclose(handle) }

// register binds fptr to the C function at addr; addr is never 0 here
// because dlsym succeeded, so purego does not panic.
func register(fptr any, addr uintptr) { purego.RegisterFunc(fptr, addr) }
