// Package docscheck reads the project's Markdown the way GitHub renders it,
// closely enough to check it in `make test`: code fences that close,
// headings and the anchors GitHub gives them, links outside code, and the
// code blocks themselves (the command lines the docs show). A broken fence
// turns the rest of a page into code and every heading in it into a dead
// anchor; these checks catch that before a reader does.
package docscheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// FindRoot returns the nearest directory at or above dir holding go.mod:
// the repository root the docs' relative links start from.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// skipDir says which directories hold no project docs: version control,
// test inputs, and anything hidden.
func skipDir(name string) bool {
	return name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && name != ".")
}

// MarkdownFiles lists every .md file under root (slash-separated, relative
// to root, sorted), test inputs and hidden directories left out.
func MarkdownFiles(root string) ([]string, error) {
	return files(root, func(name string) bool { return strings.HasSuffix(name, ".md") })
}

// GoFiles lists every non-test .go file under root (slash-separated,
// relative to root, sorted), test inputs and hidden directories left out.
func GoFiles(root string) ([]string, error) {
	return files(root, func(name string) bool {
		return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
	})
}

// files lists the files under root whose name keep accepts
// (slash-separated, relative to root, sorted), skipping what skipDir
// says holds no project files.
func files(root string, keep func(name string) bool) ([]string, error) {
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if keep(d.Name()) {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(found)
	return found, err
}

// Block is one fenced code block.
type Block struct {
	Lang  string   // the info string's first word, lower case; "" for none
	Line  int      // 1-based line of the opening fence
	Lines []string // the content, fences excluded
}

// Link is one Markdown link or image outside code.
type Link struct {
	Line int
	Dest string // as written, title removed
}

// Doc is one Markdown file as GitHub would render it, for these checks.
type Doc struct {
	Path     string
	Blocks   []Block
	Anchors  map[string]bool // every heading's anchor and every explicit <a name|id>
	Headings []Heading
	Links    []Link
	// Problems are defects found while reading: "line N: what".
	Problems []string
}

// Heading is one ATX heading outside code.
type Heading struct {
	Line   int
	Level  int
	Text   string
	Anchor string
}

var (
	fenceRe   = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*([^`]*)$")
	headingRe = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$`)
	// Inline links and images: [text](dest "title"); dest may be <…>.
	linkRe = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// Reference definitions: [label]: dest
	refDefRe    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlAnchorR = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// Parse reads a Markdown document. path is only used in messages.
func Parse(path, text string) *Doc {
	d := &Doc{Path: path, Anchors: map[string]bool{}}
	seen := map[string]int{}
	lines := strings.Split(text, "\n")
	var open *Block
	var openFence string
	for i, line := range lines {
		n := i + 1
		if open != nil {
			if m := fenceRe.FindStringSubmatch(line); m != nil && m[1][0] == openFence[0] &&
				len(m[1]) >= len(openFence) && strings.TrimSpace(m[2]) == "" {
				d.Blocks = append(d.Blocks, *open)
				open = nil
				continue
			}
			open.Lines = append(open.Lines, line)
			continue
		}
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			lang := strings.ToLower(firstField(m[2]))
			open = &Block{Lang: lang, Line: n}
			openFence = m[1]
			continue
		}
		if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			// Possibly an indented code block or a list item's
			// continuation; links there are still links in the latter,
			// and a heading is never indented this far.
			d.addLinks(n, line)
			continue
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			a := Slug(m[2])
			if k := seen[a]; k > 0 {
				seen[a] = k + 1
				a = fmt.Sprintf("%s-%d", a, k)
			} else {
				seen[a] = 1
			}
			d.Anchors[a] = true
			d.Headings = append(d.Headings, Heading{Line: n, Level: len(m[1]), Text: m[2], Anchor: a})
		}
		for _, m := range htmlAnchorR.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		d.addLinks(n, line)
	}
	if open != nil {
		d.Problems = append(d.Problems, fmt.Sprintf("line %d: code fence %q opened here is never closed: everything after it renders as code", open.Line, openFence))
	}
	return d
}

func (d *Doc) addLinks(n int, line string) {
	if m := refDefRe.FindStringSubmatch(line); m != nil {
		d.Links = append(d.Links, Link{Line: n, Dest: strings.Trim(m[1], "<>")})
		return
	}
	// Code spans hold text, not links: `[x](y)` inside backticks is code.
	line = stripCodeSpans(line)
	for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
		d.Links = append(d.Links, Link{Line: n, Dest: strings.Trim(m[1], "<>")})
	}
}

// Slug is the anchor GitHub gives a heading: its text without markup,
// lower-cased, every character but letters, digits, spaces, hyphens and
// underscores removed, and spaces turned into hyphens.
func Slug(heading string) string {
	// Links keep their text; code spans and emphasis lose their markers
	// (punctuation, removed below).
	heading = linkRe.ReplaceAllStringFunc(heading, func(s string) string {
		if i := strings.Index(s, "]("); i >= 0 {
			return strings.TrimPrefix(s[:i], "!")[1:]
		}
		return s
	})
	heading = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// External says whether a link leaves the repository (a URL with a scheme,
// or mail).
func External(dest string) bool {
	if strings.HasPrefix(dest, "//") {
		return true
	}
	if i := strings.Index(dest, ":"); i > 0 {
		scheme := dest[:i]
		for _, r := range scheme {
			if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '+' || r == '-' || r == '.') {
				return false
			}
		}
		return !strings.Contains(dest[:i], "/")
	}
	return false
}

// Command is one `llm-prober …` command line found in a code block.
type Command struct {
	Path string
	Line int      // 1-based line of the command's first line
	Text string   // as written, continuation lines joined
	Args []string // the arguments after the program name
	// Shell says the block is marked as shell (sh, bash, shell, console,
	// zsh): every line there that runs llm-prober is a command. In other
	// blocks such a line may be output ("llm-prober bench: no level …").
	Shell bool
}

func shellLang(lang string) bool {
	switch lang {
	case "sh", "bash", "shell", "console", "zsh", "shell-session":
		return true
	}
	return false
}

// Commands returns every command line in d's code blocks that runs
// llm-prober (as `llm-prober`, `./llm-prober` or any path ending in
// /llm-prober), after an optional `$ ` prompt; backslash continuations are
// joined, and the line ends at a comment, a pipe, a redirection or `;`/`&&`.
func (d *Doc) Commands() ([]Command, []string) {
	var cmds []Command
	var problems []string
	for _, b := range d.Blocks {
		for i := 0; i < len(b.Lines); i++ {
			start := i
			text := strings.TrimSpace(b.Lines[i])
			for strings.HasSuffix(text, `\`) && i+1 < len(b.Lines) {
				i++
				text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(b.Lines[i])
			}
			text = strings.TrimPrefix(text, "$ ")
			if first := firstField(text); first != "llm-prober" && !strings.HasSuffix(first, "/llm-prober") {
				continue
			}
			line := b.Line + 1 + start
			words, err := ShellWords(text)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %v", d.Path, line, err))
				continue
			}
			cmds = append(cmds, Command{Path: d.Path, Line: line, Text: text, Args: words[1:], Shell: shellLang(b.Lang)})
		}
	}
	return cmds, problems
}

// ShellWords splits a command line as a POSIX shell would for these
// checks: single and double quotes, backslash escapes, and an end at an
// unquoted #-comment, |, ;, &, < or >. Variables are left as written.
func ShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, fmt.Errorf("unterminated single quote in %q", s)
			}
			cur.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) {
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, fmt.Errorf("unterminated double quote in %q", s)
			}
			inWord, i = true, j
		case r == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case r == ' ' || r == '\t':
			flush()
		case r == '<' || r == '>':
			// A redirection ends the arguments; "2>" is no argument.
			if inWord && strings.Trim(cur.String(), "0123456789") == "" {
				cur.Reset()
				inWord = false
			}
			flush()
			return words, nil
		case r == '#' && !inWord, r == '|', r == ';', r == '&':
			flush()
			return words, nil
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// stripCodeSpans removes `code spans` from a line: a run of n backticks up
// to the next run of exactly n. An unmatched run is literal text.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(line) && line[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		i = end
	}
	return b.String()
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
