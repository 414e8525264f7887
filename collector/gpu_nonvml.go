//go:build !cgo || nonvml

package collector

import "errors"

// NVMLOptions is empty in a build without NVML (no cgo, or -tags nonvml):
// there is no library to open.
type NVMLOptions struct{}

// errNoNVMLBuild is why a static build never loads NVML: go-nvml is cgo.
var errNoNVMLBuild = errors.New("this llm-prober was built without NVML (-tags nonvml or CGO_ENABLED=0): a fully static binary cannot load libnvidia-ml.so.1")

func (c *GPUCollector) openLibrary(GPUSettings) (gpuLib, error) {
	return nil, errNoNVMLBuild
}
