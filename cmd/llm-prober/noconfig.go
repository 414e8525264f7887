package main

import (
	"fmt"
	"path/filepath"
)

// imageConfigFile is where the container image looks for its
// configuration (the Dockerfile's CMD and VOLUME).
const imageConfigFile = "/etc/llm-prober/llm-prober.yml"

// exampleConfig is the shipped example a first start can use: it probes
// the simulator that `llm-prober simulate` starts.
const exampleConfig = "examples/llm-prober.yml"

// noConfigMessage is what the daemon prints when its configuration file
// does not exist, most often a container started without its mount. The
// docker command must work when pasted: Docker refuses a relative path on
// either side of -v, so the host side is $(pwd)-based and the container
// side is the configured directory only when it is absolute (the image's
// otherwise), and the file in the mounted directory must have the name
// --config.file asks for.
func noConfigMessage(configFile string) string {
	mountFile := configFile
	if !filepath.IsAbs(mountFile) {
		mountFile = imageConfigFile
	}
	dir, base := filepath.Dir(mountFile), filepath.Base(mountFile)
	copyHint := ""
	if base != filepath.Base(exampleConfig) {
		copyHint = fmt.Sprintf(" (copy %s to %s in a directory of your own and mount that)", exampleConfig, base)
	}
	return fmt.Sprintf(`llm-prober: no configuration file at %s, not starting.
Point --config.file at one (%s probes the simulator that `+"`llm-prober simulate`"+` starts), or, in a container, mount a directory holding %s at %s:
  docker run -v "$(pwd)/%s:%s:ro" ...%s
examples/ and docs/configuration.md have configurations to start from.
`, configFile, exampleConfig, base, dir, filepath.Dir(exampleConfig), dir, copyHint)
}
