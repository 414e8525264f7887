// Command gen evaluates the monitoring mixin (mixin/*.libsonnet) and writes
// the files generated from it (make mixin): the Grafana dashboards
// (dashboards/*.json), the rules file (alerts/llm-prober-rules.yml) and
// deploy/'s copies of the rules (the Kubernetes PrometheusRule and the Helm
// chart's file). Run from the repository root, or name it with -root.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/llm-prober/llm-prober/mixin"
)

func main() {
	root := flag.String("root", ".", "repository root to write the generated files under")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	m, err := mixin.Evaluate("")
	if err != nil {
		return err
	}
	files, err := m.Files()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", p)
	}
	return nil
}
