// Package simulator is a simulated LLM inference server: a real HTTP
// server that speaks the OpenAI-compatible API as vLLM does, with a
// load-aware latency model, /metrics under vLLM's (or Triton's, TGI's,
// SGLang's) names, fault injection and
// per-request ground truth for accuracy tests. See docs/simulator.md.
package simulator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is one simulated inference server.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	engine  *engine
	model   *modelResidency
	truth   *truthStore
	limits  *rateLimiter // nil without rate_limit
	prefix  *prefixCache
	metrics *serverMetrics
	reg     *prometheus.Registry
	handler http.Handler
	started time.Time

	// responses are the stored answers of /v1/responses, for
	// previous_response_id.
	responses *responseStore

	// served is the model list, changeable at run time (SetModels);
	// listFault makes the list endpoints misbehave (SetModelListFault).
	served    atomic.Pointer[[]ServedModel]
	listFault atomic.Pointer[string]

	seq   atomic.Uint64 // requests planned so far, drives the seeded RNGs
	idSeq atomic.Uint64 // generated request ids

	// slots are those of disconnected requests not given back yet.
	slots slots

	// inflight counts running handlers so Serve can wait for them.
	inflight sync.WaitGroup
}

// New builds a server from a validated configuration.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid simulator configuration: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.ServedModelNames = append([]string(nil), cfg.ServedModelNames...)
	s := &Server{
		cfg:     cfg,
		logger:  logger,
		engine:  newEngine(cfg.Latency, cfg.Scheduler),
		model:   newModelResidency(cfg.Faults),
		truth:   newTruthStore(cfg.GroundTruth),
		prefix:  newPrefixCache(cfg.PrefixCache),
		reg:     prometheus.NewRegistry(),
		started: time.Now(),
	}
	s.responses = newResponseStore()
	s.initModels()
	s.metrics = newServerMetrics(s.reg, s.engine, cfg.ServedModelNames[0], cfg.MaxModelLen, cfg.Metrics)
	if cfg.RateLimit.enabled() {
		s.limits = &rateLimiter{cfg: cfg.RateLimit}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleOpenAI(true))
	mux.HandleFunc("POST /v1/completions", s.handleOpenAI(false))
	mux.HandleFunc("POST /v1/responses", s.handleResponses())
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// TGI's native API (simulator/tgi.go).
	mux.HandleFunc("POST /generate", s.handleTGI(false))
	mux.HandleFunc("POST /generate_stream", s.handleTGI(true))
	mux.HandleFunc("GET /info", s.handleTGIInfo)
	// Ollama's native API (simulator/ollama.go).
	mux.HandleFunc("POST /api/chat", s.handleOllama(true))
	mux.HandleFunc("POST /api/generate", s.handleOllama(false))
	mux.HandleFunc("GET /api/tags", s.handleOllamaTags)
	mux.HandleFunc("GET /api/version", s.handleOllamaVersion)
	mux.HandleFunc("GET /{$}", s.handleOllamaRoot)
	s.registerPooled(mux) // simulator/pooled.go: embeddings and rerank
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	mux.Handle("GET /metrics", metrics)
	if s.cfg.Metrics.Naming == NamingTRTLLM {
		// trtllm-serve's Prometheus path; its own /metrics is JSON
		// iteration statistics, which the simulator does not mimic.
		mux.Handle("GET /prometheus/metrics", metrics)
	}
	mux.HandleFunc("GET /debug/requests/{id}", s.handleTruth)
	mux.HandleFunc("POST /debug/slots/release", s.handleFreeSlots)
	// Changes the model list at run time: simulator/models.go.
	mux.HandleFunc("PUT /debug/models", s.handleSetModels)
	s.registerTriton(mux) // simulator/triton.go
	s.handler = s.track(mux)
	return s, nil
}

// Handler serves every endpoint; usable without Serve (e.g. in httptest).
func (s *Server) Handler() http.Handler { return s.handler }

// Registry is the server's own metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		r = s.stampArrival(r)
		if !s.cfg.Faults.CloseAfterStream || r.ProtoMajor != 1 {
			h.ServeHTTP(w, r)
			return
		}
		cw := &closingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		cw.closeAfterStream(s.cfg.Faults.CloseAfterStreamDelay, s.logger)
	})
}

// closingWriter sees whether an answer was streamed (and not already
// hijacked by a fault) so the connection can be closed after it.
type closingWriter struct {
	http.ResponseWriter
	hijacked bool
}

func (c *closingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *closingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c.hijacked = true
	return http.NewResponseController(c.ResponseWriter).Hijack()
}

// closeAfterStream ends a streamed (chunked) answer itself and closes the
// connection, without the Connection: close header a well-behaved server
// sends: the client has seen a keep-alive answer and pools the connection.
// llama.cpp's llama-server (cpp-httplib) answers a streamed completion so.
func (c *closingWriter) closeAfterStream(delay time.Duration, logger *slog.Logger) {
	ct := c.Header().Get("Content-Type")
	if c.hijacked || !(strings.HasPrefix(ct, "text/event-stream") || strings.HasPrefix(ct, "application/x-ndjson")) {
		return
	}
	conn, brw, err := http.NewResponseController(c.ResponseWriter).Hijack()
	if err != nil {
		logger.Debug("cannot hijack connection to close it after the stream", "err", err)
		return
	}
	defer conn.Close()
	// The terminating chunk, which net/http would have written had the
	// handler returned normally.
	if _, err := brw.WriteString("0\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	time.Sleep(delay)
}

// ListenAndServe listens on addr and serves until ctx is cancelled.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("simulator listen: %w", err)
	}
	return s.Serve(ctx, l)
}

// Serve serves on l until ctx is cancelled, then shuts down gracefully:
// in-flight requests get up to shutdown_timeout to finish and are aborted
// afterwards. It returns once every handler has returned; l is closed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	// Requests do not derive from ctx: cancelling it must let them finish.
	// abort cancels them all once the grace period is over.
	base, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
		// Each request's first byte is taken at the connection (arrival.go).
		ConnState: arrivalConnState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, arrivalConnKey{}, c)
		},
	}
	l = &arrivalListener{Listener: l, epoch: s.started}
	s.logger.Info("simulated LLM server listening", "address", l.Addr().String(), "models", s.cfg.ServedModelNames)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()

	select {
	case err := <-errc:
		abort()
		s.inflight.Wait()
		return fmt.Errorf("simulator serve: %w", err)
	case <-ctx.Done():
	}

	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	err := hs.Shutdown(sctx)
	cancel()
	if err != nil {
		s.logger.Warn("simulator shutdown grace period over, aborting requests", "err", err)
		abort()
		_ = hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.logger.Warn("simulator serve", "err", err)
	}
	abort()
	s.inflight.Wait()
	s.logger.Info("simulated LLM server stopped")
	return nil
}

// requestID returns the client's X-Request-Id or a generated one, and
// echoes it in the response.
func (s *Server) requestID(w http.ResponseWriter, r *http.Request) (string, bool) {
	vals := r.Header.Values(HeaderRequestID)
	id := ""
	switch len(vals) {
	case 0:
		id = fmt.Sprintf("sim-%x-%d", s.started.UnixNano(), s.idSeq.Add(1))
	case 1:
		id = vals[0]
		if !validRequestID(id) {
			return "", false
		}
	default:
		return "", false
	}
	w.Header().Set(HeaderRequestID, id)
	return id, true
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e || id[i] == '/' {
			return false
		}
	}
	return true
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	if s.modelListFault(w) {
		return
	}
	type permission struct {
		ID                 string  `json:"id"`
		Object             string  `json:"object"`
		Created            int64   `json:"created"`
		AllowCreateEngine  bool    `json:"allow_create_engine"`
		AllowSampling      bool    `json:"allow_sampling"`
		AllowLogprobs      bool    `json:"allow_logprobs"`
		AllowSearchIndices bool    `json:"allow_search_indices"`
		AllowView          bool    `json:"allow_view"`
		AllowFineTuning    bool    `json:"allow_fine_tuning"`
		Organization       string  `json:"organization"`
		Group              *string `json:"group"`
		IsBlocking         bool    `json:"is_blocking"`
	}
	type model struct {
		ID          string       `json:"id"`
		Object      string       `json:"object"`
		Created     int64        `json:"created"`
		OwnedBy     string       `json:"owned_by"`
		Root        string       `json:"root"`
		Parent      *string      `json:"parent"`
		MaxModelLen int          `json:"max_model_len"`
		Permission  []permission `json:"permission"`
	}
	created := s.started.Unix()
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for i, m := range s.Models() {
		root, parent := m.Name, (*string)(nil)
		if m.Parent != "" {
			// vLLM lists a LoRA adapter with its path as root and the
			// base model as parent.
			root, parent = "/adapters/"+m.Name, &m.Parent
		}
		list.Data = append(list.Data, model{
			ID: m.Name, Object: "model", Created: created, OwnedBy: "vllm", Root: root, Parent: parent,
			MaxModelLen: s.cfg.MaxModelLen,
			Permission: []permission{{
				ID: "modelperm-sim-" + strconv.Itoa(i), Object: "model_permission", Created: created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
			}},
		})
	}
	b, _ := json.Marshal(list)
	writeBody(w, http.StatusOK, "application/json", b)
}

// handleTruth serves ground truth. A request still in progress is waited
// for up to ?wait= (default 1s, at most 30s), so a client that just read
// [DONE] gets the complete record.
func (s *Server) handleTruth(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait := time.Second
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 30*time.Second {
			http.Error(w, "wait: want a duration between 0s and 30s", http.StatusBadRequest)
			return
		}
		wait = d
	}
	e, ok := s.truth.get(id)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"unknown request id"}`))
		return
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-e.done:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	b, err := json.Marshal(e.snapshot())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, http.StatusOK, "application/json", b)
}
