package deploy

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/llm-prober/llm-prober/config"
)

// The sharded StatefulSet decodes strictly as Kubernetes objects, gives
// each pod its ordinal as --shard.index, and keeps --shard.count equal to
// its replicas.
func TestShardedStatefulSet(t *testing.T) {
	objs := readManifests(t, "kubernetes/sharded.yaml")
	sets := find(objs, "StatefulSet")
	if len(sets) != 1 {
		t.Fatalf("want one StatefulSet, got %d", len(sets))
	}
	// The checks every prober pod gets: config valid, Service and
	// ServiceMonitor scraping it.
	cfg, _ := checkProberPod(t, objs, sets[0])

	b, err := os.ReadFile("kubernetes/sharded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		sts      appsv1.StatefulSet
		accounts []corev1.ServiceAccount
		roles    []rbacv1.Role
		bindings []rbacv1.RoleBinding
	)
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var head struct{ Kind string }
		if err := k8syaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
			continue
		}
		var into any
		switch head.Kind {
		case "StatefulSet":
			into = &sts
		case "ConfigMap":
			into = &corev1.ConfigMap{}
		case "Service":
			into = &corev1.Service{}
		case "ServiceMonitor":
			into = &monitoringv1.ServiceMonitor{}
		case "ServiceAccount":
			accounts = append(accounts, corev1.ServiceAccount{})
			into = &accounts[len(accounts)-1]
		case "Role":
			roles = append(roles, rbacv1.Role{})
			into = &roles[len(roles)-1]
		case "RoleBinding":
			bindings = append(bindings, rbacv1.RoleBinding{})
			into = &bindings[len(bindings)-1]
		default:
			t.Errorf("unexpected kind %s", head.Kind)
			continue
		}
		if err := k8syaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Errorf("%s does not decode strictly: %v", head.Kind, err)
		}
	}
	if sts.Spec.Replicas == nil {
		t.Fatal("StatefulSet without replicas")
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if want := fmt.Sprintf("--shard.count=%d", *sts.Spec.Replicas); !slices.Contains(c.Args, want) {
		t.Errorf("args %q lack %s (the replicas)", c.Args, want)
	}
	if !slices.Contains(c.Args, "--shard.index=$(SHARD_INDEX)") {
		t.Errorf("args %q lack --shard.index=$(SHARD_INDEX)", c.Args)
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SHARD_INDEX" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil ||
		c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("SHARD_INDEX must come from the pod-index label: %+v", c.Env)
	}
	if sts.Spec.ServiceName == "" {
		t.Error("StatefulSet without its governing serviceName")
	}
	checkEndpointSliceRBAC(t, cfg, sts.Spec.Template.Spec, accounts, roles, bindings)
}

// checkEndpointSliceRBAC checks that a pod running cfg may do what its
// kubernetes_sd_configs do: its service account exists, its token is
// mounted, and in every namespace watched a RoleBinding gives that
// account a Role that lists and watches EndpointSlices.
func checkEndpointSliceRBAC(t *testing.T, cfg *config.Config, pod corev1.PodSpec, accounts []corev1.ServiceAccount, roles []rbacv1.Role, bindings []rbacv1.RoleBinding) {
	t.Helper()
	var namespaces []string
	for _, td := range cfg.TargetDiscovery {
		for _, k := range td.KubernetesSDConfigs {
			if len(k.Namespaces.Names) == 0 {
				t.Errorf("kubernetes_sd_config of module %s without namespaces: name them, so the RBAC below can be checked", td.Module)
			}
			namespaces = append(namespaces, k.Namespaces.Names...)
		}
	}
	if len(namespaces) == 0 {
		t.Fatal("no kubernetes_sd_configs in the configuration")
	}
	sa := pod.ServiceAccountName
	if sa == "" || !slices.ContainsFunc(accounts, func(a corev1.ServiceAccount) bool { return a.Name == sa }) {
		t.Errorf("the pod's serviceAccountName %q is not one of the file's ServiceAccounts", sa)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("the pod does not mount its service account token; kubernetes_sd_configs cannot reach the API")
	}
	grants := func(r rbacv1.Role) bool {
		return slices.ContainsFunc(r.Rules, func(p rbacv1.PolicyRule) bool {
			return slices.Contains(p.APIGroups, "discovery.k8s.io") && slices.Contains(p.Resources, "endpointslices") &&
				slices.Contains(p.Verbs, "list") && slices.Contains(p.Verbs, "watch")
		})
	}
	for _, ns := range namespaces {
		ok := slices.ContainsFunc(bindings, func(b rbacv1.RoleBinding) bool {
			if b.Namespace != ns || b.RoleRef.Kind != "Role" {
				return false
			}
			if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace != "" }) {
				return false
			}
			return slices.ContainsFunc(roles, func(r rbacv1.Role) bool { return r.Namespace == ns && r.Name == b.RoleRef.Name && grants(r) })
		})
		if !ok {
			t.Errorf("namespace %s is watched, but no RoleBinding there gives ServiceAccount %s a Role to list and watch endpointslices", ns, sa)
		}
	}
}
