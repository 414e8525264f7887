package collector

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fixtureKind is the server kind of a fixture under testdata/servers: the
// file name up to the first '-' or '.' (vllm-0.8.prom is vllm).
func fixtureKind(path string) string {
	name := filepath.Base(path)
	if i := strings.IndexAny(name, "-."); i >= 0 {
		name = name[:i]
	}
	return name
}

// TestServerFixtures normalises every exposition under testdata/servers —
// each copies one server's names, labels and text format from its source
// (the header of each file says which) — with the kind given and with
// auto, and compares the result with the .want file beside it. -update
// rewrites the .want files; read the diff.
func TestServerFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "servers", "*.prom"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			kind := fixtureKind(f)
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			detected, lines := norm(t, KindAuto, string(body), false)
			if detected != kind {
				t.Errorf("auto detected %q, want %s", detected, kind)
			}
			_, explicit := norm(t, kind, string(body), false)
			if strings.Join(explicit, "\n") != strings.Join(lines, "\n") {
				t.Errorf("kind %s and auto differ:\n%s\n--\n%s", kind, strings.Join(explicit, "\n"), strings.Join(lines, "\n"))
			}
			got := strings.Join(lines, "\n") + "\n"
			want := strings.TrimSuffix(f, ".prom") + ".want"
			if *update {
				if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := os.ReadFile(want)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(w) {
				t.Errorf("normalised %s differs from %s:\n%s", f, want, got)
			}
		})
	}
}

// TestServerRulesCovered: every row of the normalisation table supplies a
// value for some fixture under testdata/servers of its kind, so no row is
// documented in docs/servers.md without the server's own bytes behind it.
func TestServerRulesCovered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "servers", "*.prom"))
	if err != nil {
		t.Fatal(err)
	}
	n := newNormaliser()
	fired := map[string]map[int][]string{}
	for _, f := range files {
		kind := fixtureKind(f)
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := n.normalise(body, false, kind)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if fired[kind] == nil {
			fired[kind] = map[int][]string{}
		}
		for _, s := range res.samples {
			fired[kind][s.rule] = append(fired[kind][s.rule], filepath.Base(f))
		}
	}
	var kinds []string
	for kind := range n.rules {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		for i, r := range n.rules[kind] {
			if len(fired[kind][i]) == 0 {
				var srcs []string
				for _, s := range r.sources {
					srcs = append(srcs, s.metric)
				}
				t.Errorf("%s row %d (%s{%s} ← %s) supplies no value in any testdata/servers/%s*.prom fixture",
					kind, i, r.out, r.extraValue, strings.Join(srcs, ", "), kind)
			}
		}
	}
}
