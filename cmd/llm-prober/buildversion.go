package main

import (
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/common/version"

	llmprober "github.com/llm-prober/llm-prober"
)

// pseudoVersion matches a Go pseudo-version's tail (v0.0.0-20261128170943-
// 0123456789ab), which the go command stamps on a build of an untagged
// commit: it names a commit, not a release.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}`)

// fillVersion completes the version stamp of a build that make build did
// not stamp (go build, go install): the version from the module's tag or
// the VERSION file, the date from the commit. The revision (with
// -modified for uncommitted changes) already comes from the VCS stamp,
// through prometheus/common/version. It runs once in main, before
// anything reads the stamp.
func fillVersion() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	if version.Version == "" {
		version.Version = buildVersion(info, llmprober.Version)
	}
	if version.BuildDate == "" {
		version.BuildDate = buildDate(info)
	}
}

// buildVersion is the version of an unstamped build: the module version
// when the go command built a tagged release (go install …@v0.2.0), the
// VERSION file otherwise.
func buildVersion(info *debug.BuildInfo, file string) string {
	if info != nil {
		v := info.Main.Version
		if v != "" && v != "(devel)" && !pseudoVersion.MatchString(v) && !strings.Contains(v, "+") {
			return strings.TrimPrefix(v, "v")
		}
	}
	if v := strings.TrimSpace(file); v != "" {
		return v
	}
	return "unknown"
}

// buildDate is the commit time of an unstamped build, in make build's
// format, "" when the build has no VCS stamp.
func buildDate(info *debug.BuildInfo) string {
	if info == nil {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.time" {
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				return t.UTC().Format("20060102-15:04:05")
			}
		}
	}
	return ""
}
