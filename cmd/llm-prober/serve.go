package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/fleet"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/internal/webroute"
	"github.com/llm-prober/llm-prober/multitarget"
	"github.com/llm-prober/llm-prober/shard"
	"github.com/llm-prober/llm-prober/status"
	"github.com/llm-prober/llm-prober/tracing"
)

type serveOptions struct {
	// paths: where to serve and what links start with (--web.*).
	paths           webroute.Paths
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
	shard         shard.Shard
}

// daemon is the long-running prober process: config, registry, HTTP API.
type daemon struct {
	config   *config.SafeConfig
	registry *prometheus.Registry
	engine   *engine.Engine
	models   *discovery.Models
	history  *status.History
	servers  *collector.ServerMetrics
	gpus     *collector.GPUCollector
	spans    *tracing.Exporter
	fleet    *fleet.Daemon
	opts     serveOptions
}

func newDaemon(opts serveOptions) *daemon {
	if opts.paths.Telemetry == "" {
		opts.paths.Telemetry = "/metrics"
	}
	// Every log line passes the redaction policy of the configuration in
	// force (its secret_query_params), whoever wrote it.
	var policy atomic.Pointer[redact.Policy]
	policy.Store(redact.Default())
	opts.logger = slog.New(redact.NewHandler(opts.logger.Handler(), policy.Load))
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(programName),
	)
	probeMetrics := collector.NewProbeMetrics()
	reg.MustRegister(probeMetrics)
	d := &daemon{
		config:   config.NewSafeConfig(opts.configFile, opts.logger, reg),
		registry: reg,
		history:  status.NewHistory(opts.historyResults),
		opts:     opts,
	}
	d.config.OnChange(func(c *config.Config) { policy.Store(c.Policy()) })
	pooled := collector.NewPooledMetrics() // embedding and rerank answers
	answers, rateLimits := collector.NewAnswerMetrics(), collector.NewRateLimitMetrics()
	cancels := collector.NewCancelMetrics() // cancellation probes
	prefix := collector.NewPrefixMetrics()  // session and shared_prefix probes
	reg.MustRegister(pooled, answers, rateLimits, cancels, prefix)
	d.spans = tracing.New(opts.logger, version.Version)
	d.engine = engine.New(opts.logger, probeMetrics, d.history, engine.PooledSink(pooled),
		engine.MetricsSink(answers, rateLimits), engine.CancelSink(cancels), engine.PrefixSink(prefix), spanSink{d.spans})
	// Span export follows the configured targets' otlp_traces.
	d.config.OnChange(func(c *config.Config) { d.spans.SetTargets(c.TracingTargets()) })
	// Model-server /metrics are fetched while Prometheus scrapes the prober,
	// within that scrape's deadline: not in reg, but in a registry built for
	// each scrape (collector.Handler).
	d.servers = collector.NewServerMetrics(opts.logger)
	// Configured and discovered targets, cut to this replica's shard, go
	// to the engine and the server-metrics collector as a reload's would.
	d.fleet = fleet.NewDaemon(fleet.Options{Logger: opts.logger, Registry: reg, Shard: opts.shard, Engine: d.engine, Servers: d.servers, Gatherer: reg})
	// Targets that discover their models have their probes expanded with
	// the current lists first; the fleet then adds discovered targets and
	// cuts to this replica's shard.
	d.models = discovery.New(opts.logger, d.fleet.SetConfig)
	reg.MustRegister(d.models)
	d.config.OnChange(d.models.Apply)
	// GPUs through NVML, loaded (or not) by the gpus config section; a
	// reload that leaves that section alone does not touch NVML.
	d.gpus = collector.NewGPUCollector(collector.GPUOptions{Logger: opts.logger})
	reg.MustRegister(d.gpus)
	d.config.Check(d.checkGPUs)
	d.config.OnChange(func(c *config.Config) {
		if err := d.gpus.Apply(c.GPUs.Settings()); err != nil {
			d.opts.logger.Error("GPU metrics unavailable", "err", err)
		}
	})
	return d
}

func (d *daemon) handler() (http.Handler, error) {
	mux := http.NewServeMux()
	// promhttp_metric_handler_* count the scrapes, as every exporter's do.
	mux.Handle(d.opts.paths.Telemetry, promhttp.InstrumentMetricHandler(d.registry, collector.NewHandler(d.registry, d.servers, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(d.opts.logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 10,
		EnableOpenMetrics:   true,
		Registry:            d.registry,
	})))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Healthy")
	})
	mux.Handle("/-/ready", d.config.ReadyHandler())
	mux.Handle("/-/reload", d.config.ReloadHandler(d.opts.disableReload))
	mux.Handle("/config", d.config.ConfigHandler())
	mux.Handle("/probe", multitarget.New(multitarget.Options{Config: d.config.Get, Logger: d.opts.logger, MaxConcurrent: 32, Registerer: d.registry}))
	// The status page takes "/" and "/probes/…", and answers 404 with a
	// page of its own for every path above does not serve.
	page, err := status.New(status.Options{
		Config:       d.models.Config, // discovered probes included
		History:      d.history,
		Servers:      d.servers,
		GPUs:         d.gpus,
		Version:      version.Info(),
		BuildContext: version.BuildContext(),
		Logger:       d.opts.logger,
		Root:         d.opts.paths.External,
		Links:        status.DaemonLinks(d.opts.paths.Link, d.opts.paths.Telemetry),
	})
	if err != nil {
		return nil, err
	}
	page.Register(mux)
	return d.opts.paths.Mount(mux), nil
}

// Shutdown phases, as shares of --web.shutdown-timeout measured from the
// signal. Probes get most of it: a probe that finishes is a measurement,
// a cancelled one only an account. Recording the cancelled takes
// milliseconds; the final flush is one gather sent in a few requests; the
// last tenth lets a scrape in progress end.
const (
	// drainShare: until then in-flight probes may finish; then they are
	// cancelled and recorded as outcome cancelled.
	drainShare = 0.6
	// flushShare: until then remote write and span export send what
	// they hold, the cancelled probes' results included.
	flushShare = 0.9
)

// serve runs the daemon until ctx is cancelled and returns the exit code.
func serve(ctx context.Context, opts serveOptions) int {
	logger := opts.logger
	logger.Info("Starting llm-prober", "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	d := newDaemon(opts)
	defer d.gpus.Close()
	defer d.models.Stop()
	defer d.fleet.Close()
	handler, err := d.handler()
	if err != nil {
		logger.Error("Cannot build the status page", "err", err)
		return 1
	}
	if err := d.config.Reload(); errors.Is(err, fs.ErrNotExist) {
		// Most often a container started without its configuration mounted.
		fmt.Fprint(opts.stderr, noConfigMessage(opts.configFile))
		d.engine.Stop(ctx)
		return 1
	} else if err != nil {
		fmt.Fprintf(opts.stderr, "llm-prober: invalid configuration, not starting:\n%v\n", err)
		d.engine.Stop(ctx)
		return 1
	}
	if err := d.gpus.Err(); err != nil {
		fmt.Fprintf(opts.stderr, "llm-prober: %v\n", err)
		d.engine.Stop(ctx)
		return 1
	}

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
	wg.Go(func() { d.config.ReloadOn(loopCtx, reloadSignals) })

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
	// The budget is split into phases (docs/deployment.md, "Shutdown"), each
	// ending at a fixed share of it: in-flight probes may finish, then
	// are cancelled early enough to be recorded; remote write's final
	// flush then has their results; /metrics answers throughout, and the
	// web server stops last. Discovery stops first, so that no list that
	// changes now starts probes again.
	start := time.Now()
	until := func(share float64) (context.Context, context.CancelFunc) {
		return context.WithDeadline(context.Background(), start.Add(time.Duration(share*float64(opts.shutdownTimeout))))
	}
	d.models.Stop()
	drainCtx, cancelDrain := until(drainShare)
	defer cancelDrain()
	d.engine.Stop(drainCtx)
	flushCtx, cancelFlush := until(flushShare)
	defer cancelFlush()
	var flushes sync.WaitGroup
	flushes.Go(func() { d.spans.Shutdown(flushCtx) })
	flushes.Go(func() { d.fleet.Stop(flushCtx) })
	flushes.Wait()
	httpCtx, cancelHTTP := until(1)
	defer cancelHTTP()
	if err := srv.Shutdown(httpCtx); err != nil {
		logger.Warn("Web server did not stop cleanly", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("Web server stopped with an error", "err", err)
	}
	logger.Info("Stopped")
	return 0
}
