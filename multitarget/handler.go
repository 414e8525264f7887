// Package multitarget serves /probe?target=&module=, blackbox_exporter's
// multi-target pattern: Prometheus' own service discovery and relabelling
// choose the targets, and each scrape runs one probe now with a module of
// the configuration and answers its results as gauges from a registry of
// its own.
package multitarget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/display"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// Handler answers /probe.
type Handler struct {
	config func() *config.Config
	logger *slog.Logger
	// slots bounds the probes /probe runs at once: each holds a
	// connection to a model server and can run for the whole scrape
	// timeout, and a misconfigured scrape job must not make the prober
	// flood a server.
	slots chan struct{}
	// rejected counts the calls answered without a probe, by reason, so
	// that an operator sees callers turned away (and a scrape job that
	// asks for more than the slots) rather than only missing series.
	rejected *prometheus.CounterVec
}

// Options configures a Handler.
type Options struct {
	// Config is the running configuration (config.SafeConfig.Get).
	Config func() *config.Config
	Logger *slog.Logger
	// MaxConcurrent is how many /probe requests run at once; one that
	// finds none free within SlotWait is answered 503 without a probe.
	MaxConcurrent int
	// Registerer, when set, gets llm_prober_probe_endpoint_rejected_total.
	Registerer prometheus.Registerer
}

// SlotWait is the longest a /probe call waits for a free slot before it
// is answered 503. It is short on purpose: a probe that queued for long
// would either spend its scrape timeout waiting and report the target as
// timed out, or run on a timeout that the queue, not the target, used.
// The wait comes out of timeoutOffset's share of the scrape timeout.
const SlotWait = 100 * time.Millisecond

// Reasons of llm_prober_probe_endpoint_rejected_total.
const (
	ReasonNoSlot     = "no_slot"     // 503: every slot busy for SlotWait
	ReasonNotAllowed = "not_allowed" // 400: the module refuses the target
	ReasonBadRequest = "bad_request" // 400: a parameter missing, unknown or malformed
	ReasonNoConfig   = "no_config"   // 503: no configuration loaded yet
)

const rejectedHelp = "Calls of /probe answered without running a probe, by reason: no_slot (503, all slots busy), not_allowed (400, outside the module's allowed_targets), bad_request (400), no_config (503)."

// New is a /probe handler.
func New(o Options) *Handler {
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_prober_probe_endpoint_rejected_total",
		Help: rejectedHelp,
	}, []string{"reason"})
	for _, r := range []string{ReasonNoSlot, ReasonNotAllowed, ReasonBadRequest, ReasonNoConfig} {
		rejected.WithLabelValues(r)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(rejected)
	}
	return &Handler{config: o.Config, logger: o.Logger, slots: make(chan struct{}, max(o.MaxConcurrent, 1)), rejected: rejected}
}

// reject answers a call that runs no probe, and counts it.
func (h *Handler) reject(w http.ResponseWriter, reason string, code int, msg string) {
	h.rejected.WithLabelValues(reason).Inc()
	http.Error(w, msg, code)
}

// clip is s as an answer may echo it (display.Cut to
// display.MaxEchoBytes), so that a caller's 500 KB never comes back.
func clip(s string) string { return display.Cut(s, display.MaxEchoBytes) }

// timeoutOffset is what a scrape keeps of Prometheus' timeout for
// everything after the probe, as blackbox_exporter's --timeout-offset.
const timeoutOffset = 500 * time.Millisecond

// scrapeTimeout is the time the probe may take: the scrape timeout header
// minus timeoutOffset (at least half of it), capped by the probe's own
// timeout; the probe's timeout alone without a usable header.
func scrapeTimeout(h http.Header, probeTimeout time.Duration) time.Duration {
	secs, err := strconv.ParseFloat(h.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64)
	if err != nil || !(secs > 0) || secs > 365*24*3600 {
		return probeTimeout
	}
	t := time.Duration(math.Round(secs * float64(time.Second)))
	return min(max(t-timeoutOffset, t/2), probeTimeout)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cfg := h.config()
	if cfg == nil {
		h.reject(w, ReasonNoConfig, http.StatusServiceUnavailable, "no configuration loaded")
		return
	}
	moduleName, target := q.Get("module"), q.Get("target")
	mod, ok := cfg.Modules[moduleName]
	switch {
	case target == "":
		h.reject(w, ReasonBadRequest, http.StatusBadRequest, "target parameter is missing")
		return
	case moduleName == "":
		h.reject(w, ReasonBadRequest, http.StatusBadRequest, "module parameter is missing")
		return
	case !ok:
		h.reject(w, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("unknown module %q; the configuration's modules: section defines the modules", clip(moduleName)))
		return
	}
	t, err := mod.Instantiate(moduleName, target)
	if err != nil {
		reason := ReasonBadRequest
		if _, refused := errors.AsType[*config.RefusedError](err); refused {
			reason = ReasonNotAllowed
		}
		h.reject(w, reason, http.StatusBadRequest, err.Error())
		return
	}
	pc := t.Probes[0]
	if name := q.Get("probe"); name != "" {
		pc = nil
		for _, p := range t.Probes {
			if p.Name == name {
				pc = p
			}
		}
		if pc == nil {
			h.reject(w, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("module %q has no probe %q", moduleName, clip(name)))
			return
		}
	}
	debug := q.Get("debug") == "true"

	if !h.acquire(r.Context()) {
		h.reject(w, ReasonNoSlot, http.StatusServiceUnavailable, fmt.Sprintf(
			"too many /probe requests in flight (%d); none finished within %s, so this one did not run (scrape less often or shard the job)", cap(h.slots), SlotWait))
		return
	}
	defer func() { <-h.slots }()
	// The probe's timeout starts now that it holds a slot, so the wait
	// for one never counts against the target.
	timeout := scrapeTimeout(r.Header, time.Duration(pc.Timeout))
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	// Every log line of this probe goes to the debug answer as well as
	// the daemon's log (at the daemon's level there).
	logs := &lockedBuffer{}
	logger := slog.New(teeHandler{h.logger.Handler(), redact.NewHandler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}), nil)}).
		With("module", moduleName, "endpoint", target)
	p, err := engine.Open(cfg, t, pc, logger)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer p.Close()
	p.Timeout = min(p.Timeout, timeout)
	logger.Debug("Beginning probe", "probe", pc.Name, "timeout", p.Timeout)
	sent := p.Send(ctx)
	res := sent.Result
	logger.Debug("Probe done", "outcome", res.Outcome, "request_id", res.RequestID, "ttft", res.TTFT, "e2e", res.EndToEnd, "output_tokens", res.OutputTokens, "err", res.Err)
	probe.LogDetails(logger, res)
	if res.Outcome != probe.OutcomeSuccess {
		logger.Debug("Probe failed", "outcome", res.Outcome, "err", res.Err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(resultCollector{res: res, model: t.Model, probe: pc.Name})
	if debug {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Logs for the probe:\n%s\n\nMetrics that would have been returned:\n", logs.String())
		mfs, err := reg.Gather()
		if err != nil {
			fmt.Fprintf(w, "error gathering: %v\n", err)
			return
		}
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return
			}
		}
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// acquire takes a slot, waiting at most SlotWait for one.
func (h *Handler) acquire(ctx context.Context) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	wait := time.NewTimer(SlotWait)
	defer wait.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-wait.C:
		return false
	case <-ctx.Done():
		return false
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// A debug answer is for a person; a probe logging without end must
	// not grow it without bound.
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// teeHandler sends every record to both handlers, each at its own level.
type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	if t.a.Enabled(ctx, r.Level) {
		errs = append(errs, t.a.Handle(ctx, r.Clone()))
	}
	if t.b.Enabled(ctx, r.Level) {
		errs = append(errs, t.b.Handle(ctx, r.Clone()))
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{t.a.WithGroup(name), t.b.WithGroup(name)}
}
