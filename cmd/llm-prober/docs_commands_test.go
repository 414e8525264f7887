package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/internal/docscheck"
)

// TestDocsCommandLinesParse: every `llm-prober …` command line in a code
// block of README.md or docs/*.md parses with the binary's own command line
// (newCLI): a renamed or removed flag, a misspelt command or a missing
// required flag in the docs fails here, not in a reader's shell.
func TestDocsCommandLinesParse(t *testing.T) {
	root, err := docscheck.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	var cmds []docscheck.Command
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		found, problems := docscheck.Parse(filepath.ToSlash(rel), string(b)).Commands()
		for _, p := range problems {
			t.Error(p)
		}
		cmds = append(cmds, found...)
	}
	commands := map[string]bool{}
	for _, c := range newCLI(io.Discard).app.Model().Commands {
		commands[c.Name] = true
	}
	checked := 0
	for _, c := range cmds {
		// Outside shell blocks, a line is taken for a command when it
		// goes on with a flag or a command name; "llm-prober bench: …"
		// or "llm-prober performance harness" is output.
		if !c.Shell && (len(c.Args) == 0 || !(strings.HasPrefix(c.Args[0], "-") || commands[c.Args[0]])) {
			continue
		}
		checked++
		var usage strings.Builder
		cli := newCLI(&usage)
		if _, err := cli.app.Parse(c.Args); err != nil {
			t.Errorf("%s:%d: %q does not parse: %v", c.Path, c.Line, c.Text, err)
		}
	}
	if checked < 10 {
		t.Fatalf("found only %d llm-prober command lines in the docs: the scan is broken", checked)
	}
	t.Logf("%d command lines parsed", checked)
}
