package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"

	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// MaxServerMetricsBytes bounds what one scrape of a model server reads
// (after decompression). Real expositions are tens of kilobytes; a server
// answering with more is broken or hostile, and reading it would cost the
// prober memory on every scrape.
const MaxServerMetricsBytes = 16 << 20

// serverAccept prefers the classic text format, which every server speaks
// and the parser reads natively; OpenMetrics is reduced to it.
const serverAccept = "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"

// ServerTarget is one model server whose /metrics are scraped.
type ServerTarget struct {
	// Name is the prober's target name, the target label.
	Name string
	URL  string
	// Kind is auto or one of the server kinds.
	Kind string
	// Timeout bounds each scrape; config's server_metrics.timeout, whose
	// default config applies. A target without one is never fetched.
	Timeout time.Duration
	// TLSConfig is the target's; the API key is not sent: /metrics is
	// usually unauthenticated and often on another port.
	TLSConfig promconfig.TLSConfig
}

// ServerMetrics scrapes model servers' /metrics when Prometheus scrapes the
// prober and exports them under normalised llm_server_* names.
type ServerMetrics struct {
	logger             *slog.Logger
	norm               *normaliser
	maxBytes           int64
	outputs            map[string]*prometheus.Desc
	types              map[string]prometheus.ValueType
	up, dur, truncated *prometheus.Desc
	selfOK             *prometheus.Desc
	selfDur            *prometheus.Desc
	mu                 sync.RWMutex
	targets            []*serverTarget
	userAgent          string
}

type serverTarget struct {
	ServerTarget
	client    *http.Client
	clientErr error

	// mu guards what is logged once per change across concurrent scrapes.
	mu       sync.Mutex
	detected string
	lastErr  string
	// last is the newest scrape's snapshot, for the status page.
	last *ServerSnapshot
}

// NewServerMetrics returns a collector with no targets; give it targets
// with SetTargets (config.Config.ServerTargets has them).
func NewServerMetrics(logger *slog.Logger) *ServerMetrics {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &ServerMetrics{
		logger:    logger,
		norm:      newNormaliser(),
		maxBytes:  MaxServerMetricsBytes,
		outputs:   map[string]*prometheus.Desc{},
		types:     map[string]prometheus.ValueType{},
		userAgent: "llm-prober/" + version.Version,
		up: prometheus.NewDesc(serverUp,
			"Whether the last scrape of the model server's metrics succeeded and held metrics of its kind (1) or not (0).",
			[]string{"target"}, nil),
		dur: prometheus.NewDesc(serverScrapeDuration,
			"How long the last scrape of the model server's metrics took.", []string{"target"}, nil),
		truncated: prometheus.NewDesc(serverLabelsTruncated,
			"Model label values in the last scrape of the model server's metrics that were longer than 256 bytes and were cut to 256 before being exported; absent while none was.", []string{"target"}, nil),
	}
	c.selfOK, c.selfDur = collectorSelfDescs("server_metrics")
	for _, o := range append(serverOutputs(), append(latencyCounterOutputs(), latencyHistogramOutputs()...)...) {
		labels := []string{"target", "server", "model"}
		if o.extra != "" {
			labels = append(labels, o.extra)
		}
		c.outputs[o.name] = prometheus.NewDesc(o.name, o.help, labels, nil)
		c.types[o.name] = o.typ
	}
	return c
}

// SetTargets replaces the scraped targets. A target whose URL, kind and TLS
// settings did not change keeps its connections and what it logged.
func (c *ServerMetrics) SetTargets(ts []ServerTarget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[string]*serverTarget{}
	for _, t := range c.targets {
		old[t.Name] = t
	}
	next := make([]*serverTarget, 0, len(ts))
	for _, t := range ts {
		if o := old[t.Name]; o != nil && sameServerTarget(o.ServerTarget, t) {
			delete(old, t.Name)
			if o.Timeout != t.Timeout {
				// A scrape may be reading o: copy rather than mutate.
				n := &serverTarget{ServerTarget: t, client: o.client, clientErr: o.clientErr}
				o.mu.Lock()
				n.detected, n.lastErr, n.last = o.detected, o.lastErr, o.last
				o.mu.Unlock()
				o = n
			}
			next = append(next, o)
			continue
		}
		st := &serverTarget{ServerTarget: t}
		st.client, st.clientErr = promconfig.NewClientFromConfig(
			promconfig.HTTPClientConfig{TLSConfig: t.TLSConfig, FollowRedirects: true, EnableHTTP2: true},
			"server_metrics")
		if st.clientErr != nil {
			c.logger.Error("Cannot build the HTTP client for server metrics", "target", t.Name, "err", st.clientErr)
		}
		next = append(next, st)
	}
	for _, o := range old {
		o.closeIdle()
	}
	c.targets = next
}

func sameServerTarget(a, b ServerTarget) bool {
	return a.URL == b.URL && a.Kind == b.Kind && a.TLSConfig == b.TLSConfig
}

func (t *serverTarget) closeIdle() {
	if t.client != nil {
		t.client.CloseIdleConnections()
	}
}

// Close drops idle connections to every server.
func (c *ServerMetrics) Close() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.targets {
		t.closeIdle()
	}
}

// Describe sends every descriptor: the collector is checked.
func (c *ServerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.outputs {
		ch <- d
	}
	ch <- c.up
	ch <- c.dur
	ch <- c.truncated
	ch <- c.selfOK
	ch <- c.selfDur
}

// Within returns c as a collector whose Collect is CollectWithin(ch,
// limit), with c's descriptors: register it, instead of c, in a registry
// gathered for one scrape that must end within limit.
func (c *ServerMetrics) Within(limit time.Duration) prometheus.Collector {
	return serverMetricsWithin{c: c, limit: limit}
}

type serverMetricsWithin struct {
	c     *ServerMetrics
	limit time.Duration
}

func (w serverMetricsWithin) Describe(ch chan<- *prometheus.Desc) { w.c.Describe(ch) }

func (w serverMetricsWithin) Collect(ch chan<- prometheus.Metric) { w.c.CollectWithin(ch, w.limit) }

type serverScrape struct {
	t        *serverTarget
	res      normalisation
	err      error
	duration time.Duration
}

// Collect scrapes every target at once; each scrape is bounded by its
// target's timeout, so Collect returns within the longest one.
func (c *ServerMetrics) Collect(ch chan<- prometheus.Metric) {
	c.CollectWithin(ch, 0)
}

// CollectWithin is Collect with every fetch also bounded by limit when
// limit > 0: each target gets the shorter of its timeout and limit, so
// CollectWithin returns within about limit. A fetch cut short by limit
// fails as a timeout does (llm_server_up 0). It is safe to call
// concurrently with different limits.
func (c *ServerMetrics) CollectWithin(ch chan<- prometheus.Metric, limit time.Duration) {
	start := time.Now()
	c.mu.RLock()
	targets := c.targets
	c.mu.RUnlock()

	results := make([]serverScrape, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			s := time.Now()
			res, err := c.scrape(t, limit)
			results[i] = serverScrape{t: t, res: res, err: redact.Default().Error(err), duration: time.Since(s)}
		})
	}
	wg.Wait()

	ok := true
	for _, r := range results {
		up := 1.0
		if r.err != nil {
			up, ok = 0, false
		}
		c.noteOutcome(r)
		r.t.remember(r, time.Now())
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, r.t.Name)
		ch <- prometheus.MustNewConstMetric(c.dur, prometheus.GaugeValue, r.duration.Seconds(), r.t.Name)
		if r.err != nil {
			continue
		}
		if n := r.res.truncatedModels; n > 0 {
			ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.GaugeValue, float64(n), r.t.Name)
		}
		for _, s := range r.res.samples {
			desc, typ := c.outputs[s.out], c.types[s.out]
			labels := []string{r.t.Name, r.res.kind, s.model}
			if s.extra != "" {
				labels = append(labels, s.extra)
			}
			m, err := prometheus.NewConstMetric(desc, typ, s.value, labels...)
			if err != nil {
				// Unreachable with a consistent table; never panic on
				// what a server sent.
				continue
			}
			ch <- m
		}
		for _, h := range r.res.histograms {
			if m, err := h.constHistogram(c.outputs[h.out], r.t.Name, r.res.kind, h.model); err == nil {
				ch <- m
			}
		}
	}
	success := 0.0
	if ok {
		success = 1
	}
	ch <- prometheus.MustNewConstMetric(c.selfOK, prometheus.GaugeValue, success)
	ch <- prometheus.MustNewConstMetric(c.selfDur, prometheus.GaugeValue, time.Since(start).Seconds())
}

// noteOutcome logs the kind chosen for auto and every change of error, each
// once, so a broken server logs one line rather than one per scrape.
func (c *ServerMetrics) noteOutcome(r serverScrape) {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.err != nil {
		if key := logKey(r.err); key != t.lastErr {
			t.lastErr = key
			c.logger.Warn("Scraping model-server metrics failed; llm_server_up is 0 until it works",
				"target", t.Name, "url", redact.Default().URL(t.URL), "kind", t.Kind, "err", r.err)
		}
		return
	}
	if t.lastErr != "" {
		t.lastErr = ""
		c.logger.Info("Scraping model-server metrics works again", "target", t.Name, "url", redact.Default().URL(t.URL))
	}
	if t.Kind == KindAuto && r.res.kind != t.detected {
		t.detected = r.res.kind
		c.logger.Info("Detected the model-server kind from its metric names", "target", t.Name, "kind", r.res.kind)
	}
	if r.res.droppedModels > 0 {
		c.logger.Debug("Model server exposes too many models; some are not exported",
			"target", t.Name, "limit", maxServerModels, "dropped", r.res.droppedModels)
	}
	if r.res.truncatedModels > 0 {
		c.logger.Debug("Model server exposes model label values over the length limit; they are cut",
			"target", t.Name, "limit_bytes", probe.MaxModelNameBytes, "cut", r.res.truncatedModels)
	}
}

// errNoTimeout fails a target given without a timeout rather than fetching
// it unbounded; config always sets one.
var errNoTimeout = errors.New("no scrape timeout set for this target")

// timeoutError is a fetch that did not end in time, whichever bound cut
// it: the target's timeout or the deadline of the scrape that asked.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }

// logKey is what noteOutcome compares to tell a changed error from the same
// one again. Every timeout is the same error for logging, so a hung server
// logs once even when scrapes with different deadlines alternate (two
// Prometheus servers, or Prometheus and the status page).
func logKey(err error) string {
	if te := (*timeoutError)(nil); errors.As(err, &te) {
		return "timeout"
	}
	return err.Error()
}

// scrape fetches and normalises one target within its timeout, or within
// limit when that is positive and shorter.
func (c *ServerMetrics) scrape(t *serverTarget, limit time.Duration) (normalisation, error) {
	if t.clientErr != nil {
		return normalisation{}, fmt.Errorf("HTTP client: %w", t.clientErr)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		return normalisation{}, errNoTimeout
	}
	bound := timeout
	if limit > 0 && limit < timeout {
		bound = limit
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	body, openMetrics, err := c.fetch(ctx, t)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			if bound < timeout {
				return normalisation{}, &timeoutError{fmt.Sprintf(
					"no complete answer within %s, the deadline of the scrape that asked (shorter than the %s timeout)", bound, timeout)}
			}
			return normalisation{}, &timeoutError{fmt.Sprintf("no complete answer within the %s timeout", timeout)}
		}
		return normalisation{}, err
	}
	return c.norm.normalise(body, openMetrics, t.Kind)
}

func (c *ServerMetrics) fetch(ctx context.Context, t *serverTarget) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, false, fmt.Errorf("bad URL: %w", err)
	}
	req.Header.Set("Accept", serverAccept)
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("HTTP status %s", resp.Status)
	}
	openMetrics := false
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, false, fmt.Errorf("unparsable content type %q", ct)
		case mt == "application/openmetrics-text":
			openMetrics = true
		case mt == "text/plain":
		default:
			return nil, false, fmt.Errorf("content type %q is not a Prometheus text exposition; is the URL a /metrics endpoint?", mt)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(body)) > c.maxBytes {
		return nil, false, fmt.Errorf("%w: more than %d bytes", errTooLarge, c.maxBytes)
	}
	return body, openMetrics, nil
}
