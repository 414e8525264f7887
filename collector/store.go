package collector

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Every per-probe family (ProbeMetrics, AnswerMetrics, CancelMetrics,
// PrefixMetrics, PooledMetrics, and RateLimitMetrics per target) keeps its
// probes' state in a store: the config reload adds a probe (keeping its
// series when nothing they depend on changed, so counters survive), removes
// it, results look it up, and a scrape ranges over all of them. A family
// is its descriptors, its per-probe state type and what it records; the
// bookkeeping is here once. A family that a probe does not use (a cancel
// family for a probe without cancel:, a budget that drops a histogram) is
// simply not put for that probe, or removed from it: switching it off costs
// the probe nothing.

// probeKey identifies one configured probe: target and probe name. The
// model is not part of it: a changed model replaces the probe's series.
type probeKey struct{ target, probe string }

// exposer is a store's per-key state: it sends its series to a scrape.
type exposer interface {
	collect(ch chan<- prometheus.Metric)
}

// store maps keys to their state for one family; the zero value is an
// empty store. Lookups and scrapes share a read lock with each other;
// only put and remove, which a reload calls, take the write lock.
type store[K comparable, S exposer] struct {
	mu sync.RWMutex
	m  map[K]S
	// list is the states as of the last put or remove, which a scrape
	// ranges over without locking or allocating; nil after a change
	// until the next scrape rebuilds it.
	list atomic.Pointer[[]S]
}

// put gives k the state build returns, unless k has a state and keep
// (nil: never) says it still fits: then that state, with its counters,
// stays. keep
// and build run under the store's write lock, so keep may change state
// that only put and remove touch (RateLimitMetrics' probes of a
// target); neither may call back into the store.
func (st *store[K, S]) put(k K, keep func(old S) bool, build func() S) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, ok := st.m[k]; ok && keep != nil && keep(old) {
		return
	}
	if st.m == nil {
		st.m = make(map[K]S)
	}
	st.m[k] = build()
	st.list.Store(nil)
}

// remove drops k's state with all its series.
func (st *store[K, S]) remove(k K) {
	st.removeIf(k, nil)
}

// removeIf drops k's state if last, run under the write lock like
// put's keep, says it is done (nil: always).
func (st *store[K, S]) removeIf(k K, last func(S) bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.m[k]
	if !ok || (last != nil && !last(s)) {
		return
	}
	delete(st.m, k)
	st.list.Store(nil)
}

// get is k's state; false when k was never put or was removed (a
// request in flight during a reload can end after its probe is gone).
func (st *store[K, S]) get(k K) (S, bool) {
	st.mu.RLock()
	s, ok := st.m[k]
	st.mu.RUnlock()
	return s, ok
}

// collect sends every state's series. It sends without holding the
// lock, so a slow scrape consumer does not hold up a reload.
func (st *store[K, S]) collect(ch chan<- prometheus.Metric) {
	for _, s := range st.states() {
		s.collect(ch)
	}
}

// states is the current states, rebuilt after a change by the first
// caller. It is rebuilt and stored under the read lock, which put and
// remove exclude, so a stored list always matches the map.
func (st *store[K, S]) states() []S {
	if l := st.list.Load(); l != nil {
		return *l
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if l := st.list.Load(); l != nil {
		return *l
	}
	l := make([]S, 0, len(st.m))
	for _, s := range st.m {
		l = append(l, s)
	}
	sortStates(l)
	st.list.Store(&l)
	return l
}

// ordered is a state whose series all carry its base label pairs,
// sorted by name (probeLabels: model, probe, target).
type ordered interface {
	baseLabels() probeLabels
}

// sortStates puts states that are ordered in the order of their base
// label values, the order the registry sorts each family's metrics into
// on every scrape (client_golang's internal MetricSorter compares label
// values pair by pair). A family with only the base labels then arrives
// sorted, which the registry's pdqsort finishes in one pass instead of
// n log n comparisons of label values; other families arrive in runs.
// Sorting here costs once per config change; the scrape's sort, which
// stays, is what makes the output sorted whatever the input.
func sortStates[S exposer](l []S) {
	if len(l) < 2 {
		return
	}
	if _, ok := any(l[0]).(ordered); !ok {
		return
	}
	slices.SortFunc(l, func(a, b S) int {
		la, lb := any(a).(ordered).baseLabels(), any(b).(ordered).baseLabels()
		for i := range min(len(la), len(lb)) {
			if c := strings.Compare(la[i].GetValue(), lb[i].GetValue()); c != 0 {
				return c
			}
		}
		return len(la) - len(lb)
	})
}

// lazy is a series created on its first use, so a probe that never sees
// the event (a retry, a TLS phase, a server timing) exports nothing for
// it; the zero value holds none.
type lazy[T any] struct{ p atomic.Pointer[T] }

// load is the series, nil before its first use.
func (l *lazy[T]) load() *T { return l.p.Load() }

// get is the series, built by build on first use. Concurrent first uses
// agree on one through the CompareAndSwap.
func (l *lazy[T]) get(build func() *T) *T {
	if v := l.p.Load(); v != nil {
		return v
	}
	v := build()
	if l.p.CompareAndSwap(nil, v) {
		return v
	}
	return l.p.Load()
}

// probeFamily is what a per-probe collector embeds: its descriptors and
// its store of probes. It gives the collector Describe, Collect and
// Remove; the collector adds Add (what its state is built from, and when
// a reload keeps it) and what it records.
type probeFamily[S exposer] struct {
	descs  []*prometheus.Desc
	probes store[probeKey, S]
}

// Describe sends the fixed descriptor of every metric of the family,
// making it a checked collector although its series come and go with
// the config.
func (f *probeFamily[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range f.descs {
		ch <- d
	}
}

// Collect sends the series of every probe.
func (f *probeFamily[S]) Collect(ch chan<- prometheus.Metric) {
	f.probes.collect(ch)
}

// Remove drops every series of one probe; a probe not added is a no-op.
func (f *probeFamily[S]) Remove(target, probeName string) {
	f.probes.remove(probeKey{target, probeName})
}

// get is a probe's state; false when it is not (or no longer) added.
func (f *probeFamily[S]) get(target, probeName string) (S, bool) {
	return f.probes.get(probeKey{target, probeName})
}

// put is store.put for one probe.
func (f *probeFamily[S]) put(target, probeName string, keep func(old S) bool, build func() S) {
	f.probes.put(probeKey{target, probeName}, keep, build)
}

// collectCounters sends the counters of cs that exist: a family of
// counters by reason, each created on its first count.
func collectCounters(ch chan<- prometheus.Metric, cs []lazy[counter]) {
	for i := range cs {
		if c := cs[i].load(); c != nil {
			ch <- c
		}
	}
}

// countReason adds one to the counter of c for label=value, creating it
// (labelled like the series' others) on its first count.
func (s *series) countReason(c *lazy[counter], desc *prometheus.Desc, label, value string) {
	c.get(func() *counter { return s.lateCounter(desc, label, value) }).Inc()
}
