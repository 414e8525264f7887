// Package mixin evaluates llm-prober's monitoring mixin, the jsonnet in
// this directory, into the files the project ships: the Grafana dashboards
// (dashboards/*.json), the recording rules and alerts
// (alerts/llm-prober-rules.yml) and the copies of the rules deploy/ carries
// (the Kubernetes PrometheusRule and the Helm chart's file).
//
// The jsonnet is evaluated with github.com/google/go-jsonnet from the
// sources embedded in this package, so `make mixin` (mixin/gen) needs no
// jsonnet binary. TestGeneratedFilesUpToDate fails when a committed file
// differs from what the mixin gives.
package mixin

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-jsonnet"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/deploy"
)

// sources are the mixin's jsonnet files, as a user's jsonnet would import
// them.
//
//go:embed *.libsonnet lib/*.libsonnet rules/*.libsonnet alerts/*.libsonnet dashboards/*.libsonnet
var sources embed.FS

// Output paths, relative to the repository root.
const (
	RulesFile     = deploy.RulesFile // alerts/llm-prober-rules.yml
	DashboardsDir = "dashboards"
)

// Mixin is the evaluated mixin.
type Mixin struct {
	// Dashboards are the Grafana dashboards as JSON values, keyed by file
	// name (grafanaDashboards).
	Dashboards map[string]any
	// Groups are the rule groups: prometheusRules' then
	// prometheusAlerts'.
	Groups []any
	// Comments holds, per group and rule, the rule's `comment::` ("" for
	// none): hidden in jsonnet, so Prometheus never sees it, and written as
	// a YAML comment above the rule.
	Comments [][]string
}

// Evaluate evaluates mixin.libsonnet with overrides, a jsonnet object
// expression added to it ("{}" for none; e.g. "{_config+:: {proberSelector:
// 'job=\"x\"'}}").
func Evaluate(overrides string) (*Mixin, error) {
	if strings.TrimSpace(overrides) == "" {
		overrides = "{}"
	}
	snippet := `
local m = (import 'mixin.libsonnet') + (` + overrides + `);
local groups = m.prometheusRules.groups + m.prometheusAlerts.groups;
{
  dashboards: m.grafanaDashboards,
  groups: groups,
  comments: [
    [if std.objectHasAll(r, 'comment') then r.comment else '' for r in g.rules]
    for g in groups
  ],
}
`
	out, err := EvaluateSnippet(snippet)
	if err != nil {
		return nil, err
	}
	var m struct {
		Dashboards map[string]any `json:"dashboards"`
		Groups     []any          `json:"groups"`
		Comments   [][]string     `json:"comments"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("mixin output: %w", err)
	}
	return &Mixin{Dashboards: m.Dashboards, Groups: m.Groups, Comments: m.Comments}, nil
}

// EvaluateSnippet evaluates a jsonnet snippet that may import the mixin's
// files by their paths in this directory ('mixin.libsonnet',
// 'lib/promql.libsonnet', ...) and returns its JSON.
func EvaluateSnippet(snippet string) (string, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&fsImporter{fsys: sources})
	out, err := vm.EvaluateAnonymousSnippet("snippet.jsonnet", snippet)
	if err != nil {
		return "", fmt.Errorf("evaluating the mixin: %w", err)
	}
	return out, nil
}

// fsImporter resolves imports relative to the importing file within fsys.
type fsImporter struct {
	fsys  fs.FS
	mu    sync.Mutex
	cache map[string]jsonnet.Contents
}

func (i *fsImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	foundAt := path.Clean(path.Join(path.Dir(importedFrom), importedPath))
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.cache[foundAt]; ok {
		return c, foundAt, nil
	}
	b, err := fs.ReadFile(i.fsys, foundAt)
	if err != nil {
		return jsonnet.Contents{}, "", fmt.Errorf("import %q from %q: %w", importedPath, importedFrom, err)
	}
	if i.cache == nil {
		i.cache = map[string]jsonnet.Contents{}
	}
	c := jsonnet.MakeContentsRaw(b)
	i.cache[foundAt] = c
	return c, foundAt, nil
}

// Files renders every generated file, keyed by its path relative to the
// repository root: the dashboards, the rules file and deploy/'s copies of
// the rules.
func (m *Mixin) Files() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, d := range m.Dashboards {
		b, err := DashboardJSON(d)
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", name, err)
		}
		files[path.Join(DashboardsDir, name)] = b
	}
	rules, err := m.RulesYAML()
	if err != nil {
		return nil, err
	}
	files[RulesFile] = rules
	pr, err := deploy.PrometheusRule(rules)
	if err != nil {
		return nil, err
	}
	files[deploy.PrometheusRuleFile] = pr
	files[deploy.ChartRulesFile] = deploy.ChartRules(rules)
	return files, nil
}

// DashboardJSON renders a dashboard as Grafana stores it: indented JSON,
// keys sorted (as jsonnet orders them), no HTML escaping.
func DashboardJSON(d any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rulesHeader starts the generated rules file.
const rulesHeader = `# GENERATED by ` + "`make mixin`" + ` from mixin/ (jsonnet): do not edit. Change
# mixin/rules/rules.libsonnet or mixin/alerts/alerts.libsonnet, or override
# the thresholds and selectors in _config (mixin/config.libsonnet).
#
# llm-prober recording rules and alerts.
#
# Recording rules follow the level:metric:operations convention. Every SLO
# rule is generic: thresholds and objectives come from the prober's own
# llm_probe_slo_requests_total and llm_probe_slo_objective_ratio series, so
# adding a probe with an ` + "`slo:`" + ` block needs no change here.
#
# Runbook: docs/runbook.md (one section per alert).
`

// RulesYAML renders the rule groups as a Prometheus rules file, each
// rule's comment above it.
func (m *Mixin) RulesYAML() ([]byte, error) {
	if len(m.Comments) != len(m.Groups) {
		return nil, fmt.Errorf("mixin: %d groups, comments for %d", len(m.Groups), len(m.Comments))
	}
	groups := &yaml.Node{Kind: yaml.SequenceNode}
	for gi, g := range m.Groups {
		gn := yamlNode(g)
		rules := mappingValue(gn, "rules")
		if rules == nil || rules.Kind != yaml.SequenceNode || len(rules.Content) != len(m.Comments[gi]) {
			return nil, fmt.Errorf("mixin: group %d: rules and comments do not match", gi)
		}
		for ri, r := range rules.Content {
			if c := strings.TrimRight(m.Comments[gi][ri], "\n"); c != "" {
				r.HeadComment = "# " + strings.ReplaceAll(c, "\n", "\n# ")
			}
		}
		groups.Content = append(groups.Content, gn)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "groups"}, groups,
	}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("mixin: rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// A blank line between groups, as a person would write the file.
	var out bytes.Buffer
	out.WriteString(rulesHeader)
	for i, line := range strings.SplitAfter(b.String(), "\n") {
		if i > 1 && strings.HasPrefix(line, "  - name: ") {
			out.WriteString("\n")
		}
		out.WriteString(line)
	}
	return out.Bytes(), nil
}

// keyOrder orders the keys of rule files as people write them; others
// follow alphabetically.
var keyOrder = []string{"name", "interval", "limit", "rules", "record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations", "summary", "description", "runbook_url"}

func keyRank(k string) int {
	if i := slices.Index(keyOrder, k); i >= 0 {
		return i
	}
	return len(keyOrder)
}

// yamlNode converts a decoded JSON value into a YAML node: mapping keys in
// keyOrder, multi-line strings as literal blocks.
func yamlNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if ra, rb := keyRank(a), keyRank(b); ra != rb {
				return ra - rb
			}
			return strings.Compare(a, b)
		})
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, yamlNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}

// mappingValue returns the value of key in mapping node n.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
