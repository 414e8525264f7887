package docscheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"shared_prefix":                                            "shared_prefix",
		"1.11 Reasoning models":                                    "111-reasoning-models",
		"2. Model-server metrics (`llm_server_*`)":                 "2-model-server-metrics-llm_server_",
		"Sharded central":                                          "sharded-central",
		"The [monitoring](x.md) mixin":                             "the-monitoring-mixin",
		"llama.cpp mode (`openai_server: llamacpp`)":               "llamacpp-mode-openai_server-llamacpp",
		"Reasoning models and rate-limit headroom: nothing to set": "reasoning-models-and-rate-limit-headroom-nothing-to-set",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// The defect of issue 29: a YAML example whose fence opens and a heading
// that lands inside it. The heading has no anchor, so links to it fail.
func TestParseHeadingInsideFence(t *testing.T) {
	d := Parse("c.md", strings.Join([]string{
		"## cancel",
		"```yaml",
		"workloads:",
		"### session",
		"text",
		"```",
		"### shared_prefix",
		"[s](#session) [p](#shared_prefix) `[no](#link)` ![i](img.png \"title\")",
		"[ref]: other.md#x",
	}, "\n"))
	if d.Anchors["session"] {
		t.Error("a heading inside a code block got an anchor")
	}
	if !d.Anchors["cancel"] || !d.Anchors["shared_prefix"] {
		t.Errorf("anchors = %v, want cancel and shared_prefix", d.Anchors)
	}
	var dests []string
	for _, l := range d.Links {
		dests = append(dests, l.Dest)
	}
	if want := []string{"#session", "#shared_prefix", "img.png", "other.md#x"}; !reflect.DeepEqual(dests, want) {
		t.Errorf("links = %q, want %q", dests, want)
	}
	if len(d.Problems) != 0 {
		t.Errorf("problems = %q, want none", d.Problems)
	}
	if len(d.Blocks) != 1 || d.Blocks[0].Lang != "yaml" || d.Blocks[0].Line != 2 || len(d.Blocks[0].Lines) != 3 {
		t.Errorf("blocks = %+v", d.Blocks)
	}
}

func TestParseUnclosedFence(t *testing.T) {
	d := Parse("u.md", "text\n\n~~~~sh\nx\n~~~\n```\n")
	if len(d.Problems) != 1 || !strings.Contains(d.Problems[0], "line 3") {
		t.Errorf("problems = %q, want the fence of line 3 never closed", d.Problems)
	}
}

func TestDuplicateHeadings(t *testing.T) {
	d := Parse("d.md", "# Example\n## Example\n## Example\n")
	for _, a := range []string{"example", "example-1", "example-2"} {
		if !d.Anchors[a] {
			t.Errorf("no anchor %q in %v", a, d.Anchors)
		}
	}
}

func TestCommands(t *testing.T) {
	d := Parse("r.md", strings.Join([]string{
		"```sh",
		"make build",
		"./llm-prober --config.file=x.yml   # comment",
		"$ llm-prober bench --threshold 'ttft_p95<500ms' \\",
		"    --duration 30s 2>&1 | tee out",
		"```",
		"```",
		"llm-prober bench: no level met",
		"```",
	}, "\n"))
	cmds, problems := d.Commands()
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if len(cmds) != 3 {
		t.Fatalf("commands = %+v, want 3", cmds)
	}
	if want := []string{"--config.file=x.yml"}; !reflect.DeepEqual(cmds[0].Args, want) || cmds[0].Line != 3 || !cmds[0].Shell {
		t.Errorf("first = %+v", cmds[0])
	}
	if want := []string{"bench", "--threshold", "ttft_p95<500ms", "--duration", "30s"}; !reflect.DeepEqual(cmds[1].Args, want) || cmds[1].Line != 4 {
		t.Errorf("second = %+v", cmds[1])
	}
	if cmds[2].Shell {
		t.Errorf("output in a plain block marked as shell: %+v", cmds[2])
	}
}

func TestShellWordsErrors(t *testing.T) {
	for _, s := range []string{`llm-prober 'open`, `llm-prober "open`} {
		if _, err := ShellWords(s); err == nil {
			t.Errorf("ShellWords(%q): no error", s)
		}
	}
	got, err := ShellWords(`a "b c" d\ e 'f#g' #h`)
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b c", "d e", "f#g"}) {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestExternal(t *testing.T) {
	for dest, want := range map[string]bool{
		"https://x": true, "mailto:a@b": true, "//host/x": true,
		"docs/a.md": false, "#x": false, "a.md#b:c": false, "../x": false,
	} {
		if got := External(dest); got != want {
			t.Errorf("External(%q) = %v", dest, got)
		}
	}
}
