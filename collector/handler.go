package collector

import (
	"compress/gzip"
	"fmt"
	"io"
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
	// gzips are this handler's gzip writers at gzip.BestSpeed, when it
	// compresses in promhttp's place (see gzipScrapes); nil otherwise.
	gzips *sync.Pool
}

// gzipLevel is the compression of gzipped scrapes. promhttp compresses at
// gzip.DefaultCompression: for the text of 1,000 probes that took 118 ms
// of CPU for 516 KB, against 40 ms for 612 KB at BestSpeed
// (docs/performance.md) — on a link between a prober and Prometheus the
// 19 % more bytes cost less than the CPU.
const gzipLevel = gzip.BestSpeed

// NewHandler serves reg and servers with opts; opts.Registry (if any)
// counts the handler's errors.
func NewHandler(reg *prometheus.Registry, servers *ServerMetrics, opts promhttp.HandlerOpts) *Handler {
	h := &Handler{registry: reg, servers: servers, opts: opts}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	h.opts.MaxRequestsInFlight = 0
	if !opts.DisableCompression && len(opts.OfferedCompressions) == 0 {
		// promhttp's default offers, identity and gzip (zstd only when
		// its package is linked in, which it is not), negotiated here
		// as promhttp negotiates them; the gzip is ours.
		h.gzips = &sync.Pool{New: func() any {
			z, _ := gzip.NewWriterLevel(nil, gzipLevel) // a valid level: no error
			return z
		}}
		h.opts.DisableCompression = true
	}
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
	inner := promhttp.HandlerFor(parallelGatherers{h.registry, servers}, h.opts)
	if h.gzips == nil {
		inner.ServeHTTP(w, r)
		return
	}
	gw := &gzipResponse{ResponseWriter: w, pool: h.gzips}
	switch negotiateEncoding(r.Header) {
	case "gzip":
		gw.compress = true
	case "":
		// Nothing acceptable: promhttp logs this and sends identity.
		if h.opts.ErrorLog != nil {
			h.opts.ErrorLog.Println("error getting writer", fmt.Errorf("content compression format not recognized: %q", r.Header.Values("Accept-Encoding")))
		}
	}
	defer gw.close()
	inner.ServeHTTP(gw, r)
}

// gzipResponse is promhttp's response with the gzip promhttp would add:
// it adds Vary: Accept-Encoding as promhttp does, and compresses a 200
// response when compress is set. An error response (promhttp's
// httpError drops Content-Encoding and writes a plain 500) goes out as
// it is.
type gzipResponse struct {
	http.ResponseWriter
	pool     *sync.Pool
	compress bool
	started  bool
	gz       *gzip.Writer
}

// start runs before the first byte or status goes out.
func (w *gzipResponse) start(code int) {
	w.started = true
	w.Header().Add("Vary", "Accept-Encoding")
	if !w.compress || code != http.StatusOK {
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Del("Content-Length")
	w.gz = w.pool.Get().(*gzip.Writer)
	w.gz.Reset(w.ResponseWriter)
}

func (w *gzipResponse) WriteHeader(code int) {
	if !w.started {
		w.start(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *gzipResponse) Write(p []byte) (int, error) {
	if !w.started {
		w.start(http.StatusOK)
	}
	if w.gz != nil {
		return w.gz.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// close ends the gzip stream, if one was started, and returns its writer.
func (w *gzipResponse) close() {
	if w.gz == nil {
		return
	}
	_ = w.gz.Close() // a failed write has already failed promhttp's encoder
	w.gz.Reset(io.Discard)
	w.pool.Put(w.gz)
	w.gz = nil
}

// negotiateEncoding picks the response encoding from identity and gzip
// for an Accept-Encoding header, exactly as promhttp does (its vendored
// gddo NegotiateContentEncoding and ParseAccept): the offer, identity
// first, with the highest q among the specs naming it or "*"; identity
// when no spec names either; "" when the best q is 0. A malformed spec
// ends the parse of its header line, as there.
func negotiateEncoding(h http.Header) string {
	best, bestQ := "identity", -1.0
	specs := parseAcceptEncoding(h.Values("Accept-Encoding"))
	for _, offer := range [...]string{"identity", "gzip"} {
		for _, s := range specs {
			if s.q > bestQ && (s.value == "*" || s.value == offer) {
				best, bestQ = offer, s.q
			}
		}
	}
	if bestQ == 0 {
		return ""
	}
	return best
}

type acceptSpec struct {
	value string
	q     float64
}

// parseAcceptEncoding is gddo's header.ParseAccept for the header's lines.
func parseAcceptEncoding(lines []string) []acceptSpec {
	var specs []acceptSpec
	for _, s := range lines {
		for {
			var spec acceptSpec
			spec.value, s = acceptToken(s)
			if spec.value == "" {
				break
			}
			spec.q = 1
			s = strings.TrimLeft(s, " \t\r\n")
			if strings.HasPrefix(s, ";") {
				s = strings.TrimLeft(s[1:], " \t\r\n")
				if !strings.HasPrefix(s, "q=") {
					break
				}
				spec.q, s = acceptQuality(s[2:])
				if spec.q < 0 {
					break
				}
			}
			specs = append(specs, spec)
			s = strings.TrimLeft(s, " \t\r\n")
			if !strings.HasPrefix(s, ",") {
				break
			}
			s = strings.TrimLeft(s[1:], " \t\r\n")
		}
	}
	return specs
}

// acceptToken splits off a leading run of RFC 2616 token characters and
// slashes.
func acceptToken(s string) (token, rest string) {
	i := 0
	for ; i < len(s); i++ {
		b := s[i]
		if b != '/' && (b <= 31 || b >= 127 || strings.IndexByte(" \t\"(),/:;<=>?@[]\\{}", b) >= 0) {
			break
		}
	}
	return s[:i], s[i:]
}

// acceptQuality parses a q value, "0" or "1" with any number of decimal
// digits after a point; -1 when it does not start with 0 or 1.
func acceptQuality(s string) (q float64, rest string) {
	switch {
	case s == "":
		return -1, ""
	case s[0] == '0':
		q = 0
	case s[0] == '1':
		q = 1
	default:
		return -1, ""
	}
	s = s[1:]
	if !strings.HasPrefix(s, ".") {
		return q, s
	}
	s = s[1:]
	i, n, d := 0, 0, 1
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
		d *= 10
	}
	return q + float64(n)/float64(d), s[i:]
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
