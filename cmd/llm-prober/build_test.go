package main

import (
	"context"
	"debug/elf"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestStaticNonvmlBuild holds `make build-nonvml`'s promise: with
// CGO_ENABLED=0 and -tags nonvml the binary is fully static (no ELF
// interpreter, no shared libraries), so it runs in a scratch image, and it
// still starts. The default build links glibc for go-nvml's cgo; this is
// the one to use where no GPU will ever be.
func TestStaticNonvmlBuild(t *testing.T) {
	bin := testutil.BuildBinary(t, "-tags", "netgo,osusergo,nonvml")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("nonvml binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("nonvml binary imports shared libraries %v (%v)", libs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "llm-prober, version") {
		t.Errorf("--version: %v\n%s", err, out)
	}
}
