package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repo reads every Markdown file of the repository once per test.
func repo(t *testing.T) (root string, docs map[string]*Doc) {
	t.Helper()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	docs = map[string]*Doc{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = Parse(f, string(b))
	}
	for _, must := range []string{"README.md", "docs/architecture.md", "docs/configuration.md"} {
		if docs[must] == nil {
			t.Fatalf("%s not found under %s: the checks below would pass on nothing", must, root)
		}
	}
	return root, docs
}

// TestFencesClose: a fence left open renders the rest of the page as code.
func TestFencesClose(t *testing.T) {
	_, docs := repo(t)
	for _, d := range docs {
		for _, p := range d.Problems {
			t.Errorf("%s: %s", d.Path, p)
		}
	}
}

// TestLinksResolve: every relative link names a file or directory of the
// repository, and every #anchor a heading (or <a name>) of its page, by
// GitHub's anchor rules.
func TestLinksResolve(t *testing.T) {
	root, docs := repo(t)
	checked := 0
	for _, f := range sortedKeys(docs) {
		d := docs[f]
		for _, l := range d.Links {
			if External(l.Dest) || l.Dest == "" {
				continue
			}
			checked++
			target, frag, _ := strings.Cut(l.Dest, "#")
			targetDoc := d
			if target != "" {
				rel := path.Clean(path.Join(path.Dir(f), target))
				if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(target) {
					t.Errorf("%s:%d: link %q leaves the repository; link inside it or use a full URL", f, l.Line, l.Dest)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", f, l.Line, l.Dest, rel)
					continue
				}
				targetDoc = docs[rel]
			}
			if frag == "" {
				continue
			}
			if targetDoc == nil {
				if !strings.HasSuffix(target, ".md") {
					continue // an anchor into a non-Markdown file (a line, say) is GitHub's
				}
				t.Errorf("%s:%d: link %q: anchor into a page that is not checked", f, l.Line, l.Dest)
				continue
			}
			if !targetDoc.Anchors[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s (a heading swallowed by an open code fence has none); headings there: %s",
					f, l.Line, l.Dest, targetDoc.Path, frag, nearAnchors(targetDoc, frag))
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links checked: the link parser is broken", checked)
	}
}

// nearAnchors lists the anchors sharing a word with frag, to point at the
// heading a link meant.
func nearAnchors(d *Doc, frag string) string {
	var near []string
	for _, h := range d.Headings {
		for _, w := range strings.FieldsFunc(frag, func(r rune) bool { return r == '-' }) {
			if len(w) > 3 && strings.Contains(h.Anchor, w) {
				near = append(near, "#"+h.Anchor)
				break
			}
		}
	}
	if len(near) == 0 {
		return "none alike"
	}
	return strings.Join(near, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// goFileRe finds the Go file names in a row of architecture.md's table:
// "probe.go", "kubetest/kubetest.go", "metrics*.go".
var goFileRe = regexp.MustCompile(`[\w./*-]+\.go\b`)

// archRow is one row of architecture.md's "Package by package" table: the
// directories its first cell names and the row's whole text.
type archRow struct {
	dirs []string
	text string
	line int
}

func archRows(t *testing.T, d *Doc, text string) []archRow {
	t.Helper()
	var rows []archRow
	in := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.Contains(line, "Package by package")
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		var dirs []string
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			dirs = append(dirs, strings.TrimSuffix(m[1], "/"))
		}
		rows = append(rows, archRow{dirs: dirs, text: line, line: i + 1})
	}
	if len(rows) < 10 {
		t.Fatalf("%s: found %d rows in the \"Package by package\" table: the table moved or its format changed", d.Path, len(rows))
	}
	return rows
}

// TestArchitectureNamesEveryFile: README promises that docs/architecture.md
// maps every file to its stage. Each non-test Go file must be named in the
// row of the deepest directory that holds it (by base name, by its path
// below that directory, or by a glob such as metrics*.go), so a file added
// without a word in the map fails here.
func TestArchitectureNamesEveryFile(t *testing.T) {
	root, docs := repo(t)
	d := docs["docs/architecture.md"]
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := archRows(t, d, string(b))
	files, err := GoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d Go files found under %s", len(files), root)
	}
	for _, f := range files {
		dir := path.Dir(f)
		var row *archRow
		best := ""
		for i := range rows {
			for _, rd := range rows[i].dirs {
				if (dir == rd || strings.HasPrefix(dir, rd+"/")) && len(rd) > len(best) {
					row, best = &rows[i], rd
				}
			}
		}
		if row == nil {
			t.Errorf("%s: its directory %s/ has no row in docs/architecture.md's \"Package by package\" table; add one saying what it is for", f, dir)
			continue
		}
		below := strings.TrimPrefix(f, best+"/")
		named := false
		for _, name := range goFileRe.FindAllString(row.text, -1) {
			if name == below || name == f || (!strings.Contains(name, "/") && !strings.Contains(below, "/") && matchName(name, below)) ||
				(strings.Contains(below, "/") && path.Base(below) == name && strings.Contains(row.text, path.Dir(below)+"/")) {
				named = true
				break
			}
		}
		if !named {
			t.Errorf("%s is not named in docs/architecture.md (line %d, the `%s/` row): add %q there with what it does", f, row.line, best, below)
		}
	}
}

func matchName(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// TestReadmeListsEveryEndpoint: every path the daemon's HTTP mux serves
// (mux.Handle and mux.HandleFunc in cmd/llm-prober and status) is a row of
// README's endpoint table.
func TestReadmeListsEveryEndpoint(t *testing.T) {
	root, _ := repo(t)
	routes := muxRoutes(t, root, "cmd/llm-prober", "status")
	if len(routes) < 5 {
		t.Fatalf("found only %d routes (%v): the route scan is broken", len(routes), routes)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.Contains(strings.ToLower(line), "endpoints")
			continue
		}
		if m := regexp.MustCompile("^\\| `(/[^`]*)`").FindStringSubmatch(line); in && m != nil {
			p, _, _ := strings.Cut(m[1], "?")
			listed[p] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("README.md: no endpoint table (a heading containing \"Endpoints\" followed by rows | `/path` | … |)")
	}
	for _, r := range sortedKeys(routes) {
		if !listed[r] {
			t.Errorf("README.md's endpoint table does not list %s, which %s serves: add a row saying what it answers", r, routes[r])
		}
	}
}

// routeExprs are the non-literal patterns the daemon registers, with the
// path they default to (the one the docs name).
var routeExprs = map[string]string{
	"d.opts.paths.Telemetry": "/metrics",
}

// muxRoutes finds the patterns registered on a ServeMux named mux in the
// non-test Go files of dirs: "GET /probes/{target}/{probe}" →
// "/probes/{target}/{probe}", "GET /{$}" → "/".
func muxRoutes(t *testing.T, root string, dirs ...string) map[string]string {
	t.Helper()
	routes := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range matches {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
					return true
				}
				if recv, ok := sel.X.(*ast.Ident); !ok || recv.Name != "mux" {
					return true
				}
				where := fset.Position(call.Pos()).String()
				where = strings.TrimPrefix(where, root+string(filepath.Separator))
				var pattern string
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					pattern, err = strconv.Unquote(a.Value)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
				default:
					expr := exprString(a)
					p, ok := routeExprs[expr]
					if !ok {
						t.Errorf("%s: route %s is not a string literal; add it to routeExprs in this test with the path it defaults to", where, expr)
						return true
					}
					pattern = p
				}
				if _, p, ok := strings.Cut(pattern, " "); ok {
					pattern = p // method
				}
				pattern = strings.TrimSuffix(pattern, "{$}")
				if pattern == "" {
					pattern = "/"
				}
				routes[pattern] = where
				return true
			})
		}
	}
	return routes
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	default:
		return "?"
	}
}
