package simulator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

// This file serves Triton's gRPC API (inference.GRPCInferenceService) on
// its own listener, with the same engine, faults and ground truth as the
// HTTP front-ends. Faults come from the x-sim-fault metadata (the
// X-Sim-Fault grammar) and map as follows:
//
//	error=N       the RPC ends with the gRPC code Triton uses for HTTP N
//	              (400 INVALID_ARGUMENT, 404 NOT_FOUND, 429
//	              RESOURCE_EXHAUSTED, 501 UNIMPLEMENTED, 503 UNAVAILABLE,
//	              other 5xx INTERNAL)
//	reset         the TCP connection is reset (SO_LINGER 0)
//	truncate      the stream ends with OK without a final response (for
//	              after ≥ the answer's length: the final flag is missing);
//	              ModelInfer: the connection is closed
//	error_event   a stream response with error_message (ModelInfer: INTERNAL)
//	malformed     a text_output whose BYTES length prefix overruns the data
//	stall, slow_first_token   as on HTTP
const (
	metaRequestID = "x-request-id"
	metaFault     = "x-sim-fault"
	metaOptions   = "x-sim-options"
)

// DefaultGRPCListenAddress is where `llm-prober simulate` serves gRPC.
const DefaultGRPCListenAddress = "127.0.0.1:8301"

const grpcStreamPath = "/inference.GRPCInferenceService/ModelStreamInfer"

// ListenAndServeGRPC listens on addr and serves Triton's gRPC API until
// ctx is cancelled.
func (s *Server) ListenAndServeGRPC(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("simulator gRPC listen: %w", err)
	}
	return s.ServeGRPC(ctx, l)
}

// ServeGRPC serves Triton's gRPC API on l until ctx is cancelled, then
// stops gracefully within shutdown_timeout. l is closed on return.
func (s *Server) ServeGRPC(ctx context.Context, l net.Listener) error {
	conns := &connTracker{m: map[string]net.Conn{}}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(int(s.cfg.MaxRequestBodyBytes)),
		grpc.MaxSendMsgSize(int(s.cfg.MaxRequestBodyBytes)),
	)
	tritonpb.RegisterGRPCInferenceServiceServer(gs, &tritonGRPCService{s: s, conns: conns})
	s.logger.Info("simulated Triton gRPC server listening", "address", l.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(&trackingListener{Listener: l, t: conns}) }()
	select {
	case err := <-errc:
		return fmt.Errorf("simulator gRPC serve: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.logger.Warn("simulator gRPC shutdown grace period over, aborting streams")
		gs.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		s.logger.Warn("simulator gRPC serve", "err", err)
	}
	return nil
}

// connTracker finds a handler's TCP connection by the peer address, so the
// reset fault can reset it.
type connTracker struct {
	mu sync.Mutex
	m  map[string]net.Conn
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	key := c.RemoteAddr().String()
	l.t.mu.Lock()
	l.t.m[key] = c
	l.t.mu.Unlock()
	return &trackedConn{Conn: c, t: l.t, key: key}, nil
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	key  string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.m, c.key)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// closePeer closes the connection the RPC in ctx came on; with reset the
// kernel sends RST.
func (t *connTracker) closePeer(ctx context.Context, reset bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	t.mu.Lock()
	c := t.m[p.Addr.String()]
	t.mu.Unlock()
	if c == nil {
		return
	}
	if tcp, ok := c.(*net.TCPConn); ok && reset {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}

type tritonGRPCService struct {
	tritonpb.UnimplementedGRPCInferenceServiceServer
	s     *Server
	conns *connTracker
}

func (g *tritonGRPCService) ServerLive(context.Context, *tritonpb.ServerLiveRequest) (*tritonpb.ServerLiveResponse, error) {
	return &tritonpb.ServerLiveResponse{Live: true}, nil
}

func (g *tritonGRPCService) ServerReady(context.Context, *tritonpb.ServerReadyRequest) (*tritonpb.ServerReadyResponse, error) {
	return &tritonpb.ServerReadyResponse{Ready: true}, nil
}

func (g *tritonGRPCService) modelKnown(name, version string) bool {
	return g.s.servesModel(name) && (version == "" || version == tritonVersion)
}

func (g *tritonGRPCService) ModelReady(_ context.Context, r *tritonpb.ModelReadyRequest) (*tritonpb.ModelReadyResponse, error) {
	return &tritonpb.ModelReadyResponse{Ready: g.modelKnown(r.GetName(), r.GetVersion())}, nil
}

func (g *tritonGRPCService) ServerMetadata(context.Context, *tritonpb.ServerMetadataRequest) (*tritonpb.ServerMetadataResponse, error) {
	return &tritonpb.ServerMetadataResponse{Name: "triton", Version: "2.60.0-sim",
		Extensions: []string{"classification", "sequence", "model_repository", "statistics", "generate"}}, nil
}

func (g *tritonGRPCService) ModelMetadata(_ context.Context, r *tritonpb.ModelMetadataRequest) (*tritonpb.ModelMetadataResponse, error) {
	if !g.modelKnown(r.GetName(), r.GetVersion()) {
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", r.GetName())
	}
	md := &tritonpb.ModelMetadataResponse{Name: r.GetName(), Versions: []string{tritonVersion}, Platform: "ensemble"}
	for _, in := range tritonModelInputs {
		md.Inputs = append(md.Inputs, &tritonpb.ModelMetadataResponse_TensorMetadata{Name: in.name, Datatype: in.datatype, Shape: []int64{-1, 1}})
	}
	for _, out := range tritonModelOutputs {
		md.Outputs = append(md.Outputs, &tritonpb.ModelMetadataResponse_TensorMetadata{Name: out.name, Datatype: out.datatype, Shape: tritonOutputShape(out.datatype)})
	}
	return md, nil
}

// grpcCode is the gRPC code Triton uses for what its HTTP front-end would
// answer with status.
func grpcCode(status int) codes.Code {
	switch {
	case status == http.StatusNotFound:
		return codes.NotFound
	case status == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case status == http.StatusNotImplemented:
		return codes.Unimplemented
	case status == http.StatusServiceUnavailable:
		return codes.Unavailable
	case status >= 500:
		return codes.Internal
	}
	return codes.InvalidArgument
}

// grpcRequest is one decoded ModelInferRequest with its ground truth entry.
type grpcRequest struct {
	id       string
	received time.Time
	entry    *truthEntry
	p        *plan
	// emptyFinal: triton_enable_empty_final_response was set.
	emptyFinal bool
}

// start decodes and plans a request; on a planning error it returns the
// error to send (as Triton would) with the entry already finished.
func (g *tritonGRPCService) start(ctx context.Context, req *tritonpb.ModelInferRequest, path string, stream bool) (*grpcRequest, *tritonError) {
	md, _ := metadata.FromIncomingContext(ctx)
	received := time.Now()
	id := ""
	if v := md.Get(metaRequestID); len(v) == 1 && validRequestID(v[0]) {
		id = v[0]
	} else if validRequestID(req.GetId()) {
		id = req.GetId()
	} else {
		id = fmt.Sprintf("sim-%x-%d", g.s.started.UnixNano(), g.s.idSeq.Add(1))
	}
	r := &grpcRequest{id: id, received: received}
	r.emptyFinal = req.GetParameters()["triton_enable_empty_final_response"].GetBoolParam()
	traceID := ""
	if v := md.Get(headerTraceParent); len(v) == 1 {
		traceID = traceIDOf(v[0])
	}
	r.entry = g.s.truth.add(RequestRecord{
		ID: id, TraceID: traceID, Protocol: "triton_grpc", Path: path, ReceivedUnixNano: received.UnixNano(),
		Faults: []string{}, Chunks: []ChunkRecord{},
	})
	fail := func(e *tritonError) (*grpcRequest, *tritonError) {
		r.entry.update(func(rec *RequestRecord) { rec.Status, rec.Error = e.status, e.msg })
		r.entry.finish(outcomeHTTPError)
		return r, e
	}
	if v := req.GetModelVersion(); v != "" && v != tritonVersion {
		return fail(&tritonError{http.StatusNotFound, fmt.Sprintf("Request for unknown model: '%s' version %s is not found", req.GetModelName(), v)})
	}
	in, err := grpcInputs(req)
	if err != nil {
		return fail(&tritonError{http.StatusBadRequest, err.Error()})
	}
	opts := ""
	if v := md.Get(metaOptions); len(v) > 0 {
		opts = v[0]
	}
	p, terr := g.s.planTriton(id, req.GetModelName(), in, stream, md.Get(metaFault), opts, g.s.seq.Add(1))
	if terr != nil {
		return fail(terr)
	}
	// Over ModelStreamInfer the model streams only when its stream input
	// says so; otherwise it answers once, as TensorRT-LLM and vLLM do.
	p.stream = stream && in.stream != nil && *in.stream
	r.p = p
	r.entry.update(func(rec *RequestRecord) {
		rec.Model, rec.Stream, rec.PromptTokens, rec.MaxTokens = p.model, p.stream, p.promptTokens, p.maxTokens
		rec.PlannedOutputTokens, rec.Faults = p.outputTokens, p.faults.strings()
	})
	return r, nil
}

// grpcInputs reads the inputs the simulated model knows, from raw
// contents (Triton's clients) or typed contents.
func grpcInputs(req *tritonpb.ModelInferRequest) (*tritonInputs, error) {
	raw := req.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(req.GetInputs()) {
		return nil, fmt.Errorf("expected %d raw input contents, got %d", len(req.GetInputs()), len(raw))
	}
	in := &tritonInputs{}
	for i, t := range req.GetInputs() {
		if len(raw) > 0 && t.GetContents() != nil {
			return nil, fmt.Errorf("input '%s': contents must not be set when raw_input_contents is used", t.GetName())
		}
		var v any
		var err error
		if len(raw) > 0 {
			v, err = firstRawElement(t.GetDatatype(), raw[i])
		} else {
			v, err = firstTypedElement(t.GetDatatype(), t.GetContents())
		}
		if err != nil {
			return nil, fmt.Errorf("input '%s': %v", t.GetName(), err)
		}
		if err := in.set(t.GetName(), v); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func firstRawElement(datatype string, b []byte) (any, error) {
	need := map[string]int{"BOOL": 1, "INT32": 4, "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8, "BYTES": 4}
	n, ok := need[datatype]
	if !ok {
		return nil, fmt.Errorf("unsupported datatype %q", datatype)
	}
	if len(b) < n {
		return nil, fmt.Errorf("%d bytes of raw contents are too few for %s", len(b), datatype)
	}
	switch datatype {
	case "BOOL":
		return b[0] != 0, nil
	case "INT32":
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	case "UINT32":
		return int64(binary.LittleEndian.Uint32(b)), nil
	case "FP32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case "INT64":
		return int64(binary.LittleEndian.Uint64(b)), nil
	case "UINT64":
		return binary.LittleEndian.Uint64(b), nil
	case "FP64":
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	l := binary.LittleEndian.Uint32(b)
	if uint64(l) > uint64(len(b)-4) {
		return nil, fmt.Errorf("BYTES element of %d bytes overruns the %d bytes given", l, len(b)-4)
	}
	return string(b[4 : 4+l]), nil
}

func firstTypedElement(datatype string, c *tritonpb.InferTensorContents) (any, error) {
	switch {
	case datatype == "BOOL" && len(c.GetBoolContents()) > 0:
		return c.GetBoolContents()[0], nil
	case datatype == "INT32" && len(c.GetIntContents()) > 0:
		return int64(c.GetIntContents()[0]), nil
	case datatype == "INT64" && len(c.GetInt64Contents()) > 0:
		return c.GetInt64Contents()[0], nil
	case datatype == "UINT32" && len(c.GetUintContents()) > 0:
		return int64(c.GetUintContents()[0]), nil
	case datatype == "UINT64" && len(c.GetUint64Contents()) > 0:
		return c.GetUint64Contents()[0], nil
	case datatype == "FP32" && len(c.GetFp32Contents()) > 0:
		return float64(c.GetFp32Contents()[0]), nil
	case datatype == "FP64" && len(c.GetFp64Contents()) > 0:
		return c.GetFp64Contents()[0], nil
	case datatype == "BYTES" && len(c.GetBytesContents()) > 0:
		return string(c.GetBytesContents()[0]), nil
	}
	return nil, fmt.Errorf("no %s contents", datatype)
}

func bytesElement(s string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(s)))
	return append(b, s...)
}

func boolParam(v bool) *tritonpb.InferParameter {
	return &tritonpb.InferParameter{ParameterChoice: &tritonpb.InferParameter_BoolParam{BoolParam: v}}
}

// inferResponse is one model response. finished says whether this is the
// answer's last data (its finish_reason is real); markFinal sets the
// stream's triton_final_response (nil: not a stream response).
func inferResponse(p *plan, text string, tokens int, finished bool, markFinal *bool, malformed bool) *tritonpb.ModelInferResponse {
	r := &tritonpb.ModelInferResponse{ModelName: p.model, ModelVersion: tritonVersion, Id: p.id}
	if markFinal != nil {
		r.Parameters = map[string]*tritonpb.InferParameter{"triton_final_response": boolParam(*markFinal)}
	}
	out := func(name, datatype string, raw []byte) {
		r.Outputs = append(r.Outputs, &tritonpb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: datatype, Shape: []int64{1, 1}})
		r.RawOutputContents = append(r.RawOutputContents, raw)
	}
	if malformed {
		out("text_output", "BYTES", []byte{0xff, 0xff, 0xff, 0x7f, 'x'})
	} else {
		out("text_output", "BYTES", bytesElement(text))
	}
	if p.triton.input {
		out("num_input_tokens", "UINT32", binary.LittleEndian.AppendUint32(nil, uint32(p.promptTokens)))
	}
	if p.triton.num {
		out("num_output_tokens", "UINT32", binary.LittleEndian.AppendUint32(nil, uint32(tokens)))
	}
	if p.triton.finish {
		reason := "None"
		if finished && !p.finalHidden() {
			reason = p.finishReason
		}
		out("finish_reason", "BYTES", bytesElement(reason))
	}
	return r
}

// ModelStreamInfer serves each request sent on the stream concurrently,
// as Triton does, and ends the RPC with OK once the client half-closed and
// every request is answered. An injected error ends it with that status.
func (g *tritonGRPCService) ModelStreamInfer(st grpc.BidiStreamingServer[tritonpb.ModelInferRequest, tritonpb.ModelStreamInferResponse]) error {
	ctx := st.Context()
	var mu sync.Mutex
	var firstErr error
	send := func(m *tritonpb.ModelStreamInferResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return st.Send(m)
	}
	var wg sync.WaitGroup
	for {
		req, err := st.Recv()
		if err != nil {
			wg.Wait()
			if errors.Is(err, io.EOF) {
				mu.Lock()
				defer mu.Unlock()
				return firstErr
			}
			return err
		}
		wg.Go(func() {
			if err := g.streamRequest(ctx, req, send); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
}

func (g *tritonGRPCService) streamRequest(ctx context.Context, req *tritonpb.ModelInferRequest, send func(*tritonpb.ModelStreamInferResponse) error) error {
	r, terr := g.start(ctx, req, grpcStreamPath, true)
	if terr != nil {
		// Triton reports request errors on a stream in error_message and
		// keeps the stream open.
		_ = send(&tritonpb.ModelStreamInferResponse{ErrorMessage: terr.msg, InferResponse: &tritonpb.ModelInferResponse{Id: r.id}})
		return nil
	}
	p := r.p
	j := &job{s: g.s, fe: noWireFrontEnd{}, entry: r.entry, p: p, received: r.received, fired: map[string]bool{}}
	if f, ok := p.faults.get(faultError); ok {
		msg := fmt.Sprintf("Injected fault: HTTP %d", f.status)
		r.entry.update(func(rec *RequestRecord) { rec.Status, rec.Error = f.status, msg })
		r.entry.finish(outcomeHTTPError)
		return status.Error(grpcCode(f.status), msg)
	}
	t, err := j.reserve(ctx)
	if j.releaseModel != nil {
		defer j.releaseModel()
	}
	switch {
	case errors.Is(err, errQueueFull):
		r.entry.finish(outcomeRejected)
		return status.Error(codes.Unavailable, tritonQueueFull)
	case err != nil:
		r.entry.finish(outcomeClientGone)
		return status.Error(codes.Canceled, "client gone")
	}
	j.ticket = t
	defer j.releaseOnPanic()
	outcome, reason := g.runStream(ctx, j, r, send)
	j.s.releaseSlot(j, outcome)
	j.observe(outcome, reason)
	return nil
}

func (g *tritonGRPCService) runStream(ctx context.Context, j *job, r *grpcRequest, send func(*tritonpb.ModelStreamInferResponse) error) (outcome, reason string) {
	p := j.p
	ready, ok := j.admit(ctx)
	if !ok {
		return outcomeClientGone, ""
	}
	var text []byte
	malformed := false
	sendResp := func(ir *tritonpb.ModelInferResponse, kind string, tokens int, content bool) error {
		if err := send(&tritonpb.ModelStreamInferResponse{InferResponse: ir}); err != nil {
			return errClientGone
		}
		now := time.Now()
		j.entry.addChunk(now, kind, tokens, content)
		if p.stream {
			j.tokensOut(now, tokens)
		}
		return nil
	}
	term, err := j.tokenLoop(ctx, ready, func(_ segment, n int, final bool) error {
		w := words(p.text, n)
		if j.fired[faultMalformed] && !malformed {
			malformed = true
			if p.stream {
				if err := sendResp(inferResponse(p, "", 0, false, new(false), true), kindMalformed, 0, false); err != nil {
					return err
				}
			}
		}
		if !p.stream {
			text = append(text, w...)
			j.tokensOut(time.Now(), n)
			return nil
		}
		mark := final && !r.emptyFinal && !p.finalHidden()
		return sendResp(inferResponse(p, w, n, final, &mark, false), kindContent, n, true)
	})
	if err != nil {
		return outcomeClientGone, ""
	}
	switch term {
	case outcomeReset:
		g.conns.closePeer(ctx, true)
		return outcomeReset, ""
	case outcomeTruncated:
		return outcomeTruncated, ""
	case outcomeErrorEvent:
		if send(&tritonpb.ModelStreamInferResponse{ErrorMessage: "Injected fault: inference failed during generation",
			InferResponse: &tritonpb.ModelInferResponse{Id: p.id}}) != nil {
			return outcomeClientGone, ""
		}
		j.entry.addChunk(time.Now(), kindError, 0, false)
		return outcomeErrorEvent, ""
	}
	if !p.stream {
		mark := !r.emptyFinal
		if sendResp(inferResponse(p, string(text), j.sent, true, &mark, malformed), kindBody, j.sent, j.sent > 0) != nil {
			return outcomeClientGone, ""
		}
	}
	if r.emptyFinal {
		ir := &tritonpb.ModelInferResponse{ModelName: p.model, ModelVersion: tritonVersion, Id: p.id,
			Parameters: map[string]*tritonpb.InferParameter{"triton_final_response": boolParam(true)}}
		if sendResp(ir, kindFinish, 0, false) != nil {
			return outcomeClientGone, ""
		}
	}
	return outcomeCompleted, p.finishReason
}

// ModelInfer answers once, after the whole generation.
func (g *tritonGRPCService) ModelInfer(ctx context.Context, req *tritonpb.ModelInferRequest) (*tritonpb.ModelInferResponse, error) {
	r, terr := g.start(ctx, req, "/inference.GRPCInferenceService/ModelInfer", false)
	if terr != nil {
		return nil, status.Error(grpcCode(terr.status), terr.msg)
	}
	p := r.p
	j := &job{s: g.s, fe: noWireFrontEnd{}, entry: r.entry, p: p, received: r.received, fired: map[string]bool{}}
	if f, ok := p.faults.get(faultError); ok {
		msg := fmt.Sprintf("Injected fault: HTTP %d", f.status)
		r.entry.update(func(rec *RequestRecord) { rec.Status, rec.Error = f.status, msg })
		r.entry.finish(outcomeHTTPError)
		return nil, status.Error(grpcCode(f.status), msg)
	}
	t, err := j.reserve(ctx)
	if j.releaseModel != nil {
		defer j.releaseModel()
	}
	switch {
	case errors.Is(err, errQueueFull):
		r.entry.finish(outcomeRejected)
		return nil, status.Error(codes.Unavailable, tritonQueueFull)
	case err != nil:
		r.entry.finish(outcomeClientGone)
		return nil, status.Error(codes.Canceled, "client gone")
	}
	j.ticket = t
	defer j.releaseOnPanic()
	resp, outcome, reason, serr := g.runUnary(ctx, j)
	j.s.releaseSlot(j, outcome)
	j.observe(outcome, reason)
	return resp, serr
}

func (g *tritonGRPCService) runUnary(ctx context.Context, j *job) (*tritonpb.ModelInferResponse, string, string, error) {
	p := j.p
	gone := status.Error(codes.Canceled, "client gone")
	ready, ok := j.admit(ctx)
	if !ok {
		return nil, outcomeClientGone, "", gone
	}
	var text []byte
	term, err := j.tokenLoop(ctx, ready, func(_ segment, n int, _ bool) error {
		text = append(text, words(p.text, n)...)
		j.tokensOut(time.Now(), n)
		return nil
	})
	if err != nil {
		return nil, outcomeClientGone, "", gone
	}
	switch term {
	case outcomeReset:
		g.conns.closePeer(ctx, true)
		return nil, outcomeReset, "", gone
	case outcomeTruncated:
		g.conns.closePeer(ctx, false)
		return nil, outcomeTruncated, "", gone
	case outcomeErrorEvent:
		return nil, outcomeErrorEvent, "", status.Error(codes.Internal, "Injected fault: inference failed during generation")
	}
	resp := inferResponse(p, string(text), j.sent, true, nil, j.fired[faultMalformed])
	j.entry.addChunk(time.Now(), kindBody, j.sent, j.sent > 0)
	return resp, outcomeCompleted, p.finishReason, nil
}

// noWireFrontEnd lets gRPC reuse job's engine, pacing and fault logic:
// nothing of it goes to an HTTP ResponseWriter.
type noWireFrontEnd struct{}

func (noWireFrontEnd) streamContentType() string       { return "" }
func (noWireFrontEnd) encodeEvent(event, *plan) []byte { return nil }
func (noWireFrontEnd) body(*plan, string, string) []byte {
	return nil
}
func (noWireFrontEnd) errorBody(int, string) []byte { return nil }
