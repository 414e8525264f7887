// Package tracing exports each probe as an OpenTelemetry client span over
// OTLP/HTTP, for targets that ask for it (otlp_traces). The span has the
// trace id and span id the probe sent in its traceparent header
// (probe/tracecontext.go), so in a tracing backend it is the parent of the
// server's own span of the same request, and the histograms' trace_id
// exemplars lead to both.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/llm-prober/llm-prober/probe"
)

// Target is one target's export settings.
type Target struct {
	// Name is the target's name (the target label).
	Name string
	// Endpoint is the OTLP/HTTP base URL, e.g. http://otel-collector:4318;
	// spans go to {Endpoint}/v1/traces.
	Endpoint string
	// Headers are sent with every export (an API key of a hosted backend).
	Headers map[string]string
}

// Exporter sends the spans of the configured targets' probes. Its Record
// is an engine sink's: called from many goroutines at once.
type Exporter struct {
	logger  *slog.Logger
	version string

	mu      sync.RWMutex
	targets map[string]*targetExporter
}

type targetExporter struct {
	spec     Target
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// New is an exporter with no targets until SetTargets.
func New(logger *slog.Logger, version string) *Exporter {
	return &Exporter{logger: logger, version: version, targets: map[string]*targetExporter{}}
}

// SetTargets (re)configures the targets whose probes are exported, with
// every reload: unchanged targets keep their exporter and queue, removed
// or changed ones are flushed and shut down.
func (e *Exporter) SetTargets(ts []Target) {
	want := map[string]Target{}
	for _, t := range ts {
		want[t.Name] = t
	}
	e.mu.Lock()
	var stale []*targetExporter
	next := map[string]*targetExporter{}
	for name, cur := range e.targets {
		if t, ok := want[name]; ok && sameTarget(cur.spec, t) {
			next[name] = cur
			continue
		}
		stale = append(stale, cur)
	}
	for name, t := range want {
		if next[name] != nil {
			continue
		}
		te, err := e.newTarget(t)
		if err != nil {
			e.logger.Error("Cannot export probe spans; the target's probes run without", "target", t.Name, "endpoint", t.Endpoint, "err", err)
			continue
		}
		next[name] = te
	}
	e.targets = next
	e.mu.Unlock()
	for _, te := range stale {
		te.shutdown(context.Background(), e.logger)
	}
}

func sameTarget(a, b Target) bool {
	if a.Name != b.Name || a.Endpoint != b.Endpoint || len(a.Headers) != len(b.Headers) {
		return false
	}
	for k, v := range a.Headers {
		if bv, ok := b.Headers[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func (e *Exporter) newTarget(t Target) (*targetExporter, error) {
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(t.Endpoint+"/v1/traces"),
		otlptracehttp.WithHeaders(t.Headers),
		otlptracehttp.WithTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "llm-prober"),
		attribute.String("service.version", e.version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(probeIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &targetExporter{spec: t, provider: tp, tracer: tp.Tracer("github.com/llm-prober/llm-prober/tracing")}, nil
}

func (te *targetExporter) shutdown(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := te.provider.Shutdown(ctx); err != nil {
		logger.Warn("Exporting the last probe spans failed", "target", te.spec.Name, "endpoint", te.spec.Endpoint, "err", err)
	}
}

// Shutdown flushes and stops every target's exporter (at exit), all at
// once, each for at most 5s and no later than ctx's deadline: the
// daemon's shutdown has a budget to keep.
func (e *Exporter) Shutdown(ctx context.Context) {
	e.mu.Lock()
	ts := e.targets
	e.targets = map[string]*targetExporter{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, te := range ts {
		wg.Go(func() { te.shutdown(ctx, e.logger) })
	}
	wg.Wait()
}

// ForceFlush sends every queued span now (tests, shutdown).
func (e *Exporter) ForceFlush(ctx context.Context) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var errs []error
	for _, te := range e.targets {
		errs = append(errs, te.provider.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// ids carries the ids the probe sent to the id generator, so the span is
// the one the server saw as its parent.
type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

type idsKey struct{}

// probeIDs takes the ids from the context; without them (never, from
// Record) it falls back to random ones.
type probeIDs struct{}

func (probeIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	copy(t[:], randomBytes(16))
	return t, probeIDs{}.NewSpanID(ctx, t)
}

func (probeIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	var s trace.SpanID
	copy(s[:], randomBytes(8))
	return s
}

// Record exports r as a span when r's target is configured and r carried
// trace context.
func (e *Exporter) Record(target, probeName string, req *probe.Request, r *probe.Result) {
	if r == nil || r.TraceID == "" || r.Start.IsZero() {
		return
	}
	e.mu.RLock()
	te := e.targets[target]
	e.mu.RUnlock()
	if te == nil {
		return
	}
	tid, err1 := trace.TraceIDFromHex(r.TraceID)
	sid, err2 := trace.SpanIDFromHex(r.SpanID)
	if err1 != nil || err2 != nil {
		return
	}
	ctx := context.WithValue(context.Background(), idsKey{}, ids{tid, sid})
	attrs := []attribute.KeyValue{
		attribute.String("llm_prober.target", target),
		attribute.String("llm_prober.probe", probeName),
		attribute.String("llm_prober.outcome", string(r.Outcome)),
		attribute.String("llm_prober.request_id", r.RequestID),
		attribute.Bool("llm_prober.streamed", r.Streamed),
		attribute.Int("gen_ai.usage.input_tokens", r.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", r.OutputTokens),
	}
	if req != nil && req.Model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", req.Model))
	}
	if r.StatusCode != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", r.StatusCode))
	}
	if r.FinishReason != "" {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{r.FinishReason}))
	}
	_, span := te.tracer.Start(ctx, "llm-prober "+probeName,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(r.Start), trace.WithAttributes(attrs...))
	// The phases as events: each at the moment it ended, counted from the
	// start in the order they happen (connection, then request, then the
	// answer's head), with its duration.
	at := r.Start
	ph := &r.Phases
	for _, p := range []struct {
		name string
		d    time.Duration
		ok   bool
	}{{"dns", ph.DNS, ph.HasDNS}, {"connect", ph.Connect, ph.HasConnect}, {"tls", ph.TLS, ph.HasTLS},
		{"write", ph.Write, ph.HasWrite}, {"first_byte", ph.FirstByte, ph.HasFirstByte}} {
		if !p.ok {
			continue
		}
		at = at.Add(p.d)
		span.AddEvent(p.name, trace.WithTimestamp(at), trace.WithAttributes(attribute.Float64("duration_seconds", p.d.Seconds())))
	}
	if r.TTFT > 0 {
		span.AddEvent("first_token", trace.WithTimestamp(r.Start.Add(r.TTFT)))
	}
	if d := r.Reasoning.FirstAnswer; d > 0 && r.Reasoning.Seen {
		span.AddEvent("first_answer_token", trace.WithTimestamp(r.Start.Add(d)))
	}
	if r.Outcome != probe.OutcomeSuccess {
		msg := string(r.Outcome)
		if r.Err != nil {
			msg = fmt.Sprintf("%s: %v", r.Outcome, r.Err)
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(r.Start.Add(r.EndToEnd)))
}
