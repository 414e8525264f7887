package collector

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// testState is a store state that sends one metric per collect.
type testState struct {
	name string
	m    prometheus.Metric
}

func (s *testState) collect(ch chan<- prometheus.Metric) { ch <- s.m }

var testStateDesc = prometheus.NewDesc("test_state", "A test state.", nil, nil)

func newTestState(name string) *testState {
	return &testState{name: name, m: prometheus.MustNewConstMetric(testStateDesc, prometheus.GaugeValue, 1)}
}

// collected is what st sends, by state name.
func collected(st *store[probeKey, *testState]) map[string]int {
	out := map[string]int{}
	for _, s := range st.states() {
		out[s.name]++
	}
	return out
}

func TestStorePutKeepsOrReplaces(t *testing.T) {
	var st store[probeKey, *testState]
	k := probeKey{"t", "p"}
	st.put(k, nil, func() *testState { return newTestState("first") })
	st.put(k, func(old *testState) bool { return old.name == "first" }, func() *testState {
		t.Fatal("build called although keep kept the state")
		return nil
	})
	if s, ok := st.get(k); !ok || s.name != "first" {
		t.Fatalf("after a keeping put: %v %v, want the first state", s, ok)
	}
	st.put(k, func(*testState) bool { return false }, func() *testState { return newTestState("second") })
	if s, _ := st.get(k); s.name != "second" {
		t.Fatalf("after a replacing put: %q, want second", s.name)
	}
	if got := collected(&st); len(got) != 1 || got["second"] != 1 {
		t.Fatalf("collected %v, want only second", got)
	}
}

func TestStoreRemove(t *testing.T) {
	var st store[probeKey, *testState]
	for _, p := range []string{"a", "b", "c"} {
		st.put(probeKey{"t", p}, nil, func() *testState { return newTestState(p) })
	}
	if got := collected(&st); len(got) != 3 {
		t.Fatalf("collected %v, want a, b and c", got)
	}
	st.remove(probeKey{"t", "b"})
	st.remove(probeKey{"t", "never added"})
	if _, ok := st.get(probeKey{"t", "b"}); ok {
		t.Error("b still there after remove")
	}
	if got := collected(&st); len(got) != 2 || got["b"] != 0 {
		t.Errorf("collected %v after removing b, want a and c", got)
	}
	st.removeIf(probeKey{"t", "a"}, func(*testState) bool { return false })
	if _, ok := st.get(probeKey{"t", "a"}); !ok {
		t.Error("removeIf removed a state its func kept")
	}
	st.removeIf(probeKey{"t", "a"}, func(*testState) bool { return true })
	if got := collected(&st); len(got) != 1 || got["c"] != 1 {
		t.Errorf("collected %v, want only c", got)
	}
}

// A scrape of an unchanged store ranges over the list built after the
// last change: no allocation, whatever the number of probes.
func TestStoreCollectDoesNotAllocate(t *testing.T) {
	var st store[probeKey, *testState]
	for i := range 1000 {
		st.put(probeKey{"t", fmt.Sprint(i)}, nil, func() *testState { return newTestState(fmt.Sprint(i)) })
	}
	ch := make(chan prometheus.Metric, 1000)
	drain := func() {
		st.collect(ch)
		for range 1000 {
			<-ch
		}
	}
	drain()
	if n := testing.AllocsPerRun(10, drain); n != 0 {
		t.Errorf("collect allocated %v times, want 0", n)
	}
}

// Puts, removes, lookups and scrapes at once, for the race detector;
// every scrape sees a list that was the store's contents at some point
// (no state twice).
func TestStoreConcurrent(t *testing.T) {
	var st store[probeKey, *testState]
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k := probeKey{"t", fmt.Sprint(i % 20)}
				switch (i + w) % 3 {
				case 0:
					st.put(k, func(*testState) bool { return i%2 == 0 }, func() *testState { return newTestState(k.probe) })
				case 1:
					st.remove(k)
				default:
					st.get(k)
				}
			}
		})
		wg.Go(func() {
			for range 200 {
				for name, n := range collected(&st) {
					if n != 1 {
						t.Errorf("state %s listed %d times", name, n)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestLazyBuildsOnce(t *testing.T) {
	var l lazy[int]
	if l.load() != nil {
		t.Fatal("a zero lazy holds a value")
	}
	var builds sync.WaitGroup
	var mu sync.Mutex
	seen := map[*int]bool{}
	for range 8 {
		builds.Go(func() {
			v := l.get(func() *int { return new(int) })
			mu.Lock()
			seen[v] = true
			mu.Unlock()
		})
	}
	builds.Wait()
	if len(seen) != 1 || !seen[l.load()] {
		t.Errorf("concurrent first uses got %d values, want the one stored", len(seen))
	}
}

// A ProbeMetrics scrape sends each family's series already in the
// registry's order (by model, probe, target), whatever order the probes
// were added in, so its sort finds them sorted.
func TestStoreStatesSortedByBaseLabels(t *testing.T) {
	m := NewProbeMetrics()
	for _, k := range [][3]string{{"b", "p2", "m1"}, {"a", "p2", "m1"}, {"z", "p1", "m1"}, {"a", "p9", "m0"}, {"a", "p1", "m1"}} {
		m.Add(ProbeSeries{Target: k[0], Probe: k[1], Model: k[2], Protocol: probe.ProtocolOpenAIChat})
	}
	var got []string
	for _, s := range m.probes.states() {
		got = append(got, fmt.Sprintf("%s/%s/%s", s.model, s.labels[1].GetValue(), s.labels[2].GetValue()))
	}
	want := []string{"m0/p9/a", "m1/p1/a", "m1/p1/z", "m1/p2/a", "m1/p2/b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("states in order %v, want %v", got, want)
	}
}
