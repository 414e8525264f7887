package main

import (
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestHelpEverywhere runs the built binary with --help, -h and help, and
// with --help after every command and `help` before it, the commands
// taken from the application itself so that a new one is covered as it
// is added. Each must exit 0 and list the flags it has: help is the first
// thing a new user types.
func TestHelpEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.BuildBinary(t)
	model := newCLI(io.Discard).app.Model()

	var topLevel []string
	for _, f := range model.Flags {
		if !f.Hidden {
			topLevel = append(topLevel, flagUsage(f))
		}
	}
	for _, c := range model.FlattenedCommands() {
		if !c.Hidden {
			topLevel = append(topLevel, c.Name)
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		checkHelp(t, bin, args, topLevel)
	}

	commands := model.FlattenedCommands()
	if len(commands) < 6 {
		t.Fatalf("only %d commands found in the application", len(commands))
	}
	for _, c := range commands {
		if c.Hidden {
			continue
		}
		want := []string{c.FullCommand}
		for _, f := range c.Flags {
			if !f.Hidden {
				want = append(want, flagUsage(f))
			}
		}
		path := strings.Fields(c.FullCommand)
		checkHelp(t, bin, append(path, "--help"), want)
		checkHelp(t, bin, append(path, "-h"), want)
		checkHelp(t, bin, append([]string{"help"}, path...), want)
	}
}

// flagUsage is how help shows a flag's name: kingpin writes a boolean
// flag as --[no-]name.
func flagUsage(f *kingpin.FlagModel) string {
	if f.IsBoolFlag() {
		return "--[no-]" + f.Name
	}
	return "--" + f.Name
}

func checkHelp(t *testing.T, bin string, args, want []string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Errorf("llm-prober %s: exit %d, want 0:\n%s", strings.Join(args, " "), exit.ExitCode(), out)
		return
	case err != nil:
		t.Fatalf("llm-prober %s: %v", strings.Join(args, " "), err)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("llm-prober %s: output does not list %s:\n%s", strings.Join(args, " "), w, out)
		}
	}
}
