package collector

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// ScrapeTimeoutHeader carries Prometheus's scrape_timeout, in seconds, on
// every scrape.
const ScrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// scrapeTimeoutOffset is what a scrape keeps, of the time Prometheus gives
// it, for everything after the model-server fetches: the rest of the
// gather, encoding and the network. blackbox_exporter's --timeout-offset
// default.
const scrapeTimeoutOffset = 500 * time.Millisecond

// serverFetchLimit is how long the model-server fetches of a scrape may take:
// the header's timeout minus scrapeTimeoutOffset, but at least half of it,
// so a sub-second scrape_timeout still leaves the fetches something. 0 (the
// configured timeouts alone) without the header, or when it is not a
// positive, finite number of seconds.
func serverFetchLimit(h http.Header) time.Duration {
	v := h.Get(ScrapeTimeoutHeader)
	if v == "" {
		return 0
	}
	secs, err := strconv.ParseFloat(v, 64)
	// !(secs > 0) also refuses NaN; anything beyond a year is no bound.
	if err != nil || !(secs > 0) || secs > 365*24*3600 {
		return 0
	}
	timeout := time.Duration(math.Round(secs * float64(time.Second)))
	return max(timeout-scrapeTimeoutOffset, timeout/2, 1)
}

// Handler serves /metrics: promhttp over the main registry and the
// model-server metrics, whose fetches are bounded by the scrape's own
// deadline. A Gatherer cannot see the request, so each request gets its
// gatherer — the main registry beside a registry holding only
// servers.Within(limit) — and a promhttp handler over it; the two are
// gathered at once, as one registry's collectors are. Nothing is shared
// between requests but what promhttp shares: the in-flight limit, kept here
// because a handler per request cannot keep it, and the error counter in
// the main registry.
type Handler struct {
	registry *prometheus.Registry
	servers  *ServerMetrics
	opts     promhttp.HandlerOpts
	inFlight chan struct{}
}

// NewHandler serves reg and servers with opts; opts.Registry (if any)
// counts the handler's errors.
func NewHandler(reg *prometheus.Registry, servers *ServerMetrics, opts promhttp.HandlerOpts) *Handler {
	h := &Handler{registry: reg, servers: servers, opts: opts}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	h.opts.MaxRequestsInFlight = 0
	// Registers promhttp_metric_handler_errors_total in opts.Registry now;
	// the per-request handlers find it there (promhttp takes the existing
	// counter on AlreadyRegisteredError) and count into the same one.
	promhttp.HandlerFor(reg, h.opts)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.inFlight != nil {
		// promhttp's own limit, answered as promhttp answers it.
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			http.Error(w, fmt.Sprintf(
				"Limit of concurrent requests reached (%d), try again later.", cap(h.inFlight),
			), http.StatusServiceUnavailable)
			return
		}
	}
	servers := prometheus.NewRegistry()
	if err := servers.Register(h.servers.Within(serverFetchLimit(r.Header))); err != nil {
		// Unreachable with consistent descriptors (tests register them
		// beside the main registry's).
		http.Error(w, "model-server metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	promhttp.HandlerFor(parallelGatherers{h.registry, servers}, h.opts).ServeHTTP(w, r)
}

// parallelGatherers is prometheus.Gatherers with every Gather run at once,
// so a slow gatherer does not wait for the others; the results are merged,
// and checked, by prometheus.Gatherers — unless they cannot clash, see
// disjointFamilies.
type parallelGatherers []prometheus.Gatherer

func (gs parallelGatherers) Gather() ([]*dto.MetricFamily, error) {
	mfss := make([][]*dto.MetricFamily, len(gs))
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() { mfss[i], errs[i] = g.Gather() })
	}
	wg.Wait()
	if merged, ok := disjointFamilies(mfss, errs); ok {
		return merged, nil
	}
	done := make(prometheus.Gatherers, len(gs))
	for i := range gs {
		mfs, err := mfss[i], errs[i]
		done[i] = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, err })
	}
	return done.Gather()
}

// disjointFamilies merges gathered results that prometheus.Gatherers
// would only re-check and re-sort: every gatherer succeeded (a Registry,
// whose Gather has run the same consistency checks and sorted its
// families by name and their metrics by labels), and no family name of
// one, nor that name without a _count, _sum or _bucket suffix, occurs in
// another, so no family is merged across gatherers and no
// histogram-suffix collision can arise between them. The result is what
// prometheus.Gatherers returns for them, to the byte: the families in
// name order, each a new family with only name, help, type and metrics,
// as Gatherers builds them. The re-check it skips costs about a fifth of
// a scrape of many probes (docs/performance.md); false means the inputs
// need Gatherers.
func disjointFamilies(mfss [][]*dto.MetricFamily, errs []error) ([]*dto.MetricFamily, bool) {
	n := 0
	for i, mfs := range mfss {
		if errs[i] != nil {
			return nil, false
		}
		n += len(mfs)
	}
	owner := make(map[string]int, 2*n)
	claim := func(stem string, i int) bool {
		if o, ok := owner[stem]; ok && o != i {
			return false
		}
		owner[stem] = i
		return true
	}
	out := make([]*dto.MetricFamily, 0, n)
	for i, mfs := range mfss {
		for j, mf := range mfs {
			name := mf.GetName()
			if j > 0 && mfs[j-1].GetName() >= name {
				return nil, false // not a Registry's sorted output
			}
			if !claim(name, i) || !claim(familyStem(name), i) {
				return nil, false
			}
			if len(mf.Metric) == 0 {
				continue // Gatherers drops empty families
			}
			out = append(out, &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Metric: mf.Metric})
		}
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, true
}

// familyStem is name without the suffix the text format adds to a
// histogram's or summary's series, or name itself.
func familyStem(name string) string {
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if stem, ok := strings.CutSuffix(name, suffix); ok {
			return stem
		}
	}
	return name
}
