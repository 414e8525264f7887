package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// No Docker engine runs where the tests run, so the Dockerfile is held to
// its contract by reading it: multi-stage, built by `make build` (the same
// cgo-free build as the Makefile's), distroless nonroot, the default port.
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
		// base, not static: NVML is loaded through glibc's dynamic loader.
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
