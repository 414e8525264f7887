// Package kubetest is a Kubernetes API for tests of kubernetes_sd_configs:
// client-go's fake clientset, whose API server can be made unreachable,
// as a discovery.KubeClient, and EndpointSlices to put in it. (It tells
// client-go's reflector, as the fake clientset does, that it cannot
// stream lists.)
package kubetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// API is the fake clientset; while Down, lists and new watches of
// EndpointSlices fail as an unreachable API server's would.
type API struct {
	*fake.Clientset
	failing atomic.Bool
	mu      sync.Mutex
	watches []watch.Interface
	watched chan struct{}
}

// ErrDown is what the API answers while down.
var ErrDown = errors.New("dial tcp 10.96.0.1:443: connect: connection refused")

// New is an API holding objs.
func New(objs ...runtime.Object) *API {
	c := fake.NewClientset(objs...)
	f := &API{Clientset: c, watched: make(chan struct{}, 64)}
	c.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if f.failing.Load() {
			return true, nil, ErrDown
		}
		return false, nil, nil
	})
	c.PrependWatchReactor("endpointslices", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if f.failing.Load() {
			return true, nil, ErrDown
		}
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		f.mu.Lock()
		f.watches = append(f.watches, w)
		f.mu.Unlock()
		select {
		case f.watched <- struct{}{}:
		default:
		}
		return true, w, nil
	})
	return f
}

// WaitWatching waits until n more watches were opened: the fake's watch
// does not resume from the list's resource version, so a change made
// between an informer's list and its watch would be lost.
func (f *API) WaitWatching(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.watched:
		case <-time.After(10 * time.Second):
			t.Fatal("the informer never started watching")
		}
	}
}

// Down makes the API server unreachable: open watches end, and lists and
// watches fail until Up.
func (f *API) Down() {
	f.failing.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watches {
		w.Stop()
	}
	f.watches = nil
}

// ListEndpointSlices is discovery.KubeClient's list, through the fake.
func (f *API) ListEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return f.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
}

// WatchEndpointSlices is discovery.KubeClient's watch, through the fake.
func (f *API) WatchEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	return f.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
}

// Up makes the API server answer again.
func (f *API) Up() { f.failing.Store(false) }

// Endpoint is an endpoint of pod at addr (on node "node-<pod>"); ready
// nil is the API's "unknown".
func Endpoint(addr, pod string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready},
		NodeName:   new("node-" + pod),
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod},
	}
}

// Slice is an IPv4 EndpointSlice of service (labelled as the EndpointSlice
// controller labels them, plus app=<service>) with one TCP port.
func Slice(ns, name, service string, port int32, portName string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service, "app": service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new(portName), Port: new(port), Protocol: new(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}
