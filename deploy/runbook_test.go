package deploy

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const runbookURL = "https://github.com/llm-prober/llm-prober/blob/main/docs/runbook.md#"

// githubSlug is the anchor GitHub gives a Markdown heading.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// runbookAnchors returns the anchors of docs/runbook.md's headings and the
// in-page links it makes.
func runbookAnchors(t *testing.T) (anchors map[string]bool, links []string, doc []byte) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors = map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		if h, ok := strings.CutPrefix(sc.Text(), "## "); ok {
			anchors[githubSlug(h)] = true
		}
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllSubmatch(doc, -1) {
		links = append(links, string(m[1]))
	}
	return anchors, links, doc
}

// TestRunbookCoversEveryAlert: every alert's runbook_url points at a
// section of docs/runbook.md named after the alert, the section the rules
// file refers to exists, and the runbook's own links resolve.
func TestRunbookCoversEveryAlert(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	anchors, links, _ := runbookAnchors(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			want := runbookURL + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: docs/runbook.md has no section \"## %s\"", r.Alert, r.Alert)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d alerts found in %s", n, RulesFile)
	}
	if !bytes.Contains(b, []byte(`docs/runbook.md, "Sizing a probe's rate"`)) || !anchors["sizing-a-probes-rate-against-its-slo"] {
		t.Error(`the rules file's reference to "Sizing a probe's rate" in docs/runbook.md does not resolve`)
	}
	for _, l := range links {
		if !anchors[l] {
			t.Errorf("docs/runbook.md links to #%s, which is no section of it", l)
		}
	}
}

func TestGithubSlug(t *testing.T) {
	for in, want := range map[string]string{
		"LLMProbeFailing":                       "llmprobefailing",
		"Sizing a probe's rate against its SLO": "sizing-a-probes-rate-against-its-slo",
	} {
		if got := githubSlug(in); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", in, got, want)
		}
	}
}
