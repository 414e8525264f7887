package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestMakeBuildStampsBuildInfo builds the binary as the Makefile (and so
// the Dockerfile) does and checks that --version and llm_prober_build_info
// carry what the build stamped: the version, a revision, the branch, who
// built it when, and the build tags.
func TestMakeBuildStampsBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with make")
	}
	mk := testutil.RequireTool(t, "make", "LLM_PROBER_REQUIRE_MAKE", "install make")
	bin := filepath.Join(t.TempDir(), "llm-prober")
	build := exec.Command(mk, "build", "BINARY="+bin, "VERSION=9.9.9-buildinfo", "BRANCH=test-branch", "REVISION=0123abc")
	build.Dir = testutil.RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	for _, want := range []string{
		"version 9.9.9-buildinfo (branch: test-branch, revision: 0123abc)",
		"tags:             netgo,osusergo",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--version lacks %q:\n%s", want, out)
		}
	}
	for _, re := range []string{`build user:\s+\S+@\S+`, `build date:\s+\d{8}-\d\d:\d\d:\d\d`} {
		if !regexp.MustCompile(re).Match(out) {
			t.Errorf("--version does not match %s:\n%s", re, out)
		}
	}

	cfg := testutil.WriteConfig(t, `targets:
  - name: nowhere
    protocol: openai_chat
    url: http://127.0.0.1:1
    model: m
    probes: [{name: p, schedule: {every: 1h}}]
`, nil)
	addr := testutil.FreeAddr(t)
	p := testutil.StartProcess(t, "llm-prober", exec.Command(bin, "--config.file", cfg, "--web.listen-address", addr))
	p.WaitReady(t, "http://"+addr)
	info := testutil.Scrape(t, "http://"+addr).Series("llm_prober_build_info",
		"version", "9.9.9-buildinfo", "revision", "0123abc", "branch", "test-branch", "tags", "netgo,osusergo")
	if len(info) != 1 {
		t.Errorf("llm_prober_build_info with the stamped labels: %d series, want 1", len(info))
	}
}
