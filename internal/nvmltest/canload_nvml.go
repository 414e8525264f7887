//go:build cgo && !nonvml

package nvmltest

// CanLoad reports whether this build reads GPUs through go-nvml, which needs
// cgo.
const CanLoad = true
