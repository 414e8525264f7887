// Command gen writes llm-prober's Grafana dashboards (make dashboards).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llm-prober/llm-prober/dashboards"
)

func main() {
	dir := flag.String("dir", "dashboards", "directory to write the dashboard JSON files into")
	flag.Parse()
	files, err := dashboards.Files()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(*dir, name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", filepath.Join(*dir, name))
	}
}
