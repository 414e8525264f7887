package discovery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery/kubetest"
	itestutil "github.com/llm-prober/llm-prober/internal/testutil"
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
	m.SetKubeClient(func(k *config.KubernetesSDConfig) (KubeClient, error) {
		made = append(made, k)
		return api, nil
	})
	defer m.Stop()
	m.Apply(cfg)
	if len(made) != 1 {
		t.Fatalf("%d clients made, want 1", len(made))
	}
	names := func() []string { return endpoints(m, cfg) }
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
	m.SetKubeClient(func(*config.KubernetesSDConfig) (KubeClient, error) { return kubetest.New(), nil })
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
	logs := &itestutil.SyncBuffer{}
	m := NewManager(promslog.New(&promslog.Config{Writer: logs}), reg, func() {})
	m.SetKubeClient(func(*config.KubernetesSDConfig) (KubeClient, error) {
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

// endpoints are the endpoints of the targets m expands cfg to.
func endpoints(m *Manager, cfg *config.Config) []string {
	var n []string
	for _, tg := range m.Expand(cfg).Targets {
		n = append(n, tg.Endpoint())
	}
	return n
}

// fakeAPIServer answers the two requests NewKubeClient's REST client
// makes, as an API server does: a list of EndpointSlices, and a watch
// (streaming the initial list when asked, then the events sent to it).
type fakeAPIServer struct {
	t      *testing.T
	items  []discoveryv1.EndpointSlice
	events chan watch.Event

	mu      sync.Mutex
	queries []string
	auth    []string
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if r.URL.Path != "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		list := discoveryv1.EndpointSliceList{
			TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"},
			Items:    f.items,
		}
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	enc := json.NewEncoder(w)
	send := func(typ watch.EventType, es *discoveryv1.EndpointSlice) {
		es.TypeMeta = metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"}
		_ = enc.Encode(map[string]any{"type": typ, "object": es})
		w.(http.Flusher).Flush()
	}
	if q.Get("sendInitialEvents") == "true" {
		for i := range f.items {
			send(watch.Added, &f.items[i])
		}
		send(watch.Bookmark, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: "1",
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	} else {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-f.events:
			send(e.Type, e.Object.(*discoveryv1.EndpointSlice))
		}
	}
}

// NewKubeClient's REST client, configured from a kubeconfig_file, lists
// and watches EndpointSlices the way an API server serves them: with the
// kubeconfig's token, the Service's label selector, and watch events
// decoded.
func TestKubeClientREST(t *testing.T) {
	yes := new(true)
	api := &fakeAPIServer{
		t:      t,
		items:  []discoveryv1.EndpointSlice{*kubetest.Slice("llm", "vllm-1", "vllm", 8000, "http", kubetest.Endpoint("10.0.0.1", "a", yes))},
		events: make(chan watch.Event, 1),
	}
	// TLS: client-go sends a kubeconfig's credentials over HTTPS only.
	srv := httptest.NewTLSServer(api)
	defer srv.Close()
	dir := t.TempDir()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + srv.URL + `", certificate-authority-data: ` + ca + `}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, `
modules:
  chat: {protocol: openai_chat, model: m, allowed_targets: 'http://10\.0\.0\.[0-9]+:8000'}
target_discovery:
  - module: chat
    kubernetes_sd_configs:
      - {role: endpointslice, kubeconfig_file: kubeconfig, namespaces: {names: [llm]}, service: vllm, port: http}
`)
	logs := &itestutil.SyncBuffer{}
	level := promslog.NewLevel()
	if err := level.Set("debug"); err != nil {
		t.Fatal(err)
	}
	m := NewManager(promslog.New(&promslog.Config{Writer: logs, Level: level}), prometheus.NewRegistry(), func() {})
	defer m.Stop()
	m.Apply(cfg)
	names := func() []string { return endpoints(m, cfg) }
	if got := names(); !slices.Equal(got, []string{"http://10.0.0.1:8000"}) {
		t.Fatalf("after Apply: %q", got)
	}
	api.events <- watch.Event{Type: watch.Modified, Object: kubetest.Slice("llm", "vllm-1", "vllm", 8000, "http",
		kubetest.Endpoint("10.0.0.1", "a", yes), kubetest.Endpoint("10.0.0.2", "b", yes))}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(names(), []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000"}) {
		if time.Now().After(deadline) {
			t.Fatalf("watched change not seen: %q", names())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.Stop()
	// Which pod an endpoint is, said once when it appears.
	if want := `msg="Kubernetes endpoint ready" logged_source=target_discovery[0].kubernetes_sd_configs[0] endpoint=10.0.0.2:8000 namespace=llm service=vllm pod=b node=node-b`; !strings.Contains(logs.String(), want) {
		t.Errorf("no log line %s in:\n%s", want, logs)
	}

	api.mu.Lock()
	defer api.mu.Unlock()
	for i, q := range api.queries {
		if !strings.Contains(q, "labelSelector=kubernetes.io%2Fservice-name%3Dvllm") {
			t.Errorf("request %s without the Service's label selector", q)
		}
		if api.auth[i] != "Bearer t0ken" {
			t.Errorf("request %s with Authorization %q, want the kubeconfig's token", q, api.auth[i])
		}
	}
}
