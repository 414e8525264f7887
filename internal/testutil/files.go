package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// WriteFile writes content to path, readable by this user only (config
// files and key files alike).
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
}

// WriteConfig writes cfg as llm-prober.yml into a new temporary directory,
// with files (name → content) beside it, such as the key file an
// api_key_file names, and returns the config's path.
func WriteConfig(t testing.TB, cfg string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		WriteFile(t, filepath.Join(dir, name), content)
	}
	path := filepath.Join(dir, "llm-prober.yml")
	WriteFile(t, path, cfg)
	return path
}

const modulePath = "github.com/llm-prober/llm-prober"

var root struct {
	once sync.Once
	dir  string
	err  string
}

// RepoRoot is the module's root directory: the nearest directory above the
// test's working directory (its package directory) whose go.mod declares
// this module.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root.once.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			root.err = err.Error()
			return
		}
		for {
			if declaresModule(filepath.Join(dir, "go.mod")) {
				root.dir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				root.err = "no go.mod of module " + modulePath + " in any directory above the working directory"
				return
			}
			dir = parent
		}
	})
	if root.err != "" {
		t.Fatalf("looking for the repository root: %s", root.err)
	}
	return root.dir
}

// declaresModule reports whether the go.mod at path is this module's.
func declaresModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}

// RecordInputs reads every file of the repository with one of the given
// extensions (".go", ".yml", ...), leaving out hidden directories and
// testdata. go test caches a test's result keyed on the files the test
// process opened; what a child process reads (a go build, Prometheus
// loading rules) is not recorded, so a test that builds or runs something
// from the sources calls this to rerun when they change.
func RecordInputs(t testing.TB, exts ...string) {
	t.Helper()
	top := RepoRoot(t)
	err := filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != top && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(exts, filepath.Ext(path)) {
			_, err := os.ReadFile(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the sources for go test's cache: %v", err)
	}
}
