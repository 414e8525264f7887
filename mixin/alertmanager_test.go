package mixin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// alertmanagerConfig is the example Alertmanager configuration the mixin
// ships, relative to the repository root.
const alertmanagerConfig = "mixin/alertmanager/alertmanager.yml"

// TestAlertmanagerConfig checks the example Alertmanager configuration:
// amtool accepts it and routes each severity to its receiver, and every
// alert it names is one the rules define, so that renaming an alert
// cannot silently leave an inhibition rule matching nothing. test/e2e's
// TestAlertmanager runs it in a real Alertmanager.
func TestAlertmanagerConfig(t *testing.T) {
	path := filepath.Join("..", filepath.FromSlash(alertmanagerConfig))
	// Read here, not only by amtool, so that go test's cache knows of it.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Route struct {
			GroupBy []string `yaml:"group_by"`
			Routes  []struct {
				Matchers []string `yaml:"matchers"`
			} `yaml:"routes"`
		} `yaml:"route"`
		InhibitRules []struct {
			SourceMatchers []string `yaml:"source_matchers"`
			TargetMatchers []string `yaml:"target_matchers"`
			Equal          []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}

	alerts := map[string]bool{}
	severities := map[string]bool{}
	for _, r := range rulesOf(t, evaluate(t, "")) {
		if r.Alert != "" {
			alerts[r.Alert] = true
			severities[r.Labels["severity"]] = true
		}
	}
	// Every alert name the matchers spell out (alternatives of a plain
	// regex included) is one the rules define.
	named := 0
	check := func(where string, ms []string) {
		for _, m := range ms {
			for _, name := range alertnames(m) {
				named++
				if !alerts[name] {
					t.Errorf("%s: matcher %s names %s, which alerts/llm-prober-rules.yml does not define", where, m, name)
				}
			}
		}
	}
	for i, r := range cfg.InhibitRules {
		check(fmt.Sprintf("inhibit_rules[%d].source_matchers", i), r.SourceMatchers)
		check(fmt.Sprintf("inhibit_rules[%d].target_matchers", i), r.TargetMatchers)
	}
	if len(cfg.InhibitRules) < 3 || named < 10 {
		t.Errorf("%d inhibit rules naming %d alerts; want LLMTargetDown's, LLMProberDown's and LLMProberAbsent's", len(cfg.InhibitRules), named)
	}
	if !slices.Equal(cfg.Route.GroupBy, []string{"target"}) {
		t.Errorf("route.group_by = %v, want [target]: one notification per server", cfg.Route.GroupBy)
	}

	amtool := testutil.RequireAmtool(t)
	if out, err := exec.Command(amtool, "check-config", path).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", path, err, out)
	}
	// Each severity the rules use reaches its own receiver; an alert
	// without one is a ticket.
	routes := map[string]string{"alertname=Unknown": "ticket"}
	for sev := range severities {
		if sev != "page" && sev != "ticket" {
			t.Errorf("the rules use severity %q, which the example routes as a ticket", sev)
			continue
		}
		routes["alertname=LLMTargetDown target=x severity="+sev] = sev
	}
	for labels, want := range routes {
		args := append([]string{"config", "routes", "test", "--config.file=" + path, "--verify.receivers=" + want}, strings.Fields(labels)...)
		if out, err := exec.Command(amtool, args...).CombinedOutput(); err != nil {
			t.Errorf("amtool %s: %v (want receiver %s)\n%s", strings.Join(args, " "), err, want, out)
		}
	}
}

var alertnameMatcher = regexp.MustCompile(`^alertname\s*(=~|!~|=|!=)\s*"([^"]*)"$`)

// alertnames are the alert names an alertname matcher spells out: its
// value for = and !=, its alternatives for =~ and !~ where they are plain
// names (none for a pattern such as LLM.+).
func alertnames(matcher string) []string {
	m := alertnameMatcher.FindStringSubmatch(strings.TrimSpace(matcher))
	if m == nil {
		return nil
	}
	var names []string
	for _, alt := range strings.Split(m[2], "|") {
		if regexp.QuoteMeta(alt) == alt {
			names = append(names, alt)
		}
	}
	return names
}
