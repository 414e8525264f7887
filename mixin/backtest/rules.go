package backtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"gopkg.in/yaml.v3"
)

// RulesFile is the shipped rules file, relative to the repository root.
const RulesFile = "alerts/llm-prober-rules.yml"

// DefaultEvalInterval is the evaluation interval of groups that set none
// (Prometheus' global evaluation_interval in the deployments the docs show).
const DefaultEvalInterval = 30 * time.Second

// lookbackDelta is the engine's (Prometheus' default): an instant selector
// reads up to this far back.
const lookbackDelta = 5 * time.Minute

// FindRulesFile returns the path of the shipped rules file, looked up from
// the working directory upwards (tests run in the package's directory, the
// command anywhere in the repository).
func FindRulesFile() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, RulesFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory", RulesFile)
		}
		dir = parent
	}
}

// RuleInfo is what the backtest needs to know about one rule.
type RuleInfo struct {
	Group string
	// Record is the recorded metric name; empty for an alert.
	Record string
	// Alert is the alert's name; empty for a recording rule.
	Alert    string
	Severity string
	// Hold is the alert's for: plus keep_firing_for:.
	Hold      time.Duration
	selectors []selector
}

// selector is one vector selector of a rule's expression and how far back
// it reads from an evaluation's timestamp.
type selector struct {
	matchers []*labels.Matcher
	// from and to bound what one evaluation at t reads: [t-from, t-to].
	from, to time.Duration
	// unbounded: an @ modifier, whose reach the analysis does not follow.
	unbounded bool
}

func (s selector) matchesName(name string) bool {
	for _, m := range s.matchers {
		if m.Name == model.MetricNameLabel && !m.Matches(name) {
			return false
		}
	}
	return true
}

// matchesAlert reports whether s can select the ALERTS or
// ALERTS_FOR_STATE series of the alert called alert.
func (s selector) matchesAlert(alert string) bool {
	if !s.matchesName("ALERTS") && !s.matchesName("ALERTS_FOR_STATE") {
		return false
	}
	for _, m := range s.matchers {
		if m.Name == model.AlertNameLabel && !m.Matches(alert) {
			return false
		}
	}
	return true
}

// Rules is the analysed rules file.
type Rules struct {
	Path string
	// GroupOrder is the evaluation order: groups of recording rules only
	// first, then the others, each in file order.
	GroupOrder []string
	Rules      []RuleInfo
}

// LoadRules parses path and analyses every rule's selectors.
func LoadRules(path string) (*Rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Groups []struct {
			Name     string `yaml:"name"`
			Interval string `yaml:"interval"`
			Rules    []struct {
				Record        string            `yaml:"record"`
				Alert         string            `yaml:"alert"`
				Expr          string            `yaml:"expr"`
				For           string            `yaml:"for"`
				KeepFiringFor string            `yaml:"keep_firing_for"`
				Labels        map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := parser.NewParser(parser.Options{})
	rs := &Rules{Path: path}
	var recording, other []string
	for _, g := range file.Groups {
		onlyRecording := true
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("%s: group %s, rule %s%s: %w", path, g.Name, r.Record, r.Alert, err)
			}
			info := RuleInfo{Group: g.Name, Record: r.Record, Alert: r.Alert, Severity: r.Labels["severity"]}
			for _, d := range []string{r.For, r.KeepFiringFor} {
				if d == "" {
					continue
				}
				dur, err := model.ParseDuration(d)
				if err != nil {
					return nil, fmt.Errorf("%s: alert %s: %w", path, r.Alert, err)
				}
				info.Hold += time.Duration(dur)
			}
			info.selectors = selectorsOf(expr)
			if r.Alert != "" {
				onlyRecording = false
			}
			rs.Rules = append(rs.Rules, info)
		}
		if onlyRecording {
			recording = append(recording, g.Name)
		} else {
			other = append(other, g.Name)
		}
	}
	rs.GroupOrder = append(recording, other...)
	return rs, nil
}

// selectorsOf lists expr's vector selectors with the time range each reads,
// ranges and offsets of enclosing subqueries included.
func selectorsOf(expr parser.Expr) []selector {
	var out []selector
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{matchers: vs.LabelMatchers, from: lookbackDelta}
		if vs.Timestamp != nil || vs.StartOrEnd != 0 {
			s.unbounded = true
		}
		if len(path) > 0 {
			if ms, ok := path[len(path)-1].(*parser.MatrixSelector); ok {
				s.from = ms.Range
			}
		}
		s.from += vs.OriginalOffset
		s.to = vs.OriginalOffset
		for _, a := range path {
			if sq, ok := a.(*parser.SubqueryExpr); ok {
				s.from += sq.Range + sq.OriginalOffset
				s.to += sq.OriginalOffset
				if sq.Timestamp != nil || sq.StartOrEnd != 0 {
					s.unbounded = true
				}
			}
		}
		out = append(out, s)
		return nil
	})
	return out
}

// PageClosure returns the indexes (into r.Rules) of every alert with
// severity page and of every recording rule they depend on, transitively
// through the recorded metric names their selectors match.
func (r *Rules) PageClosure() []int {
	return r.closure(func(ri RuleInfo) bool { return ri.Alert != "" && ri.Severity == "page" })
}

// AlertClosure returns the indexes of every alert and of every recording
// rule an alert depends on: recording rules only dashboards read (the
// 30-day budget remaining, p95 panels) cannot change when an alert fires.
func (r *Rules) AlertClosure() []int {
	return r.closure(func(ri RuleInfo) bool { return ri.Alert != "" })
}

// AlertsClosure returns the indexes of the alerts called names and of
// every recording rule they depend on.
func (r *Rules) AlertsClosure(names []string) []int {
	return r.closure(func(ri RuleInfo) bool { return ri.Alert != "" && slices.Contains(names, ri.Alert) })
}

func (r *Rules) closure(root func(RuleInfo) bool) []int {
	in := make([]bool, len(r.Rules))
	var queue []int
	for i, ri := range r.Rules {
		if root(ri) {
			in[i] = true
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, s := range r.Rules[i].selectors {
			for j, rj := range r.Rules {
				if !in[j] && rj.Record != "" && s.matchesName(rj.Record) {
					in[j] = true
					queue = append(queue, j)
				}
			}
		}
	}
	var out []int
	for i, ok := range in {
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// needs is, for the rules kept in a run, how far before an evaluation each
// raw metric name is read and how long before the first evaluation that
// matters the rules must already run.
type needs struct {
	// raw maps a raw (scraped) metric name to the windows, relative to an
	// evaluation at t, that rules read it in: [t-from, t-to] for each.
	raw map[string][]window
	// evalLead: the longest range or offset over a recorded series, or
	// for: plus keep_firing_for:, whichever is longer.
	evalLead time.Duration
}

type window struct{ from, to time.Duration }

// needsOf analyses the rules at indexes keep (all when nil) against the
// raw metric names a run emits.
func (r *Rules) needsOf(keep []int, rawNames []string) (needs, error) {
	n := needs{raw: make(map[string][]window)}
	if keep == nil {
		keep = make([]int, len(r.Rules))
		for i := range keep {
			keep[i] = i
		}
	}
	var recorded []string
	for _, i := range keep {
		if rec := r.Rules[i].Record; rec != "" {
			recorded = append(recorded, rec)
		}
	}
	recorded = append(recorded, "ALERTS", "ALERTS_FOR_STATE")
	for _, i := range keep {
		ri := r.Rules[i]
		n.evalLead = max(n.evalLead, ri.Hold)
		for _, s := range ri.selectors {
			if s.unbounded {
				return n, fmt.Errorf("rule %s%s: an @ modifier, which the backtest cannot bound", ri.Record, ri.Alert)
			}
			for _, name := range rawNames {
				if s.matchesName(name) {
					n.raw[name] = append(n.raw[name], window{s.from, s.to})
				}
			}
			if slices.ContainsFunc(recorded, s.matchesName) {
				n.evalLead = max(n.evalLead, s.from)
			}
		}
	}
	return n, nil
}

// evalOrder returns the rule indexes in evaluation order: r.GroupOrder,
// then file order within each group.
func (r *Rules) evalOrder() []int {
	var out []int
	for _, g := range r.GroupOrder {
		for i, ri := range r.Rules {
			if ri.Group == g {
				out = append(out, i)
			}
		}
	}
	return out
}

// keptOrder returns the indexes of the rules among keep (all when nil)
// in evaluation order.
func (r *Rules) keptOrder(keep []int) []int {
	order := r.evalOrder()
	if keep == nil {
		return order
	}
	kept := make(map[int]bool, len(keep))
	for _, i := range keep {
		kept[i] = true
	}
	return slices.DeleteFunc(order, func(i int) bool { return !kept[i] })
}

// feedbackSpans returns the spans [first, last] of positions in order
// (rule indexes in evaluation order) where a rule reads what a rule at or
// after it writes: a recorded series, or ALERTS (an alert that holds
// through its own ALERTS series). Prometheus gives such a rule the value
// of the previous evaluation, so a span's rules must be evaluated together
// evaluation by evaluation (World.Run); overlapping spans are merged.
func (r *Rules) feedbackSpans(order []int) [][2]int {
	var spans [][2]int
	for pos, i := range order {
		last := -1
		for k := pos; k < len(order); k++ {
			rj := r.Rules[order[k]]
			for _, s := range r.Rules[i].selectors {
				if (rj.Record != "" && s.matchesName(rj.Record)) || (rj.Alert != "" && s.matchesAlert(rj.Alert)) {
					last = k
				}
			}
		}
		if last < 0 {
			continue
		}
		if n := len(spans); n > 0 && pos <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], last)
			continue
		}
		spans = append(spans, [2]int{pos, last})
	}
	return spans
}

// loadGroups loads the rules file into m, keeping only the rules at
// indexes keep (all when nil). With single, every rule is a group of its
// own, in evaluation order (keptOrder's); otherwise the groups are
// r.GroupOrder's.
// Alerting rules are marked restored, as promtool does, so that they write
// ALERTS from the start.
func (r *Rules) loadGroups(m *rules.Manager, opts *rules.ManagerOptions, keep []int, single bool) ([]*rules.Group, error) {
	loaded, errs := m.LoadGroups(DefaultEvalInterval, labels.EmptyLabels(), "", nil, false, r.Path)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	byName := make(map[string]*rules.Group, len(loaded))
	for _, g := range loaded {
		byName[g.Name()] = g
	}
	kept := make(map[int]bool, len(r.Rules))
	for i := range r.Rules {
		kept[i] = keep == nil
	}
	for _, i := range keep {
		kept[i] = true
	}
	var out []*rules.Group
	for _, name := range r.GroupOrder {
		g, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("group %s not loaded", name)
		}
		var idx []int
		for i, ri := range r.Rules {
			if ri.Group == name {
				idx = append(idx, i)
			}
		}
		grs := g.Rules()
		if len(grs) != len(idx) {
			return nil, fmt.Errorf("group %s: %d rules loaded, %d parsed", name, len(grs), len(idx))
		}
		var sub []rules.Rule
		for j, rule := range grs {
			if !kept[idx[j]] {
				continue
			}
			if ar, ok := rule.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
			sub = append(sub, rule)
		}
		if len(sub) == 0 {
			continue
		}
		newGroup := func(rs []rules.Rule) *rules.Group {
			qo := g.QueryOffset()
			return rules.NewGroup(rules.GroupOptions{
				Name: g.Name(), File: g.File(), Interval: g.Interval(), Limit: g.Limit(),
				Rules: rs, Opts: opts, QueryOffset: &qo,
			})
		}
		switch {
		case single:
			for _, rule := range sub {
				out = append(out, newGroup([]rules.Rule{rule}))
			}
		case len(sub) < len(grs):
			out = append(out, newGroup(sub))
		default:
			out = append(out, g)
		}
	}
	return out, nil
}
