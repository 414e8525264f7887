// Command gen writes deploy/kubernetes/prometheusrule.yaml and the Helm
// chart's copy of the rules from alerts/llm-prober-rules.yml (make
// deploy-rules). Run from the repository root.
package main

import (
	"fmt"
	"os"

	"github.com/llm-prober/llm-prober/deploy"
)

func main() {
	rules, err := os.ReadFile(deploy.RulesFile)
	if err == nil {
		var out []byte
		if out, err = deploy.PrometheusRule(rules); err == nil {
			err = os.WriteFile(deploy.PrometheusRuleFile, out, 0o644)
		}
		if err == nil {
			err = os.WriteFile(deploy.ChartRulesFile, deploy.ChartRules(rules), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", deploy.PrometheusRuleFile, "and", deploy.ChartRulesFile)
}
