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
	k8syaml "sigs.k8s.io/yaml"
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
	checkProberPod(t, objs, sets[0])

	b, err := os.ReadFile("kubernetes/sharded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
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
}
