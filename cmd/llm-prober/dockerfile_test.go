package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// No Docker engine runs where the tests run, so the Dockerfile is held to
// its contract by reading it: multi-stage, built by `make build` (the same
// cgo build as the Makefile's), distroless nonroot with glibc, the default
// port.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	port := strings.TrimPrefix(defaultListenAddress, ":")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^FROM golang:1\.26\S* AS build$`),
		regexp.MustCompile(`(?m)^RUN make build `),
		// base, not static: the cgo binary and NVML need glibc.
		regexp.MustCompile(`(?m)^FROM gcr\.io/distroless/base-debian12:nonroot$`),
		regexp.MustCompile(`(?m)^USER nonroot$`),
		regexp.MustCompile(`(?m)^EXPOSE ` + port + `$`),
		regexp.MustCompile(`(?m)^VOLUME \["/etc/llm-prober"\]$`),
		regexp.MustCompile(`(?m)^ENTRYPOINT \["/bin/llm-prober"\]$`),
	} {
		if !want.MatchString(df) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n != 2 {
		t.Errorf("want a two-stage build, found %d FROM lines", n)
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatalf(".dockerignore missing: %v", err)
	}
	if !strings.Contains(string(ignore), ".git") {
		t.Error(".dockerignore should keep .git out of the build context")
	}
}

// TestImageDefaultStart runs the binary with the image's exact ENTRYPOINT
// and CMD, as `docker run` of the image without a mounted configuration
// does: it must exit at once, naming where the configuration belongs,
// rather than start and probe nothing.
func TestImageDefaultStart(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var entrypoint, cmd []string
	for _, line := range strings.Split(string(b), "\n") {
		for prefix, dst := range map[string]*[]string{"ENTRYPOINT ": &entrypoint, "CMD ": &cmd} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				if err := json.Unmarshal([]byte(rest), dst); err != nil {
					t.Fatalf("%s is not in exec (JSON) form: %v", strings.TrimSpace(prefix), err)
				}
			}
		}
	}
	if len(entrypoint) != 1 || entrypoint[0] != "/bin/llm-prober" || len(cmd) == 0 {
		t.Fatalf("ENTRYPOINT %q CMD %q", entrypoint, cmd)
	}
	if regexp.MustCompile(`(?m)^COPY .*\.ya?ml `).MatchString(string(b)) {
		t.Error("the image builds a configuration in: one that probes nothing real starts healthy and fails every probe")
	}
	const mounted = "/etc/llm-prober/llm-prober.yml"
	if _, err := os.Stat(mounted); err == nil {
		t.Skipf("%s exists on this machine; the image's default start cannot be reproduced", mounted)
	}
	bin := testutil.BuildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The listen address is the image's default too; nothing may bind it
	// before the configuration is read.
	out, err := exec.CommandContext(ctx, bin, cmd...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1; output:\n%s", err, out)
	}
	for _, want := range []string{
		"no configuration file at " + mounted,
		"mount a directory holding llm-prober.yml at /etc/llm-prober",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
