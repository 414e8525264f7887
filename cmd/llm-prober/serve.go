package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/status"
)

type serveOptions struct {
	configFile      string
	webFlags        *web.FlagConfig
	shutdownTimeout time.Duration
	disableReload   bool
	// historyResults is how many results per probe the status page keeps
	// (--history.results-per-probe); 0 keeps none.
	historyResults int
	logger         *slog.Logger
	stderr         io.Writer
	// listener, when set, is served instead of --web.listen-address; tests
	// use it to learn the port.
	listener net.Listener
	// reloadSignals delivers SIGHUP; tests inject their own channel.
	reloadSignals <-chan os.Signal
}

// daemon is the long-running prober process: config, registry, HTTP API.
type daemon struct {
	logger        *slog.Logger
	config        *config.SafeConfig
	registry      *prometheus.Registry
	prober        *prober
	history       *collector.History
	servers       *collector.ServerMetrics
	gpus          *collector.GPUCollector
	ready         atomic.Bool
	disableReload bool
}

func newDaemon(opts serveOptions) *daemon {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(programName),
	)
	probeMetrics := collector.NewProbeMetrics()
	reg.MustRegister(probeMetrics)
	d := &daemon{
		logger:        opts.logger,
		config:        config.NewSafeConfig(opts.configFile, opts.logger, reg),
		registry:      reg,
		prober:        newProber(opts.logger, probeMetrics),
		history:       collector.NewHistory(opts.historyResults),
		disableReload: opts.disableReload,
	}
	d.prober.history = d.history
	d.config.OnChange(d.prober.apply)
	// Model-server /metrics are fetched while Prometheus scrapes the prober,
	// within that scrape's deadline: not in reg, but in a registry built for
	// each scrape (metricsHandler).
	d.servers = collector.NewServerMetrics(opts.logger)
	d.config.OnChange(d.servers.ApplyConfig)
	// GPUs through NVML, loaded (or not) by the gpus config section; a
	// reload that leaves that section alone does not touch NVML.
	d.gpus = collector.NewGPUCollector(collector.GPUOptions{Logger: opts.logger})
	reg.MustRegister(d.gpus)
	d.config.OnChange(func(c *config.Config) {
		if err := d.gpus.Apply(c.GPUs); err != nil {
			d.logger.Error("GPU metrics unavailable", "err", err)
		}
	})
	return d
}

func (d *daemon) handler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", newMetricsHandler(d.registry, d.servers, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(d.logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 10,
		EnableOpenMetrics:   true,
		Registry:            d.registry,
	}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !d.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "Not ready: no valid configuration loaded yet")
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", d.handleReload)
	mux.HandleFunc("/config", d.handleConfig)
	// The status page takes "/" and "/probes/…", and answers 404 with a
	// page of its own for every path above does not serve.
	page, err := status.New(status.Options{
		Config:       d.config.Get,
		History:      d.history,
		Servers:      d.servers,
		GPUs:         d.gpus,
		Version:      version.Info(),
		BuildContext: version.BuildContext(),
		Logger:       d.logger,
		Links: []status.Link{
			{Address: "/metrics", Text: "Metrics", Description: "probe results, server and GPU metrics, and the prober's own"},
			{Address: "/config", Text: "Configuration", Description: "the running configuration, secrets hidden"},
			{Address: "/-/healthy", Text: "Health", Description: "200 while the process runs"},
			{Address: "/-/ready", Text: "Readiness", Description: "200 once a valid configuration is loaded"},
			{Address: "/-/reload", Text: "Reload info", Description: "POST reloads the configuration (so does SIGHUP); a GET says how"},
		},
	})
	if err != nil {
		return nil, err
	}
	page.Register(mux)
	return mux, nil
}

func (d *daemon) handleReload(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		w.WriteHeader(http.StatusMethodNotAllowed)
		fmt.Fprintln(w, "This endpoint requires a POST request.")
		return
	}
	if d.disableReload {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintln(w, "Reloading over HTTP is disabled by --web.disable-reload; send SIGHUP instead.")
		return
	}
	if err := d.config.Reload(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "failed to reload config, keeping the running one:\n%v\n", err)
		return
	}
	fmt.Fprintln(w, "Config reloaded")
}

func (d *daemon) handleConfig(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	cfg := d.config.Get()
	if cfg == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "no configuration loaded")
		return
	}
	b, err := cfg.Marshal()
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "cannot render config: %v\n", err)
		return
	}
	_, _ = w.Write(b)
}

// serve runs the daemon until ctx is cancelled and returns the exit code.
func serve(ctx context.Context, opts serveOptions) int {
	logger := opts.logger
	logger.Info("Starting llm-prober", "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	d := newDaemon(opts)
	defer d.gpus.Close()
	handler, err := d.handler()
	if err != nil {
		logger.Error("Cannot build the status page", "err", err)
		return 1
	}
	if err := d.config.Reload(); err != nil {
		fmt.Fprintf(opts.stderr, "llm-prober: invalid configuration, not starting:\n%v\n", err)
		d.prober.stop(ctx)
		return 1
	}
	if err := d.gpus.Err(); err != nil {
		fmt.Fprintf(opts.stderr, "llm-prober: %v\n", err)
		d.prober.stop(ctx)
		return 1
	}
	d.ready.Store(true)

	reloadSignals := opts.reloadSignals
	if reloadSignals == nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reloadSignals = hup
	}
	var wg sync.WaitGroup
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer func() { stopLoop(); wg.Wait() }()
	wg.Go(func() {
		for {
			select {
			case <-reloadSignals:
				// Errors are logged and counted by Reload itself.
				_ = d.config.Reload()
			case <-loopCtx.Done():
				return
			}
		}
	})

	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	serveErr := make(chan error, 1)
	go func() {
		if opts.listener != nil {
			serveErr <- web.Serve(opts.listener, srv, opts.webFlags, logger)
			return
		}
		serveErr <- web.ListenAndServe(srv, opts.webFlags, logger)
	}()

	select {
	case err := <-serveErr:
		logger.Error("Web server failed", "err", err)
		return 1
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "timeout", opts.shutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), opts.shutdownTimeout)
	defer cancel()
	// Probes drain first, while /metrics still answers, so a scrape during
	// shutdown sees their results.
	d.prober.stop(shutdownCtx)
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("Web server did not stop cleanly", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("Web server stopped with an error", "err", err)
	}
	logger.Info("Stopped")
	return 0
}

// scrapeTimeoutHeader carries Prometheus's scrape_timeout, in seconds, on
// every scrape.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

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
	v := h.Get(scrapeTimeoutHeader)
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

// metricsHandler serves /metrics: promhttp over the main registry and the
// model-server metrics, whose fetches are bounded by the scrape's own
// deadline. A Gatherer cannot see the request, so each request gets its
// gatherer — the main registry beside a registry holding only
// servers.Within(limit) — and a promhttp handler over it; the two are
// gathered at once, as one registry's collectors are. Nothing is shared
// between requests but what promhttp shares: the in-flight limit, kept here
// because a handler per request cannot keep it, and the error counter in
// the main registry.
type metricsHandler struct {
	registry *prometheus.Registry
	servers  *collector.ServerMetrics
	opts     promhttp.HandlerOpts
	inFlight chan struct{}
}

func newMetricsHandler(reg *prometheus.Registry, servers *collector.ServerMetrics, opts promhttp.HandlerOpts) *metricsHandler {
	h := &metricsHandler{registry: reg, servers: servers, opts: opts}
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

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
// and checked, by prometheus.Gatherers.
type parallelGatherers []prometheus.Gatherer

func (gs parallelGatherers) Gather() ([]*dto.MetricFamily, error) {
	done := make(prometheus.Gatherers, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			mfs, err := g.Gather()
			done[i] = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, err })
		})
	}
	wg.Wait()
	return done.Gather()
}
