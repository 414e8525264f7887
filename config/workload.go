package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Prompts are the inputs a workload sends: inline, from a JSONL file, or
// synthetic text of a chosen length. Exactly one source is set.
type Prompts struct {
	// System is sent as a system message before every prompt that has none.
	System    string     `yaml:"system,omitempty"`
	Inline    []Prompt   `yaml:"inline,omitempty"`
	File      string     `yaml:"file,omitempty"`
	Synthetic *Synthetic `yaml:"synthetic,omitempty"`
	// Selection is sequential (round robin) or random.
	Selection string `yaml:"selection"`
	// Seed makes random selection and synthetic lengths reproducible.
	Seed *int64 `yaml:"seed,omitempty"`
	// Loaded are the prompts read from File at load time, so a broken
	// file fails the load (and a reload) instead of the probes.
	Loaded []Prompt `yaml:"-"`
}

// Prompt is a plain text prompt or a list of chat messages.
type Prompt struct {
	Text     string    `yaml:"-"`
	Messages []Message `yaml:"messages,omitempty"`
}

// Message is one chat message.
type Message struct {
	Role    string `yaml:"role" json:"role"`
	Content string `yaml:"content" json:"content"`
}

func (p *Prompt) fromScalar(n *yaml.Node) error {
	p.Text = n.Value
	return nil
}

// MarshalYAML prints a text prompt as the plain string it was written as.
func (p Prompt) MarshalYAML() (any, error) {
	if p.Messages == nil {
		return p.Text, nil
	}
	return map[string]any{"messages": p.Messages}, nil
}

// Synthetic prompts are generated text of about InputTokens tokens.
type Synthetic struct {
	InputTokens TokenCount `yaml:"input_tokens"`
}

// TokenCount is a length drawn per request from a normal distribution;
// a plain number means that length every time.
type TokenCount struct {
	Mean   int `yaml:"mean"`
	Stddev int `yaml:"stddev"`
}

func (t *TokenCount) fromScalar(n *yaml.Node) error {
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return fmt.Errorf("want a whole number of tokens or {mean, stddev}, got %q", n.Value)
	}
	*t = TokenCount{Mean: v}
	return nil
}

// MaxTokens is the requested output length, drawn per request.
type MaxTokens struct {
	Distribution string `yaml:"distribution"`
	Mean         int    `yaml:"mean"`
	// Range is the relative width: uniform draws from mean·(1 ± range),
	// normal has a standard deviation of mean·range.
	Range float64 `yaml:"range,omitempty"`
	// Cap is an upper bound on every draw; 0 is none.
	Cap int `yaml:"cap,omitempty"`
	// Seed makes the draws reproducible.
	Seed *int64 `yaml:"seed,omitempty"`
}

func (m *MaxTokens) fromScalar(n *yaml.Node) error {
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return fmt.Errorf("want a whole number of tokens or {distribution, mean, range, cap}, got %q", n.Value)
	}
	*m = MaxTokens{Distribution: "constant", Mean: v}
	return nil
}

// Distributions of max_tokens.
func Distributions() []string { return []string{"constant", "uniform", "normal", "exponential"} }

// Selections of prompts.
func Selections() []string { return []string{"sequential", "random"} }

// ChatRoles accepted in chat prompts.
func ChatRoles() []string { return []string{"system", "developer", "user", "assistant"} }

// DefaultRange is the relative width of uniform and normal max_tokens.
const DefaultRange = 0.3

const maxTokenCount = 1 << 20

func (p *Prompts) applyDefaults() {
	if len(p.Inline) == 0 && p.Synthetic == nil && p.File == "" {
		p.Inline = []Prompt{{Text: defaultPrompt}}
	}
	if p.Selection == "" {
		p.Selection = "sequential"
	}
}

func (m *MaxTokens) applyDefaults() {
	if m.Distribution == "" {
		m.Distribution = "constant"
	}
	if m.Mean == 0 {
		m.Mean = DefaultMaxTokens
	}
	if m.Range == 0 && (m.Distribution == "uniform" || m.Distribution == "normal") {
		m.Range = DefaultRange
	}
}

func (p *Prompts) validate(d *decoder, path string) {
	var sources []string
	if len(p.Inline) > 0 {
		sources = append(sources, "inline")
	}
	if p.File != "" {
		sources = append(sources, "file")
	}
	if p.Synthetic != nil {
		sources = append(sources, "synthetic")
	}
	if len(sources) > 1 {
		d.at(path+"."+sources[1], "set only one of inline, file or synthetic prompts; have %s", strings.Join(sources, " and "))
	}
	for i, pr := range p.Inline {
		validatePrompt(d, fmt.Sprintf("%s.inline[%d]", path, i), pr)
	}
	if s := p.Synthetic; s != nil {
		tc := s.InputTokens
		if tc.Mean < 1 || tc.Mean > maxTokenCount {
			d.at(path+".synthetic.input_tokens", "want 1 to %d tokens, got %d", maxTokenCount, tc.Mean)
		}
		if tc.Stddev < 0 || tc.Stddev > tc.Mean {
			d.at(path+".synthetic.input_tokens.stddev", "want 0 to the mean (%d), got %d", tc.Mean, tc.Stddev)
		}
	}
	if !slices.Contains(Selections(), p.Selection) {
		d.at(path+".selection", "unknown selection %q; want one of %s", p.Selection, strings.Join(Selections(), ", "))
	}
}

func validatePrompt(d *decoder, path string, pr Prompt) {
	if pr.Messages == nil {
		if strings.TrimSpace(pr.Text) == "" {
			d.at(path, "empty prompt")
		}
		return
	}
	if err := checkMessages(pr.Messages); err != nil {
		d.at(path+".messages", "%s", err)
	}
}

func checkMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("empty message list")
	}
	for i, m := range msgs {
		if !slices.Contains(ChatRoles(), m.Role) {
			return fmt.Errorf("message %d: unknown role %q; want one of %s", i, m.Role, strings.Join(ChatRoles(), ", "))
		}
		if strings.TrimSpace(m.Content) == "" {
			return fmt.Errorf("message %d: empty content", i)
		}
	}
	return nil
}

func (m *MaxTokens) validate(d *decoder, path string) {
	if !slices.Contains(Distributions(), m.Distribution) {
		d.at(path+".distribution", "unknown distribution %q; want one of %s", m.Distribution, strings.Join(Distributions(), ", "))
	}
	if m.Mean < 1 || m.Mean > maxTokenCount {
		d.at(path, "want 1 to %d tokens, got %d", maxTokenCount, m.Mean)
	}
	switch {
	case math.IsNaN(m.Range) || m.Range < 0:
		d.at(path+".range", "want a relative width of 0 or more, got %v", m.Range)
	case m.Range != 0 && (m.Distribution == "constant" || m.Distribution == "exponential"):
		d.at(path+".range", "range has no effect with distribution %s", m.Distribution)
	case m.Range > 1:
		d.at(path+".range", "range %v is wider than the mean itself; want at most 1", m.Range)
	}
	if m.Cap != 0 && (m.Cap < m.Mean || m.Cap > maxTokenCount) {
		d.at(path+".cap", "cap %d must lie between the mean (%d) and %d", m.Cap, m.Mean, maxTokenCount)
	}
}

// maxPromptFileBytes bounds a prompt file: every prompt is held in memory.
const maxPromptFileBytes = 64 << 20

// loadPromptFiles reads the JSONL prompt files (relative to the config
// file's directory), reporting each invalid line with its number.
func (c *Config) loadPromptFiles(d *decoder, dir string) {
	for _, name := range sortedNames(c.Workloads) {
		w := c.Workloads[name]
		if w == nil || w.Prompts.File == "" {
			continue
		}
		path := join(join("workloads", name), "prompts.file")
		f := w.Prompts.File
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		prompts, errs := readPromptFile(f)
		for _, e := range errs {
			if len(d.errs) >= maxErrors {
				break
			}
			e.Path = path
			if e.Line == 0 {
				// Not a problem of one line: point at the config key.
				e.File = d.file
				if n := d.lookup(path); n != nil {
					e.Line, e.Column = n.Line, n.Column
				}
			}
			d.errs = append(d.errs, e)
		}
		w.Prompts.Loaded = prompts
	}
}

// readPromptFile parses one JSONL file of {"input": "…", "output": "…"} or
// {"messages": [{"role", "content"}, …]} objects. Blank lines are skipped;
// other fields (ids, metadata) are ignored.
func readPromptFile(name string) ([]Prompt, []*Error) {
	fail := func(format string, args ...any) []*Error {
		return []*Error{{File: name, Msg: fmt.Sprintf(format, args...)}}
	}
	fh, err := os.Open(name)
	if err != nil {
		return nil, fail("cannot read prompt file: %v", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxPromptFileBytes+1))
	if err != nil {
		return nil, fail("cannot read prompt file: %v", err)
	}
	if len(data) > maxPromptFileBytes {
		return nil, fail("prompt file %s is larger than %d MiB", name, maxPromptFileBytes>>20)
	}
	var (
		prompts []Prompt
		errs    []*Error
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxPromptFileBytes)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		p, err := parsePromptLine(b)
		if err != nil {
			errs = append(errs, &Error{File: name, Line: line, Msg: err.Error()})
			if len(errs) >= maxErrors {
				break
			}
			continue
		}
		prompts = append(prompts, p)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &Error{File: name, Msg: fmt.Sprintf("cannot read prompt file: %v", err)})
	}
	if len(prompts) == 0 && len(errs) == 0 {
		return nil, fail("prompt file %s has no prompts", name)
	}
	return prompts, errs
}

func parsePromptLine(b []byte) (Prompt, error) {
	var rec struct {
		Input    *string         `json:"input"`
		Output   json.RawMessage `json:"output"`
		Messages []Message       `json:"messages"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Prompt{}, fmt.Errorf("invalid JSON: %v", err)
	}
	switch {
	case rec.Input != nil && rec.Messages != nil:
		return Prompt{}, fmt.Errorf("set either \"input\" or \"messages\", not both")
	case rec.Input != nil:
		if strings.TrimSpace(*rec.Input) == "" {
			return Prompt{}, fmt.Errorf("empty \"input\"")
		}
		return Prompt{Text: *rec.Input}, nil
	case rec.Messages != nil:
		if err := checkMessages(rec.Messages); err != nil {
			return Prompt{}, err
		}
		return Prompt{Messages: rec.Messages}, nil
	}
	return Prompt{}, fmt.Errorf(`want {"input": "…"} or {"messages": [{"role": "user", "content": "…"}]}`)
}
