package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/config"
)

const proberImage = "ghcr.io/llm-prober/llm-prober"

// The subset of Kubernetes objects the tests look at.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
}

type deploymentSpec struct {
	Replicas *int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	RuntimeClassName string      `yaml:"runtimeClassName"`
	Containers       []container `yaml:"containers"`
	Volumes          []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe   *httpProbe `yaml:"livenessProbe"`
	ReadinessProbe  *httpProbe `yaml:"readinessProbe"`
	SecurityContext *struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		RunAsUser                *int  `yaml:"runAsUser"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
		Privileged *bool `yaml:"privileged"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type httpProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort any    `yaml:"targetPort"`
	} `yaml:"ports"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
		Path string `yaml:"path"`
	} `yaml:"endpoints"`
}

// readManifests decodes every document of a multi-document YAML file.
func readManifests(t *testing.T, path string) []object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var objs []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(objs)+1, err)
		}
		if o.Kind == "" && o.APIVersion == "" {
			continue // an empty document
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", path, len(objs)+1)
		}
		objs = append(objs, o)
	}
	return objs
}

func decodeSpec[T any](t *testing.T, o object) T {
	t.Helper()
	var s T
	if err := o.Spec.Decode(&s); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return s
}

func kinds(objs []object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Kind)
	}
	return ks
}

func find(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func TestManifestFiles(t *testing.T) {
	want := map[string][]string{
		"triton-sidecar.yaml": {"ConfigMap", "Deployment", "Service", "ServiceMonitor"},
		"central.yaml":        {"ConfigMap", "Deployment", "Service", "ServiceMonitor"},
		"sharded.yaml":        {"ConfigMap", "StatefulSet", "Service", "ServiceMonitor", "ServiceAccount", "Role", "RoleBinding"},
		"prometheusrule.yaml": {"PrometheusRule"},
		"bench-job.yaml":      {"ConfigMap", "PersistentVolumeClaim", "Job"},
	}
	paths, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: not covered by these tests; add it to TestManifestFiles", p)
			continue
		}
		if got := kinds(readManifests(t, p)); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: kinds %v, want %v", p, got, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("kubernetes/%s missing", name)
	}
}

// proberVersion is the image tag every manifest must use: the VERSION file.
func proberVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkProberPod checks the llm-prober container of a Deployment and the
// Service and ServiceMonitor that scrape it; it returns the prober's
// parsed configuration.
func checkProberPod(t *testing.T, objs []object, dep object) (*config.Config, container) {
	t.Helper()
	spec := decodeSpec[deploymentSpec](t, dep)
	for k, v := range spec.Selector.MatchLabels {
		if spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Deployment %s: selector %s=%s does not match the pod template", dep.Metadata.Name, k, v)
		}
	}
	i := slices.IndexFunc(spec.Template.Spec.Containers, func(c container) bool { return strings.HasPrefix(c.Image, proberImage+":") })
	if i < 0 {
		t.Fatalf("Deployment %s: no %s container", dep.Metadata.Name, proberImage)
	}
	c := spec.Template.Spec.Containers[i]
	if want := proberImage + ":" + proberVersion(t); c.Image != want {
		t.Errorf("%s: image %s, want %s (the VERSION file)", c.Name, c.Image, want)
	}
	portName := ""
	for _, p := range c.Ports {
		if p.ContainerPort == 9847 {
			portName = p.Name
		}
	}
	if portName == "" {
		t.Errorf("%s: no container port 9847", c.Name)
	}
	if !slices.Contains(c.Args, "--web.listen-address=:9847") {
		t.Errorf("%s: args %v lack --web.listen-address=:9847", c.Name, c.Args)
	}
	for _, pr := range []struct {
		name  string
		probe *httpProbe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/-/healthy"}, {"readinessProbe", c.ReadinessProbe, "/-/ready"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: no %s.httpGet", c.Name, pr.name)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.path || (fmt.Sprint(pr.probe.HTTPGet.Port) != portName && fmt.Sprint(pr.probe.HTTPGet.Port) != "9847") {
			t.Errorf("%s: %s %s on port %v, want %s on %s/9847", c.Name, pr.name, pr.probe.HTTPGet.Path, pr.probe.HTTPGet.Port, pr.path, portName)
		}
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: no securityContext", c.Name)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot,
		sc.RunAsUser == nil || *sc.RunAsUser == 0,
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
		!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}),
		len(sc.Capabilities.Add) > 0,
		sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s: securityContext must run as a non-root uid, with a read-only root filesystem, no privilege escalation and every capability dropped", c.Name)
	}

	// The configuration: a ConfigMap of the same file mounted at
	// /etc/llm-prober, holding llm-prober.yml, valid for check-config.
	cfgArg := "--config.file=/etc/llm-prober/llm-prober.yml"
	if !slices.Contains(c.Args, cfgArg) {
		t.Errorf("%s: args %v lack %s", c.Name, c.Args, cfgArg)
	}
	var cmName string
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/etc/llm-prober" {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("%s: configuration mount should be readOnly", c.Name)
		}
		for _, v := range spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	var cm *object
	for _, o := range find(objs, "ConfigMap") {
		if o.Metadata.Name == cmName {
			cm = &o
		}
	}
	if cm == nil {
		t.Fatalf("%s: no ConfigMap %q mounted at /etc/llm-prober in the same file", c.Name, cmName)
	}
	text, ok := cm.Data["llm-prober.yml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no llm-prober.yml", cmName)
	}
	// What check-config does (config.Load), with the container's
	// environment: secret-backed variables get a placeholder value.
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret-from-" + e.ValueFrom.SecretKeyRef.Name
		default:
			env[e.Name] = e.Value
		}
	}
	cfg, err := config.Parse([]byte(text), "ConfigMap "+cmName+" llm-prober.yml", t.TempDir(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("check-config of ConfigMap %s:\n%v", cmName, err)
	}

	// A Service exposing 9847 for this pod, and a ServiceMonitor scraping it.
	var svcPort string
	for _, svc := range find(objs, "Service") {
		s := decodeSpec[serviceSpec](t, svc)
		if !selects(s.Selector, spec.Template.Metadata.Labels) {
			continue
		}
		for _, p := range s.Ports {
			if p.Port == 9847 && (fmt.Sprint(p.TargetPort) == portName || fmt.Sprint(p.TargetPort) == "9847") {
				svcPort = p.Name
				for _, sm := range find(objs, "ServiceMonitor") {
					m := decodeSpec[serviceMonitorSpec](t, sm)
					if !selects(m.Selector.MatchLabels, svc.Metadata.Labels) {
						continue
					}
					for _, e := range m.Endpoints {
						if e.Port == svcPort && (e.Path == "" || e.Path == "/metrics") {
							return cfg, c
						}
					}
				}
			}
		}
	}
	if svcPort == "" {
		t.Errorf("Deployment %s: no Service selecting it with port 9847", dep.Metadata.Name)
	} else {
		t.Errorf("Deployment %s: no ServiceMonitor scraping its Service port %s", dep.Metadata.Name, svcPort)
	}
	return cfg, c
}

// selects reports whether every selector label is among labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestTritonSidecar(t *testing.T) {
	objs := readManifests(t, "kubernetes/triton-sidecar.yaml")
	deps := find(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deps))
	}
	cfg, prober := checkProberPod(t, objs, deps[0])
	spec := decodeSpec[deploymentSpec](t, deps[0])
	if len(spec.Template.Spec.Containers) != 2 {
		t.Errorf("want Triton and the prober in one pod, got %d containers", len(spec.Template.Spec.Containers))
	}
	var triton *container
	for _, c := range spec.Template.Spec.Containers {
		if strings.Contains(c.Image, "tritonserver") {
			triton = &c
		}
	}
	if triton == nil {
		t.Fatal("no tritonserver container")
	}
	ports := map[int]bool{}
	for _, p := range triton.Ports {
		ports[p.ContainerPort] = true
	}
	if !ports[8001] || !ports[8002] {
		t.Errorf("Triton container ports %v: want gRPC 8001 and metrics 8002", triton.Ports)
	}
	if len(cfg.Targets) != 1 {
		t.Fatalf("sidecar probes %d targets, want its own Triton only", len(cfg.Targets))
	}
	tg := cfg.Targets[0]
	if tg.Address != "localhost:8001" || tg.Protocol != "triton_grpc" {
		t.Errorf("sidecar target: protocol %s address %q, want triton_grpc to localhost:8001", tg.Protocol, tg.Address)
	}
	if tg.ServerMetrics == nil || tg.ServerMetrics.URL != "http://localhost:8002/metrics" {
		t.Errorf("sidecar server_metrics %+v, want http://localhost:8002/metrics", tg.ServerMetrics)
	}
	// NVML in the sidecar: the NVIDIA runtime injects the driver when asked
	// by NVIDIA_VISIBLE_DEVICES (documented in the file's header).
	var visible bool
	for _, e := range prober.Env {
		visible = visible || e.Name == "NVIDIA_VISIBLE_DEVICES"
	}
	if !visible || spec.Template.Spec.RuntimeClassName == "" {
		t.Error("sidecar: want NVIDIA_VISIBLE_DEVICES and a runtimeClassName so NVML can load")
	}
}

func TestCentralDeployment(t *testing.T) {
	objs := readManifests(t, "kubernetes/central.yaml")
	deps := find(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deps))
	}
	cfg, _ := checkProberPod(t, objs, deps[0])
	if len(cfg.Targets) < 3 {
		t.Errorf("central prober has %d targets; the example should probe several", len(cfg.Targets))
	}
	if spec := decodeSpec[deploymentSpec](t, deps[0]); spec.Replicas == nil || *spec.Replicas != 1 {
		t.Error("central Deployment: want exactly 1 replica (more would double the probe load)")
	}
}

func TestPrometheusRuleUpToDate(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("..", RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := PrometheusRule(rules)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", PrometheusRuleFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with %s: run `make deploy-rules`", PrometheusRuleFile, RulesFile)
	}

	// And by content: spec equals the rules file.
	objs := readManifests(t, filepath.Join("..", PrometheusRuleFile))
	if len(objs) != 1 || objs[0].Kind != "PrometheusRule" || objs[0].APIVersion != "monitoring.coreos.com/v1" {
		t.Fatalf("want one monitoring.coreos.com/v1 PrometheusRule, got %v", kinds(objs))
	}
	var spec, file any
	if err := objs[0].Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec, file) {
		t.Errorf("PrometheusRule spec differs from %s", RulesFile)
	}
}

func TestPrometheusRuleRejectsEmpty(t *testing.T) {
	if _, err := PrometheusRule([]byte("groups: []\n")); err == nil {
		t.Error("no error for a rules file without groups")
	}
	if _, err := PrometheusRule([]byte("groups: [\n")); err == nil {
		t.Error("no error for invalid YAML")
	}
}
