package main

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestBuildVersion: an unstamped build takes a release's module version,
// and otherwise the VERSION file, never "".
func TestBuildVersion(t *testing.T) {
	for _, c := range []struct {
		main, file, want string
	}{
		{"v0.2.0", "0.1.0\n", "0.2.0"},                               // go install …@v0.2.0
		{"(devel)", "0.1.0\n", "0.1.0"},                              // go build, no VCS
		{"v0.0.0-20261128170943-0123456789ab", "0.1.0\n", "0.1.0"},   // untagged commit
		{"v0.1.1-0.20261128170943-0123456789ab", "0.1.0\n", "0.1.0"}, // after a tag
		{"v0.2.0+dirty", "0.1.0\n", "0.1.0"},                         // tagged, but changed
		{"", "", "unknown"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Version: c.main}}
		if got := buildVersion(info, c.file); got != c.want {
			t.Errorf("buildVersion(%q, %q) = %q, want %q", c.main, c.file, got, c.want)
		}
	}
	if got := buildVersion(nil, "0.1.0"); got != "0.1.0" {
		t.Errorf("without build info: %q, want the VERSION file's", got)
	}
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.time", Value: "2026-11-28T17:09:43Z"}}}
	if got := buildDate(info); got != "20261128-17:09:43" {
		t.Errorf("buildDate = %q, want make build's format", got)
	}
}

// TestPlainBuildHasVersion: a binary from a plain go build (no -ldflags)
// prints the VERSION file's version, not an empty one.
func TestPlainBuildHasVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildBinary(t)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if want := "llm-prober, version " + strings.TrimSpace(string(b)) + " ("; !strings.Contains(string(out), want) {
		t.Errorf("--version lacks %q:\n%s", want, out)
	}
}
