package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
)

// A recipe is an example's "Try it locally" commands, written in its
// comments for users to paste: a simulator and a probe against it.
type recipe struct {
	simulate, probe []string // arguments after "llm-prober"
}

var (
	// recipeLine is one command of a recipe in an example's comments.
	recipeLine = regexp.MustCompile(`(?m)^#\s+llm-prober ((simulate|probe)\b[^\n]*?)(\s+&)?\s*$`)
	// releaseTimeout shortens a cancellation probe's wait for a leaked
	// slot (30s in the example) so that the recipes run in seconds.
	releaseTimeout = regexp.MustCompile(`release_timeout: *[0-9a-z]+`)
)

// examplesWithRecipes are the examples that must keep a runnable recipe:
// a recipe that a parser can no longer find is a broken one.
var examplesWithRecipes = []string{
	"cancellation.yml", "ollama.yml", "prefix-cache.yml", "tgi.yml", "triton-generate.yml", "triton-sidecar.yml",
}

// parseRecipe finds the recipe in an example's text; ok is false when it
// has none.
func parseRecipe(t *testing.T, name, text string) (r recipe, ok bool) {
	t.Helper()
	for _, m := range recipeLine.FindAllStringSubmatch(text, -1) {
		if strings.ContainsAny(m[1], `"'\`) {
			t.Errorf("%s: recipe line %q quotes or escapes; keep recipes to plain words so that this test runs them as written", name, m[1])
		}
		args := strings.Fields(m[1])
		switch args[0] {
		case "simulate":
			if r.simulate != nil {
				t.Errorf("%s: two simulate commands in its comments", name)
			}
			r.simulate = args
		case "probe":
			if r.probe != nil {
				t.Errorf("%s: two probe commands in its comments", name)
			}
			r.probe = args
		}
	}
	if (r.simulate == nil) != (r.probe == nil) {
		t.Errorf("%s: a recipe needs both a simulate and a probe command, has %q and %q", name, r.simulate, r.probe)
		return r, false
	}
	return r, r.simulate != nil
}

// flagValue returns the value of --name in args ("--name v" or
// "--name=v"), and def when it is not there.
func flagValue(args []string, name, def string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return def
}

// setFlag returns args with --name set to v, replacing the value given.
func setFlag(args []string, name, v string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "--"+name+"=") {
			continue
		}
		if a == "--"+name {
			i++
			continue
		}
		out = append(out, a)
	}
	return append(out, "--"+name+"="+v)
}

// TestExampleRecipes runs every example's "Try it locally" recipe against
// the simulator: the simulate command as written (on free ports instead of
// the fixed ones, which the example's addresses follow), then the probe
// command, which must exit 0. A recipe that does not work as pasted fails
// here rather than for the first user who tries it.
func TestExampleRecipes(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	found := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := parseRecipe(t, name, string(b))
		if !ok {
			if regexp.MustCompile(`(?mi)^#.*\btry it\b`).Match(b) {
				t.Errorf("%s: says \"Try it\" but has no recipe (a line `#   llm-prober simulate …` and one `#   llm-prober probe …`)", name)
			}
			continue
		}
		found[name] = true
		t.Run(strings.TrimSuffix(name, ".yml"), func(t *testing.T) {
			runRecipe(t, "examples/"+name, string(b), r)
		})
	}
	for _, name := range examplesWithRecipes {
		if !found[name] {
			t.Errorf("examples/%s: its recipe is gone or cannot be parsed", name)
		}
	}
}

// runRecipe runs one example's recipe; path is the example's path from
// the repository root, as the recipe names it.
func runRecipe(t *testing.T, path, text string, r recipe) {
	if got := flagValue(r.probe, "config.file", ""); got != path {
		t.Fatalf("the probe command reads --config.file %q, want %q (run from the repository root)", got, path)
	}
	// The simulator's addresses, as the recipe gives them, move to free
	// ports; the example's URLs and addresses move with them.
	sim := r.simulate[1:]
	moved := map[string]string{}
	for _, l := range []struct{ flag, def string }{
		{"listen", simulator.DefaultListenAddress},
		{"grpc-listen", simulator.DefaultGRPCListenAddress},
	} {
		addr := flagValue(sim, l.flag, l.def)
		if addr == "" {
			continue
		}
		free := testutil.FreeAddr(t)
		moved[addr] = free
		sim = setFlag(sim, l.flag, free)
	}
	cfg := text
	for from, to := range moved {
		_, port, err := net.SplitHostPort(from)
		if err != nil {
			t.Fatalf("simulator address %q: %v", from, err)
		}
		for _, host := range []string{"127.0.0.1", "localhost"} {
			cfg = strings.ReplaceAll(cfg, host+":"+port, to)
		}
	}
	cfg = releaseTimeout.ReplaceAllString(cfg, "release_timeout: 2s")
	cfgPath := filepath.Join(t.TempDir(), filepath.Base(path))
	testutil.WriteFile(t, cfgPath, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	var simOut testutil.SyncBuffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if code := run(ctx, append([]string{"simulate"}, sim...), &simOut, &simOut); code != 0 {
			t.Errorf("llm-prober %s: exit %d\n%s", strings.Join(sim, " "), code, simOut.String())
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	testutil.WaitFor(t, "the simulator to listen", 10*time.Second, func() bool {
		for _, addr := range moved {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return false
			}
			c.Close()
		}
		return true
	})

	probeArgs := setFlag(r.probe, "config.file", cfgPath)
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if code := run(pctx, probeArgs, &stdout, &stderr); code != 0 {
		t.Errorf("llm-prober %s: exit %d\nstdout:\n%s\nstderr:\n%s\nsimulator:\n%s",
			strings.Join(r.probe, " "), code, stdout.String(), stderr.String(), simOut.String())
	}
	t.Logf("%s: probe ran in %v", path, time.Since(start).Round(time.Millisecond))
}

// TestExamplePrintReloads: check-config --print's output of every example
// is itself a configuration check-config accepts, printed the same way
// again, so that a printed configuration can be saved and used (beside
// the original: file paths stay relative to it).
func TestExamplePrintReloads(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples")); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	print := func(f string) (string, error) {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check-config", "--print", f}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			return "", fmt.Errorf("check-config --print: exit %d, stderr:\n%s", code, stderr.String())
		}
		// The header names the file printed.
		_, body, _ := strings.Cut(stdout.String(), "\n")
		return body, nil
	}
	for _, f := range files {
		name := filepath.Base(f)
		first, err := print(f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		printed := filepath.Join(dir, "printed-"+name)
		testutil.WriteFile(t, printed, first)
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check-config", printed}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("%s: its printed configuration does not load: exit %d\n%s", name, code, stderr.String())
			continue
		}
		second, err := print(printed)
		if err != nil {
			t.Errorf("%s printed: %v", name, err)
			continue
		}
		if second != first {
			t.Errorf("%s: printing the printed configuration changes it:\nfirst:\n%s\nsecond:\n%s", name, first, second)
		}
	}
}
