package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

const chartDir = "helm/llm-prober"

func TestChartRulesUpToDate(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("..", RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", ChartRulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ChartRules(rules)) {
		t.Errorf("%s is out of date with %s: run `make deploy-rules`", ChartRulesFile, RulesFile)
	}
}

// TestHelmChart lints the chart and renders it with the defaults and with
// every switch on; each rendered object must decode strictly into its
// Kubernetes (or Prometheus Operator) type, the configuration must be a
// valid llm-prober configuration, and the PrometheusRule must carry the
// rules file.
func TestHelmChart(t *testing.T) {
	helm := os.Getenv("LLM_PROBER_HELM")
	if helm == "" {
		helm = testutil.RequireTool(t, "helm", "LLM_PROBER_REQUIRE_HELM", "`make test` builds helm (scripts/ensure-go-tool.sh); or set LLM_PROBER_HELM")
	} else if _, err := os.Stat(helm); err != nil {
		if os.Getenv("LLM_PROBER_REQUIRE_HELM") != "" {
			t.Fatalf("helm is required but %s is missing", helm)
		}
		t.Skipf("no helm at %s", helm)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	run("lint", "--strict", chartDir)

	for name, sets := range map[string][]string{
		"defaults": nil,
		"everything on": {
			"serviceMonitor.enabled=true", "prometheusRule.enabled=true",
			"extraArgs[0]=--log.level=debug",
			"secretMounts[0].name=keys", "secretMounts[0].secretName=llm-prober-keys", "secretMounts[0].mountPath=/etc/llm-prober/keys",
			"image.tag=1.2.3",
			"serviceAccount.create=true", "rbac.create=true", "rbac.namespaces[0]=llm-serving",
		},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "rel", chartDir, "--namespace", "monitoring"}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			if name != "defaults" {
				// Kubernetes endpoints discovery, which the RBAC is for.
				values := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(values, []byte(helmDiscoveryValues), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", values)
			}
			var (
				cfg      *config.Config
				pod      corev1.PodSpec
				accounts []corev1.ServiceAccount
				roles    []rbacv1.Role
				bindings []rbacv1.RoleBinding
			)
			kinds := map[string]int{}
			for _, doc := range strings.Split(run(args...), "\n---\n") {
				doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
				var head struct{ Kind string }
				if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
					continue // a comment-only document
				}
				kinds[head.Kind]++
				strict := func(into any) {
					t.Helper()
					if err := k8syaml.UnmarshalStrict([]byte(doc), into); err != nil {
						t.Errorf("%s does not decode strictly: %v\n%s", head.Kind, err, doc)
					}
				}
				switch head.Kind {
				case "ConfigMap":
					var cm corev1.ConfigMap
					strict(&cm)
					var err error
					if cfg, err = config.Parse([]byte(cm.Data["llm-prober.yml"]), "llm-prober.yml", t.TempDir(), func(string) string { return "" }); err != nil {
						t.Errorf("the chart's configuration is not valid: %v", err)
					}
				case "Deployment":
					var d appsv1.Deployment
					strict(&d)
					pod = d.Spec.Template.Spec
					c := d.Spec.Template.Spec.Containers[0]
					if c.Args[0] != "--config.file=/etc/llm-prober/llm-prober.yml" || c.ReadinessProbe.HTTPGet.Path != "/-/ready" {
						t.Errorf("container args %q, readiness %q", c.Args, c.ReadinessProbe.HTTPGet.Path)
					}
					if name != "defaults" && (c.Image != "ghcr.io/llm-prober/llm-prober:1.2.3" || len(c.VolumeMounts) != 2 || c.Args[1] != "--log.level=debug") {
						t.Errorf("values not applied: image %s, mounts %v, args %q", c.Image, c.VolumeMounts, c.Args)
					}
				case "Service":
					var s corev1.Service
					strict(&s)
				case "ServiceMonitor":
					var sm monitoringv1.ServiceMonitor
					strict(&sm)
				case "PrometheusRule":
					var pr monitoringv1.PrometheusRule
					strict(&pr)
					if len(pr.Spec.Groups) == 0 || len(pr.Spec.Groups[0].Rules) == 0 {
						t.Error("the PrometheusRule carries no rules")
					}
				case "ServiceAccount":
					accounts = append(accounts, corev1.ServiceAccount{})
					strict(&accounts[len(accounts)-1])
				case "Role":
					roles = append(roles, rbacv1.Role{})
					strict(&roles[len(roles)-1])
				case "RoleBinding":
					bindings = append(bindings, rbacv1.RoleBinding{})
					strict(&bindings[len(bindings)-1])
				default:
					t.Errorf("unexpected kind %s", head.Kind)
				}
			}
			want := map[string]int{"ConfigMap": 1, "Deployment": 1, "Service": 1}
			if name != "defaults" {
				want["ServiceMonitor"], want["PrometheusRule"] = 1, 1
				want["ServiceAccount"], want["Role"], want["RoleBinding"] = 1, 1, 1
				if cfg != nil {
					checkEndpointSliceRBAC(t, cfg, pod, accounts, roles, bindings)
				}
			}
			for k, n := range want {
				if kinds[k] != n {
					t.Errorf("%d %s objects rendered, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}
		})
	}
}

// helmDiscoveryValues adds Kubernetes endpoints discovery to the chart's
// configuration.
const helmDiscoveryValues = `
config:
  modules:
    vllm-chat:
      protocol: openai_chat
      model: m
      allowed_targets: 'http://10(\.[0-9]{1,3}){3}:8000'
  target_discovery:
    - module: vllm-chat
      kubernetes_sd_configs:
        - {role: endpointslice, namespaces: {names: [llm-serving]}, service: vllm, port: http}
`
