package discovery

// Kubernetes endpoints discovery: kubernetes_sd_configs with role
// endpointslice. Each source keeps an informer (list, then watch) on
// discovery.k8s.io/v1 EndpointSlices per namespace, through client-go, and
// reports the whole list of ready endpoints whenever it changes.
//
// client-go is used directly rather than Prometheus' discovery/kubernetes:
// at the Prometheus version this module pins (v0.313.5) that package is
// built against client-go v0.35, which does not build with the k8s.io/api
// v0.37 the deploy tests pin, and it would bring Prometheus' discovery
// manager, metrics and registries with it. client-go is the Kubernetes
// project's own client, and what Prometheus' package uses underneath.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/version"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llm-prober/llm-prober/config"
)

// KubeClient is what a kubernetes_sd source asks the API server: list
// and watch the EndpointSlices of a namespace ("" for all). NewKubeClient
// makes the real one; tests wrap client-go's fake clientset
// (discovery/kubetest).
type KubeClient interface {
	ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// KubeClientFunc makes the client of a kubernetes_sd_config.
type KubeClientFunc func(*config.KubernetesSDConfig) (KubeClient, error)

// NewKubeClient is the client of kubernetes_sd_config k: from its
// kubeconfig_file, else the in-cluster configuration (the pod's service
// account token and the KUBERNETES_SERVICE_* environment).
//
// It is a REST client for discovery.k8s.io/v1 alone rather than
// client-go's kubernetes.Clientset: the clientset's scheme registers
// every API group's types at init, which more than doubles the binary
// (32 MB to 82 MB) for the one resource read here.
func NewKubeClient(k *config.KubernetesSDConfig) (KubeClient, error) {
	var (
		rc  *rest.Config
		err error
	)
	if k.KubeconfigFile != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", k.KubeconfigFile)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "llm-prober/" + version.Version
	rc.GroupVersion = &discoveryv1.SchemeGroupVersion
	rc.APIPath = "/apis"
	rc.NegotiatedSerializer = serializer.NewCodecFactory(kubeScheme).WithoutConversion()
	c, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return restKube{c}, nil
}

// kubeScheme knows EndpointSlices and the API's own objects (Status,
// watch events) only.
var kubeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

type restKube struct{ c *rest.RESTClient }

func (r restKube) ListEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	out := &discoveryv1.EndpointSliceList{}
	err := r.c.Get().Namespace(ns).Resource("endpointslices").
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r restKube) WatchEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.c.Get().Namespace(ns).Resource("endpointslices").
		VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// ServiceAccountNamespaceFile holds the namespace of the pod the prober
// runs in; a kubernetes_sd_config without namespaces watches that one.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// kubeSettle is how long a source waits after reporting a list before it
// reports the next: a rollout changes EndpointSlices many times in a
// second, and each report re-applies every probe.
const kubeSettle = time.Second

// Labels of a discovered endpoint's group, in Prometheus' names (its
// endpointslice role). Like file_sd's labels they describe the endpoint
// and are not metric labels: the target's name already is one per
// endpoint.
const (
	labelNamespace     = "__meta_kubernetes_namespace"
	labelService       = "__meta_kubernetes_service_name"
	labelSlice         = "__meta_kubernetes_endpointslice_name"
	labelPortName      = "__meta_kubernetes_endpointslice_port_name"
	labelNode          = "__meta_kubernetes_endpointslice_endpoint_node_name"
	labelPod           = "__meta_kubernetes_pod_name"
	serviceNameLabel   = discoveryv1.LabelServiceName
	allNamespaces      = metav1.NamespaceAll
	maxKubeErrorLength = 512
)

// kubeWatch is the watch of one kubernetes_sd_config.
type kubeWatch struct {
	cfg        *config.KubernetesSDConfig
	client     KubeClient
	namespaces []string
	selector   labels.Selector
	logger     *slog.Logger
	settle     time.Duration

	mu sync.Mutex
	// errs is, per namespace, the error of its last list or watch call,
	// until one succeeds: the source is down while any is set.
	errs map[string]error
	// dirty is signalled (never blocking) when the lists or the errors
	// changed.
	dirty chan struct{}
}

// kubeSource is the source of kubernetes_sd_config k. Its client is made
// when it starts, so a source that a reload keeps costs nothing. A client
// that cannot be made, or a namespace that cannot be read, is a source
// that reports the error: it stays down and says why.
func (m *Manager) kubeSource(name, module string, k *config.KubernetesSDConfig) *source {
	s := &source{name: name, mechanism: "kubernetes", module: module, cfg: k}
	s.watch = func(ctx context.Context, report func([]Group, error)) {
		namespaces, err := kubeNamespaces(k, m.namespaceFile)
		var client KubeClient
		if err == nil {
			client, err = m.kubeClient(k)
		}
		if err != nil {
			report(nil, err)
			<-ctx.Done()
			return
		}
		w := &kubeWatch{
			cfg: k, client: client, namespaces: namespaces, selector: k.Selector(),
			logger: m.logger.With("source", name), settle: kubeSettle,
			errs: map[string]error{}, dirty: make(chan struct{}, 1),
		}
		w.run(ctx, report)
	}
	return s
}

// kubeNamespaces is what k watches: its namespaces, else the prober's own
// (from the service account's file) when that file exists, else all.
func kubeNamespaces(k *config.KubernetesSDConfig, nsFile string) ([]string, error) {
	if len(k.Namespaces.Names) > 0 {
		return k.Namespaces.Names, nil
	}
	b, err := os.ReadFile(nsFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return []string{allNamespaces}, nil
	case err != nil:
		return nil, fmt.Errorf("reading the prober's own namespace: %w", err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return nil, fmt.Errorf("%s is empty; name the namespaces to watch", nsFile)
	}
	return []string{ns}, nil
}

func (w *kubeWatch) poke() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// result records the outcome of a list or watch call for namespace ns.
func (w *kubeWatch) result(ctx context.Context, ns string, err error) {
	if ctx.Err() != nil {
		return // stopping: not a failure of the API server
	}
	w.mu.Lock()
	_, wasDown := w.errs[ns]
	if err != nil {
		w.errs[ns] = err
	} else {
		delete(w.errs, ns)
	}
	w.mu.Unlock()
	if err != nil || wasDown {
		w.poke()
	}
}

// run watches until ctx ends, calling report with the whole list whenever
// it changed, or with the error while the API server cannot be listed or
// watched (the informers keep what they last had, and so does the
// manager).
func (w *kubeWatch) run(ctx context.Context, report func([]Group, error)) {
	// client-go logs through the context's logger: the prober's, with
	// its levels (client-go's verbose lines are below Debug).
	lctx := klog.NewContext(ctx, logr.FromSlogHandler(w.logger.Handler()))
	var wg sync.WaitGroup
	defer wg.Wait()
	infs := make([]cache.SharedIndexInformer, len(w.namespaces))
	synced := make([]cache.InformerSynced, len(w.namespaces))
	for i, ns := range w.namespaces {
		infs[i] = w.informer(ns)
		synced[i] = infs[i].HasSynced
		wg.Go(func() { infs[i].RunWithContext(lctx) })
	}
	// The first list is reported once every informer has it: its
	// events may arrive before HasSynced says so, and an empty list
	// has none.
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			w.poke()
		}
	})
	var seen map[string]bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.dirty:
		}
		if groups, err, ok := w.snapshot(infs); ok {
			if err == nil {
				seen = w.logChanges(seen, groups)
			}
			report(groups, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.settle):
		}
	}
}

// logChanges logs, at Debug, each endpoint that appeared or went, with
// the pod, namespace and node it is (which the target's name, an
// address, does not say); it returns the endpoints now listed.
func (w *kubeWatch) logChanges(seen map[string]bool, groups []Group) map[string]bool {
	now := make(map[string]bool, len(groups))
	for _, g := range groups {
		ep := g.Targets[0]
		now[ep] = true
		if !seen[ep] {
			w.logger.Debug("Kubernetes endpoint ready", "endpoint", ep, "namespace", g.Labels[labelNamespace],
				"service", g.Labels[labelService], "pod", g.Labels[labelPod], "node", g.Labels[labelNode])
		}
	}
	for ep := range seen {
		if !now[ep] {
			w.logger.Debug("Kubernetes endpoint gone or not ready", "endpoint", ep)
		}
	}
	return now
}

func (w *kubeWatch) informer(ns string) cache.SharedIndexInformer {
	sel := w.selector.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			l, err := w.client.ListEndpointSlices(ctx, ns, o)
			w.result(ctx, ns, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			wi, err := w.client.WatchEndpointSlices(ctx, ns, o)
			w.result(ctx, ns, err)
			return wi, err
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(
		// The client says whether it can stream the initial list
		// (WatchList); the fake one in tests cannot.
		cache.ToListWatcherWithWatchListSemantics(lw, w.client),
		&discoveryv1.EndpointSlice{}, cache.SharedIndexInformerOptions{})
	// Errors are reported by the list and watch calls above; a watch
	// that ends (expired, closed) is listed or watched again by the
	// reflector, so its error is only worth a debug line, not
	// client-go's default Error line.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.logger.Debug("EndpointSlice watch ended", "namespace", ns, "err", err)
	})
	// Only what makes targets is kept.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
			es.ManagedFields = nil
			es.Annotations = nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	})
	return inf
}

// snapshot is the current list, or the error that makes the source down;
// ok is false before every informer has its first list.
func (w *kubeWatch) snapshot(infs []cache.SharedIndexInformer) (groups []Group, err error, ok bool) {
	w.mu.Lock()
	var nsErrs []error
	for _, ns := range w.namespaces {
		if e := w.errs[ns]; e != nil {
			nsErrs = append(nsErrs, namespaceError(ns, e))
		}
	}
	w.mu.Unlock()
	if len(nsErrs) > 0 {
		return nil, errors.Join(nsErrs...), true
	}
	var all []*discoveryv1.EndpointSlice
	for _, inf := range infs {
		if !inf.HasSynced() {
			return nil, nil, false
		}
		for _, o := range inf.GetStore().List() {
			// The selector is also the list's and the watch's; checked
			// again so that the result never depends on the server's
			// filtering.
			if es, ok := o.(*discoveryv1.EndpointSlice); ok && w.selector.Matches(labels.Set(es.Labels)) {
				all = append(all, es)
			}
		}
	}
	groups = endpointGroups(all, w.cfg)
	n := 0
	for _, g := range groups {
		n += len(g.Targets)
	}
	if n > MaxSourceTargets {
		return nil, fmt.Errorf("more than %d ready endpoints", MaxSourceTargets), true
	}
	return groups, nil, true
}

func namespaceError(ns string, err error) error {
	msg := err.Error()
	if len(msg) > maxKubeErrorLength {
		msg = msg[:maxKubeErrorLength] + "…"
	}
	if ns == allNamespaces {
		return fmt.Errorf("EndpointSlices of all namespaces: %s", msg)
	}
	return fmt.Errorf("EndpointSlices of namespace %s: %s", ns, msg)
}

// endpointGroups is one group per ready endpoint of the slices that have
// k's port: its first address (the others of an endpoint are the same
// pod's) with the port, and labels naming the namespace, Service, slice,
// pod and node. Sorted, so that an unchanged set is an unchanged list.
func endpointGroups(all []*discoveryv1.EndpointSlice, k *config.KubernetesSDConfig) []Group {
	slices.SortFunc(all, func(a, b *discoveryv1.EndpointSlice) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var groups []Group
	for _, es := range all {
		port, ok := slicePort(es, k)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			if !ready(ep) || len(ep.Addresses) == 0 {
				continue
			}
			l := map[string]string{
				labelNamespace: es.Namespace,
				labelSlice:     es.Name,
			}
			if svc := es.Labels[serviceNameLabel]; svc != "" {
				l[labelService] = svc
			}
			if port.Name != nil && *port.Name != "" {
				l[labelPortName] = *port.Name
			}
			if ep.NodeName != nil && *ep.NodeName != "" {
				l[labelNode] = *ep.NodeName
			}
			if r := ep.TargetRef; r != nil && r.Kind == "Pod" {
				l[labelPod] = r.Name
			}
			if k.Scheme != "" {
				l["__scheme__"] = k.Scheme
			}
			addr := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*port.Port)))
			if checkEndpoint(addr) != nil {
				continue
			}
			groups = append(groups, Group{Targets: []string{addr}, Labels: l})
		}
	}
	slices.SortStableFunc(groups, func(a, b Group) int { return cmp.Compare(a.Targets[0], b.Targets[0]) })
	return groups
}

// slicePort is the port of es that k chooses, by number or by name.
func slicePort(es *discoveryv1.EndpointSlice, k *config.KubernetesSDConfig) (discoveryv1.EndpointPort, bool) {
	num, isNum := k.PortNumber()
	for _, p := range es.Ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != "TCP") {
			continue
		}
		if (isNum && *p.Port == num) || (!isNum && p.Name != nil && *p.Name == k.Port) {
			return p, true
		}
	}
	return discoveryv1.EndpointPort{}, false
}

// ready is whether traffic should go to ep: ready (unknown counts as
// ready, as the API says consumers should take it) and not terminating.
func ready(ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	if c.Terminating != nil && *c.Terminating {
		return false
	}
	return c.Ready == nil || *c.Ready
}
