package tracing

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	itestutil "github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// receiver is an OTLP/HTTP trace endpoint keeping what it was sent.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	headers http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.headers = r.Header.Clone()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestSpanJoinsServerTrace: the exported client span has the trace and
// span ids the probe sent, which the server (the simulator) recorded, its
// phases as events and its outcome; targets not configured export
// nothing.
func TestSpanJoinsServerTrace(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase, cfg.Latency.DecodeBase = 2*time.Millisecond, 500*time.Microsecond
	sim := simtest.Start(t, cfg)
	rc := &receiver{}
	otlp := httptest.NewServer(rc)
	defer otlp.Close()

	e := New(promslog.NewNopLogger(), "test")
	defer e.Shutdown(context.Background())
	e.SetTargets([]Target{{Name: "sim", Endpoint: otlp.URL, Headers: map[string]string{"X-Api-Key": "k"}}})

	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "sim", URL: sim.URL, Model: cfg.ServedModelNames[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := &probe.Request{Prompt: "Trace me.", MaxTokens: 4, Stream: true}
	res := d.Probe(context.Background(), req)
	if res.Outcome != probe.OutcomeSuccess {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	e.Record("sim", "p", req, res)
	e.Record("other", "p", req, res) // not configured
	if err := e.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.spans) != 1 {
		t.Fatalf("received %d spans, want 1", len(rc.spans))
	}
	s := rc.spans[0]
	rec := simtest.GroundTruth(t, sim.URL, res.RequestID)
	if got := hex.EncodeToString(s.GetTraceId()); got != res.TraceID || got != rec.TraceID {
		t.Errorf("span trace id %s, probe sent %s, server recorded %s", got, res.TraceID, rec.TraceID)
	}
	if got := hex.EncodeToString(s.GetSpanId()); got != res.SpanID || len(s.GetParentSpanId()) != 0 {
		t.Errorf("span id %s (parent %x), probe sent %s", got, s.GetParentSpanId(), res.SpanID)
	}
	if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || time.Duration(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano()) != res.EndToEnd {
		t.Errorf("kind %v, duration %v, want client and %v", s.GetKind(), time.Duration(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano()), res.EndToEnd)
	}
	events := map[string]bool{}
	for _, ev := range s.GetEvents() {
		events[ev.GetName()] = true
	}
	for _, want := range []string{"connect", "write", "first_byte", "first_token"} {
		if !events[want] {
			t.Errorf("no %s event among %v", want, events)
		}
	}
	if rc.headers.Get("X-Api-Key") != "k" {
		t.Errorf("export headers %v", rc.headers)
	}
}

// TestShutdownKeepsItsDeadline: span export to endpoints that never
// answer stops at the caller's deadline, all targets at once, rather than
// 5s per target one after the other: the daemon's shutdown has a budget.
func TestShutdownKeepsItsDeadline(t *testing.T) {
	hung, _ := itestutil.HungServer(t)
	e := New(promslog.NewNopLogger(), "test")
	var targets []Target
	for _, name := range []string{"a", "b", "c"} {
		targets = append(targets, Target{Name: name, Endpoint: hung.URL})
	}
	e.SetTargets(targets)
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{Name: "a", URL: "http://127.0.0.1:1", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := &probe.Request{Prompt: "x", MaxTokens: 1, Stream: true}
	res := d.Probe(context.Background(), req)
	for _, name := range []string{"a", "b", "c"} {
		e.Record(name, "p", req, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.Shutdown(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Shutdown took %s with a 300ms deadline and three hung endpoints", took)
	}
}
