package main

import (
	"fmt"
	"io"

	"github.com/llm-prober/llm-prober/config"
)

// checkConfig validates each file and prints every problem found, so a CI
// job can gate config changes on its exit code.
func checkConfig(files []string, print bool, stdout, stderr io.Writer) int {
	code := 0
	for _, f := range files {
		cfg, err := config.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "%s: FAILED\n%v\n", f, err)
			code = 1
			continue
		}
		if print {
			b, err := cfg.Marshal()
			if err != nil {
				fmt.Fprintf(stderr, "%s: cannot print: %v\n", f, err)
				code = 1
				continue
			}
			fmt.Fprintf(stdout, "# %s (effective configuration)\n%s", f, b)
			continue
		}
		fmt.Fprintf(stdout, "%s: OK, %d targets, %d probes\n", f, len(cfg.Targets), cfg.ProbeCount())
	}
	return code
}
