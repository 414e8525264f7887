package discovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery/kubetest"
)

func TestEndpointGroups(t *testing.T) {
	yes, no := new(true), new(false)
	terminating := kubetest.Endpoint("10.0.0.4", "d", yes)
	terminating.Conditions.Terminating = yes
	v6 := kubetest.Endpoint("fd00::5", "e", yes)
	all := []*discoveryv1.EndpointSlice{
		kubetest.Slice("llm", "vllm-b", "vllm", 8000, "http",
			kubetest.Endpoint("10.0.0.2", "b", yes), kubetest.Endpoint("10.0.0.3", "c", no), terminating, v6),
		kubetest.Slice("llm", "vllm-a", "vllm", 8000, "http",
			kubetest.Endpoint("10.0.0.1", "a", nil)),
		// The wrong port: not a target.
		kubetest.Slice("llm", "other", "vllm", 9090, "metrics", kubetest.Endpoint("10.0.0.9", "z", yes)),
	}
	k := &config.KubernetesSDConfig{Role: "endpointslice", Service: "vllm", Port: "http", Scheme: "https"}
	groups := endpointGroups(all, k)
	got := Endpoints(groups)
	want := []string{"https://10.0.0.1:8000", "https://10.0.0.2:8000", "https://[fd00::5]:8000"}
	if !slices.Equal(got, want) {
		t.Fatalf("endpoints %q, want %q (ready or unknown, not terminating, the port named http)", got, want)
	}
	wantLabels := map[string]string{
		labelNamespace: "llm", labelService: "vllm", labelSlice: "vllm-a", labelPortName: "http",
		labelNode: "node-a", labelPod: "a", "__scheme__": "https",
	}
	if !reflect.DeepEqual(groups[0].Labels, wantLabels) {
		t.Errorf("labels %v, want %v", groups[0].Labels, wantLabels)
	}

	// The port by number; a UDP port of that number is not it.
	k = &config.KubernetesSDConfig{Role: "endpointslice", Service: "vllm", Port: "9090"}
	udp := kubetest.Slice("llm", "udp", "vllm", 9090, "dns", kubetest.Endpoint("10.0.0.8", "y", yes))
	udp.Ports[0].Protocol = new(corev1.ProtocolUDP)
	if got := Endpoints(endpointGroups(append(all, udp), k)); !slices.Equal(got, []string{"10.0.0.9:9090"}) {
		t.Errorf("port 9090: %q", got)
	}
}

func TestKubeNamespaces(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "namespace")
	if err := os.WriteFile(own, []byte("llm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names   []string
		file    string
		want    []string
		wantErr string
	}{
		{names: []string{"a", "b"}, file: own, want: []string{"a", "b"}},
		{file: own, want: []string{"llm"}},
		{file: filepath.Join(dir, "absent"), want: []string{""}},
		{file: dir, wantErr: "own namespace"},
	} {
		k := &config.KubernetesSDConfig{Namespaces: config.KubernetesNamespaces{Names: tc.names}}
		got, err := kubeNamespaces(k, tc.file)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v %s: err %v, want %q", tc.names, tc.file, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v %s: %q, %v; want %q", tc.names, tc.file, got, err, tc.want)
		}
	}
}

const kubeConfigText = `
modules:
  chat: {protocol: openai_chat, model: m, allowed_targets: 'http://10\.0\.0\.[0-9]+:8000'}
target_discovery:
  - module: chat
    kubernetes_sd_configs:
      - {role: endpointslice, namespaces: {names: [llm, llm-canary]}, service: vllm, port: http}
`

const kubeSource = "target_discovery[0].kubernetes_sd_configs[0]"

// EndpointSlices watched through the API: endpoints that appear are
// listed, endpoints that become not ready or whose slice is deleted are
// not; other Services' slices are ignored; an unreachable API server keeps
// the last list and reports the source down until it answers again.
func TestKubernetesSDWatch(t *testing.T) {
	yes, no := new(true), new(false)
	api := kubetest.New(
		kubetest.Slice("llm", "vllm-1", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.1", "a", yes), kubetest.Endpoint("10.0.0.2", "b", no)),
		kubetest.Slice("llm", "tgi-1", "tgi", 8000, "http", kubetest.Endpoint("10.0.0.7", "t", yes)),
	)
	cfg := loadConfig(t, t.TempDir(), kubeConfigText)
	reg := prometheus.NewRegistry()
	var changes atomic.Int32
	m := NewManager(promslog.NewNopLogger(), reg, func() { changes.Add(1) })
	var made []*config.KubernetesSDConfig
	m.SetKubeClient(func(k *config.KubernetesSDConfig) (kubernetes.Interface, error) {
		made = append(made, k)
		return api, nil
	})
	defer m.Stop()
	m.Apply(cfg)
	if len(made) != 1 {
		t.Fatalf("%d clients made, want 1", len(made))
	}
	names := func() []string {
		var n []string
		for _, tg := range m.Expand(cfg).Targets {
			n = append(n, tg.Endpoint())
		}
		return n
	}
	// The first list is in before Apply returns.
	if got := names(); !slices.Equal(got, []string{"http://10.0.0.1:8000"}) {
		t.Fatalf("after Apply: %q, want the ready endpoint of vllm only", got)
	}
	up := func() float64 { return testutil.ToFloat64(m.up.WithLabelValues(kubeSource, "kubernetes")) }
	if up() != 1 {
		t.Errorf("up = %v after the first list", up())
	}
	api.WaitWatching(t, 2) // one watch per namespace

	ctx := context.Background()
	slicesAPI := api.DiscoveryV1().EndpointSlices
	wait := func(what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(names(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q, want %q", what, names(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// b becomes ready; a slice appears in the other namespace.
	es := kubetest.Slice("llm", "vllm-1", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.1", "a", yes), kubetest.Endpoint("10.0.0.2", "b", yes))
	if _, err := slicesAPI("llm").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := slicesAPI("llm-canary").Create(ctx, kubetest.Slice("llm-canary", "vllm-c", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.3", "c", yes)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("after b became ready and c appeared", "http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000")
	if changes.Load() == 0 {
		t.Error("no change reported")
	}

	// a terminates; c's slice is deleted.
	es = kubetest.Slice("llm", "vllm-1", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.1", "a", no), kubetest.Endpoint("10.0.0.2", "b", yes))
	es.Endpoints[0].Conditions.Terminating = yes
	if _, err := slicesAPI("llm").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := slicesAPI("llm-canary").Delete(ctx, "vllm-c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("after a terminated and c's slice went", "http://10.0.0.2:8000")

	// The API server goes away: the last list stays, the source is down.
	api.Down()
	deadline := time.Now().Add(10 * time.Second)
	for up() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("source never reported down")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := names(); !slices.Equal(got, []string{"http://10.0.0.2:8000"}) {
		t.Errorf("while down: %q, want the last good list", got)
	}
	if n := testutil.ToFloat64(m.targets.WithLabelValues(kubeSource, "kubernetes")); n != 1 {
		t.Errorf("llm_prober_discovery_targets = %v while down, want the last good 1", n)
	}
	if n := testutil.ToFloat64(m.failures.WithLabelValues(kubeSource, "kubernetes")); n < 1 {
		t.Errorf("failures = %v", n)
	}

	// It comes back, with what changed meanwhile.
	if err := api.Tracker().Add(kubetest.Slice("llm", "vllm-2", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.4", "d", yes))); err != nil {
		t.Fatal(err)
	}
	api.Up()
	deadline = time.Now().Add(15 * time.Second)
	for up() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("source never reported up again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wait("after the API server came back", "http://10.0.0.2:8000", "http://10.0.0.4:8000")

	// A reload with the same configuration keeps the watch (and makes
	// no client); one without the source stops it (goleak checks its
	// goroutines) and removes its series.
	m.Apply(loadConfig(t, t.TempDir(), kubeConfigText))
	if len(made) != 1 {
		t.Errorf("%d clients made after an unchanged reload, want 1", len(made))
	}
	wait("after an unchanged reload", "http://10.0.0.2:8000", "http://10.0.0.4:8000")
	cfg2 := *cfg
	cfg2.TargetDiscovery = nil
	m.Apply(&cfg2)
	if n := testutil.CollectAndCount(m.up); n != 0 {
		t.Errorf("%d up series after the source went", n)
	}
}

// A namespace without EndpointSlices is a source that is up with no
// targets, as soon as Apply returns: an empty list brings no events.
func TestKubernetesSDEmpty(t *testing.T) {
	cfg := loadConfig(t, t.TempDir(), kubeConfigText)
	m := NewManager(promslog.NewNopLogger(), prometheus.NewRegistry(), func() {})
	m.SetKubeClient(func(*config.KubernetesSDConfig) (kubernetes.Interface, error) { return kubetest.New(), nil })
	defer m.Stop()
	start := time.Now()
	m.Apply(cfg)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Apply took %s", d)
	}
	if v := testutil.ToFloat64(m.up.WithLabelValues(kubeSource, "kubernetes")); v != 1 {
		t.Errorf("up = %v", v)
	}
	if n := len(m.Expand(cfg).Targets); n != 0 {
		t.Errorf("%d targets", n)
	}
}

// A source whose client cannot be made (not in a cluster, no kubeconfig)
// is down and says why, without holding up Apply.
func TestKubernetesSDWithoutClient(t *testing.T) {
	cfg := loadConfig(t, t.TempDir(), kubeConfigText)
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	m := NewManager(promslog.New(&promslog.Config{Writer: logs}), reg, func() {})
	m.SetKubeClient(func(*config.KubernetesSDConfig) (kubernetes.Interface, error) {
		return nil, errors.New("unable to load in-cluster configuration")
	})
	defer m.Stop()
	start := time.Now()
	m.Apply(cfg)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Apply took %s", d)
	}
	if v := testutil.ToFloat64(m.up.WithLabelValues(kubeSource, "kubernetes")); v != 0 {
		t.Errorf("up = %v", v)
	}
	if !strings.Contains(logs.String(), "unable to load in-cluster configuration") {
		t.Errorf("no log line says why:\n%s", logs)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
