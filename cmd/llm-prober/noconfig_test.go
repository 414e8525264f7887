package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoConfigMessage: the advice printed without a configuration names a
// file that exists, and its docker command has absolute paths on both
// sides of -v (Docker refuses relative ones) and mounts a directory
// holding the file name --config.file asks for.
func TestNoConfigMessage(t *testing.T) {
	if _, err := os.Stat("../../" + exampleConfig); err != nil {
		t.Fatalf("the message recommends %s: %v", exampleConfig, err)
	}
	mountRE := regexp.MustCompile(`docker run -v "\$\(pwd\)/([^:"]+):([^:"]+):ro"`)
	for _, c := range []struct{ configFile, wantDir, wantBase string }{
		{imageConfigFile, "/etc/llm-prober", "llm-prober.yml"},
		{"llm-prober.yml", "/etc/llm-prober", "llm-prober.yml"}, // relative: the image's place
		{"conf/prober.yml", "/etc/llm-prober", "llm-prober.yml"},
		{"/srv/prober/prober.yml", "/srv/prober", "prober.yml"},
	} {
		msg := noConfigMessage(c.configFile)
		if !strings.HasPrefix(msg, "llm-prober: no configuration file at "+c.configFile+", not starting.\n") {
			t.Errorf("%s: first line:\n%s", c.configFile, msg)
		}
		m := mountRE.FindStringSubmatch(msg)
		if m == nil {
			t.Errorf("%s: no docker -v with $(pwd) and an absolute container path:\n%s", c.configFile, msg)
			continue
		}
		if !filepath.IsAbs(m[2]) || m[2] != c.wantDir {
			t.Errorf("%s: mounted at %q, want %q", c.configFile, m[2], c.wantDir)
		}
		if !strings.Contains(msg, "mount a directory holding "+c.wantBase+" at "+c.wantDir) {
			t.Errorf("%s: does not say to mount a directory holding %s at %s:\n%s", c.configFile, c.wantBase, c.wantDir, msg)
		}
		// The host directory exists and holds the file, or the message
		// says to copy the example to the name asked for.
		if _, err := os.Stat(filepath.Join("../..", m[1], c.wantBase)); err != nil &&
			!strings.Contains(msg, "copy "+exampleConfig+" to "+c.wantBase) {
			t.Errorf("%s: %s/%s does not exist and the message does not say to copy it:\n%s", c.configFile, m[1], c.wantBase, msg)
		}
	}
}

// TestNoConfigMessagePrinted: the daemon prints it, exit status 1.
func TestNoConfigMessagePrinted(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "llm-prober.yml")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--config.file", missing, "--web.listen-address", "127.0.0.1:0"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), noConfigMessage(missing)) {
		t.Errorf("exit %d, stderr:\n%s\nwant:\n%s", code, stderr.String(), noConfigMessage(missing))
	}
}
