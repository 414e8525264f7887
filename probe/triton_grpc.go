package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptrace"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	promconfig "github.com/prometheus/common/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

// tritonGRPCDriver speaks Triton's inference.GRPCInferenceService.
//
// Streaming probes open ModelStreamInfer, send one ModelInferRequest with
// triton_enable_empty_final_response=true, half-close, and read responses
// until one carries triton_final_response=true; non-streaming probes use
// ModelInfer (or, with TritonOptions.Decoupled, the stream with the stream
// input false).
//
// Outcomes:
//   - connect_error: the channel could not reach READY (refused, DNS, TLS)
//     before the RPC was started;
//   - timeout: the probe's deadline passed (or it was cancelled);
//   - stream_stalled: no response for stream_idle_timeout;
//   - grpc_error: a non-OK status sent by the server (UNAVAILABLE,
//     INTERNAL, INVALID_ARGUMENT, …), an error_message in a stream
//     response, or a server or model that is not ready at target start;
//   - incomplete: the transport broke after the RPC started (connection
//     reset, RST_STREAM, GOAWAY mid-stream), or the stream ended with OK
//     before the final response;
//   - protocol_error: a message over the size bound, an undecodable
//     tensor, a response without the text output.
type tritonGRPCDriver struct {
	opts   TargetOptions
	triton TritonOptions
	logger *slog.Logger
	// dial holds the options every channel shares; newConn adds the
	// dialer and credentials, which time each channel's own attempts.
	dial   []grpc.DialOption
	dialer *net.Dialer
	// tlsCreds is nil for plaintext.
	tlsCreds credentials.TransportCredentials
	conn     *grpc.ClientConn
	trace    *connTrace // conn's attempts
	md       metadata.MD
	// policy redacts errors, as for the HTTP drivers.
	policy *redact.Policy

	dialErr lastError

	readyMu sync.Mutex
	ready   bool
}

// lastError remembers the last dial error, so a channel stuck in
// TRANSIENT_FAILURE can say why.
type lastError struct {
	mu  sync.Mutex
	err error
}

func (l *lastError) set(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *lastError) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func newTritonGRPCDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	tr, err := opts.Triton.resolved()
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", opts.Name, err)
	}
	if opts.Address == "" {
		return nil, fmt.Errorf("target %q: triton_grpc needs an address (host:port)", opts.Name)
	}
	if _, _, err := net.SplitHostPort(opts.Address); err != nil {
		return nil, fmt.Errorf("target %q: address %q: want host:port", opts.Name, opts.Address)
	}
	d := &tritonGRPCDriver{opts: opts, triton: tr, logger: logger}

	if tr.TLS || !reflect.ValueOf(opts.TLS).IsZero() {
		tlsOpts := opts.TLS
		cfg, err := promconfig.NewTLSConfig(&tlsOpts)
		if err != nil {
			return nil, fmt.Errorf("target %q: TLS settings: %w", opts.Name, err)
		}
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		d.tlsCreds = credentials.NewTLS(cfg)
	}
	d.dialer = &net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	d.dial = []grpc.DialOption{
		grpc.WithUserAgent("llm-prober"),
		grpc.WithDisableServiceConfig(),
		// A prober wants each failure seen, not hidden by retries.
		grpc.WithDisableRetry(),
		grpc.WithStatsHandler(rpcStats{}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: opts.ConnectTimeout,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(tr.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(tr.MaxMessageBytes),
		),
	}
	if tr.KeepaliveTime > 0 {
		d.dial = append(d.dial, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: tr.KeepaliveTime, Timeout: tr.KeepaliveTimeout,
		}))
	}
	d.md = metadata.MD{}
	for k, v := range opts.Headers {
		k = strings.ToLower(k)
		if k == "host" {
			continue // HTTP/2 :authority is not a metadata key
		}
		d.md.Set(k, v)
	}
	if opts.BearerToken != "" {
		d.md.Set("authorization", "Bearer "+opts.BearerToken)
	}
	d.policy = targetPolicy(opts)
	if !opts.NewConnectionPerProbe {
		if d.conn, d.trace, err = d.newConn(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *tritonGRPCDriver) newConn() (*grpc.ClientConn, *connTrace, error) {
	ct := &connTrace{tls: d.tlsCreds != nil}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if d.tlsCreds != nil {
		creds = &timedCreds{TransportCredentials: d.tlsCreds, ct: ct}
	}
	opts := append(slices.Clip(d.dial),
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(ct.dialer(d.dialer, &d.dialErr)))
	// passthrough: the address is dialled as given at every reconnect, as
	// the HTTP drivers resolve it per connection.
	conn, err := grpc.NewClient("passthrough:///"+d.opts.Address, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("target %q: %w", d.opts.Name, err)
	}
	return conn, ct, nil
}

// Close implements Driver.
func (d *tritonGRPCDriver) Close() {
	if d.conn != nil {
		_ = d.conn.Close()
	}
}

func (d *tritonGRPCDriver) redact(err error) error {
	return d.policy.Error(err)
}

func (d *tritonGRPCDriver) done(r *Result) {
	r.checkCounts()
	r.Err = d.redact(r.Err)
	if r.Outcome == "" {
		r.Outcome = OutcomeProtocolError
	}
	if d.logger.Enabled(context.Background(), slog.LevelDebug) {
		attrs := []any{"request_id", r.RequestID, "outcome", r.Outcome, "ttft", r.TTFT,
			"end_to_end", r.EndToEnd, "output_tokens", r.OutputTokens}
		if r.Err != nil {
			attrs = append(attrs, "err", r.Err)
		}
		d.logger.Debug("probe finished", attrs...)
	}
}

// Probe implements Driver.
func (d *tritonGRPCDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.done(r)
	model := req.modelOr(d.opts.Model)
	conn, ct := d.conn, d.trace
	if conn == nil {
		c, t, err := d.newConn()
		if err != nil {
			r.Start = time.Now()
			r.Outcome, r.Err = OutcomeConnectError, err
			return r
		}
		defer c.Close()
		conn, ct = c, t
	}
	msg, err := d.buildRequest(req, r.RequestID, model)
	if err != nil {
		r.Start = time.Now()
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("building the request: %w", err)
		return r
	}
	md := d.md.Copy()
	md.Set("x-request-id", r.RequestID)
	md.Set("traceparent", r.grpcTraceParent())
	ctx = metadata.NewOutgoingContext(ctx, md)
	// Only the probe's own RPC is traced, not the readiness check's.
	rt := &rpcTrace{}
	rctx := context.WithValue(ctx, rpcTraceKey{}, rt)

	if !d.isReady() {
		// Readiness is checked once per target before its first probe and
		// not timed; the probe then runs on the connection it opened.
		r.Start = time.Now()
		if !d.connect(ctx, conn, ct, r) || !d.checkReady(ctx, conn, model, r) {
			return r
		}
		r.Phases = Phases{}
	}
	prepared := false
	if release := releaseOf(ctx); release != nil {
		// Held for a release (WithRelease): the request is built; bring
		// the channel to READY now (a channel of its own, for
		// new_connection_per_probe, connects after the release, inside
		// TTFT) and keep the phases of that connection.
		if conn == d.conn {
			prep := &Result{Start: time.Now()}
			if prepared = d.connect(ctx, conn, ct, prep); prepared {
				r.Phases = prep.Phases
			}
		}
		if !waitRelease(ctx, release) {
			r.Start = time.Now()
			r.Outcome, r.Err = cancelOutcome(ctx.Err()), fmt.Errorf("probe cancelled while waiting for its release: %w", ctx.Err())
			return r
		}
	}
	// Start includes getting a connection when none is up, as TTFT does
	// for the HTTP drivers; its dns, connect and tls phases are reported.
	r.Start = time.Now()
	if !prepared || conn.GetState() != connectivity.Ready {
		if !d.connect(ctx, conn, ct, r) {
			return r
		}
	}
	client := tritonpb.NewGRPCInferenceServiceClient(conn)
	if req.Stream || d.triton.Decoupled {
		d.stream(rctx, client, msg, r)
	} else {
		d.unary(rctx, client, msg, r)
	}
	rt.phases(&r.Phases)
	if ns := ct.certExpiry.Load(); ns != 0 {
		r.TLSCertExpiry = time.Unix(0, ns)
	}
	return r
}

// connect brings the channel to READY, recording the dns, connect and tls
// phases of the attempt it waited for; on failure it sets a connect_error
// (or timeout) outcome.
func (d *tritonGRPCDriver) connect(ctx context.Context, conn *grpc.ClientConn, ct *connTrace, r *Result) bool {
	s := conn.GetState()
	if s == connectivity.Ready {
		r.Phases.ConnectionReused = true
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, d.opts.ConnectTimeout+time.Second)
	defer cancel()
	t0 := time.Now()
	if s == connectivity.TransientFailure {
		// The channel is backing off after an earlier failure; a probe
		// wants to know about the server now.
		conn.ResetConnectBackoff()
	}
	conn.Connect()
	attempted := false
	for {
		s = conn.GetState()
		switch s {
		case connectivity.Ready:
			ct.phases(t0, true, &r.Phases)
			return true
		case connectivity.Connecting:
			attempted = true
		case connectivity.TransientFailure:
			if attempted {
				ct.phases(t0, false, &r.Phases)
				r.EndToEnd = time.Since(r.Start)
				r.Outcome = OutcomeConnectError
				r.Err = fmt.Errorf("connecting to %s: %v", d.opts.Address, orUnknown(d.dialErr.get()))
				return false
			}
		case connectivity.Shutdown:
			r.EndToEnd = time.Since(r.Start)
			r.Outcome, r.Err = OutcomeConnectError, errors.New("driver closed")
			return false
		}
		if !conn.WaitForStateChange(cctx, s) {
			ct.phases(t0, false, &r.Phases)
			r.EndToEnd = time.Since(r.Start)
			if err := ctx.Err(); err != nil {
				r.Outcome, r.Err = OutcomeTimeout, fmt.Errorf("probe deadline exceeded while connecting to %s: %w", d.opts.Address, err)
			} else {
				r.Outcome, r.Err = OutcomeConnectError, fmt.Errorf("connecting to %s: no connection within %v (last error: %v)", d.opts.Address, d.opts.ConnectTimeout, orUnknown(d.dialErr.get()))
			}
			return false
		}
	}
}

func orUnknown(err error) any {
	if err == nil {
		return "handshake failed or connection closed"
	}
	return err
}

func (d *tritonGRPCDriver) isReady() bool {
	d.readyMu.Lock()
	defer d.readyMu.Unlock()
	return d.ready
}

// checkReady asks ServerReady and ModelReady once per target: at the first
// probe, and again after a probe found them not ready. A not-ready server
// or model fails that probe as grpc_error (the server answered, saying it
// cannot serve) and is logged; servers without the readiness RPCs
// (UNIMPLEMENTED behind some proxies) are let through.
func (d *tritonGRPCDriver) checkReady(ctx context.Context, conn *grpc.ClientConn, model string, r *Result) bool {
	d.readyMu.Lock()
	defer d.readyMu.Unlock()
	if d.ready {
		return true
	}
	c := tritonpb.NewGRPCInferenceServiceClient(conn)
	fail := func(err error) bool {
		r.EndToEnd = time.Since(r.Start)
		r.Outcome, r.Err = d.classify(ctx, nil, err, "checking readiness")
		d.logger.Warn("Triton readiness check failed", "address", d.opts.Address, "model", model, "err", d.redact(r.Err))
		return false
	}
	sr, err := c.ServerReady(ctx, &tritonpb.ServerReadyRequest{})
	if status.Code(err) == codes.Unimplemented {
		d.logger.Info("Triton server has no readiness RPCs; not checking readiness", "address", d.opts.Address)
		d.ready = true
		return true
	}
	if err != nil {
		return fail(err)
	}
	if !sr.GetReady() {
		return fail(status.Error(codes.Unavailable, "server is not ready (ServerReady: false)"))
	}
	mr, err := c.ModelReady(ctx, &tritonpb.ModelReadyRequest{Name: model, Version: d.triton.ModelVersion})
	if err != nil {
		return fail(err)
	}
	if !mr.GetReady() {
		return fail(status.Errorf(codes.Unavailable, "model %q is not ready (ModelReady: false)", model))
	}
	d.logger.Info("Triton server and model ready", "address", d.opts.Address, "model", model)
	d.ready = true
	return true
}

// buildRequest maps the request through the inputs. Every input goes in
// raw_input_contents (Triton refuses a request mixing raw and typed
// contents), in the order of inputs.
func (d *tritonGRPCDriver) buildRequest(req *Request, id, model string) (*tritonpb.ModelInferRequest, error) {
	m := &tritonpb.ModelInferRequest{
		ModelName:    model,
		ModelVersion: d.triton.ModelVersion,
		Id:           id,
		Parameters: map[string]*tritonpb.InferParameter{
			// An explicit final response even when the last data response
			// went out without the final flag (ensembles, BLS).
			"triton_enable_empty_final_response": {ParameterChoice: &tritonpb.InferParameter_BoolParam{BoolParam: true}},
		},
	}
	for i := range d.triton.Inputs {
		in := &d.triton.Inputs[i]
		vals, ok := in.values(req)
		if !ok {
			continue
		}
		raw, err := in.encodeRaw(vals)
		if err != nil {
			return nil, err
		}
		m.Inputs = append(m.Inputs, &tritonpb.ModelInferRequest_InferInputTensor{
			Name: in.Name, Datatype: in.Datatype, Shape: in.Shape,
		})
		m.RawInputContents = append(m.RawInputContents, raw)
	}
	return m, nil
}

// classify maps a gRPC error. stalled, when non-nil, is the stream
// context whose cancel cause says whether the stall detector fired.
func (d *tritonGRPCDriver) classify(parent, sctx context.Context, err error, doing string) (Outcome, error) {
	if sctx != nil && errors.Is(context.Cause(sctx), errStreamStalled) {
		return OutcomeStreamStalled, fmt.Errorf("no response for %v while %s (stream_idle_timeout)", d.opts.StreamIdleTimeout, doing)
	}
	if perr := parent.Err(); perr != nil {
		if errors.Is(perr, context.DeadlineExceeded) {
			return OutcomeTimeout, fmt.Errorf("probe deadline exceeded while %s: %w", doing, perr)
		}
		return OutcomeCancelled, fmt.Errorf("probe cancelled while %s: %w", doing, perr)
	}
	st, ok := status.FromError(err)
	// The deadline also travels to the server (grpc-timeout), and on a busy
	// machine its answer (DEADLINE_EXCEEDED, a cancel, or a clean end) can
	// arrive before our own context's timer has run: judge by the clock.
	if deadlinePassed(parent) || (ok && st.Code() == codes.DeadlineExceeded) {
		return OutcomeTimeout, fmt.Errorf("probe deadline exceeded while %s: %w", doing, err)
	}
	if !ok {
		return OutcomeIncomplete, fmt.Errorf("%s: %w", doing, err)
	}
	msg := sanitize([]byte(st.Message()))
	switch {
	case st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max"):
		return OutcomeProtocolError, fmt.Errorf("%s: %s (max_message_bytes)", doing, msg)
	case transportFailure(st):
		return OutcomeIncomplete, fmt.Errorf("connection failed while %s: %s: %s", doing, st.Code(), msg)
	}
	return OutcomeGRPCError, fmt.Errorf("%s: gRPC status %s: %s", doing, st.Code(), msg)
}

// deadlinePassed reports whether ctx's deadline is behind us, even if the
// timer that sets ctx.Err has not run yet.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// transportFailure tells a broken transport, which grpc-go reports as
// UNAVAILABLE or INTERNAL with its own wording, from a status the server
// chose to send.
func transportFailure(st *status.Status) bool {
	if st.Code() != codes.Unavailable && st.Code() != codes.Internal && st.Code() != codes.Canceled {
		return false
	}
	m := st.Message()
	for _, s := range []string{"RST_STREAM", "transport is closing", "error reading from server",
		"connection reset", "connection error", "EOF", "GOAWAY", "broken pipe", "closed before"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// tritonResponse is what one ModelInferResponse told us.
type tritonResponse struct {
	text         bool
	tokens       int
	hasTokens    bool
	inputTokens  int
	hasInput     bool
	finish       string
	hasFinish    bool
	final        bool
	hasFinal     bool
	outputsFound int
}

// maxBytesElements bounds the elements decoded from one BYTES output.
const maxBytesElements = 1 << 16

// readResponse decodes the outputs we need. Outputs come in
// raw_output_contents (index-aligned with outputs) from Triton, or in
// typed contents from other servers.
func (d *tritonGRPCDriver) readResponse(m *tritonpb.ModelInferResponse) (tritonResponse, error) {
	var t tritonResponse
	if p, ok := m.GetParameters()["triton_final_response"]; ok {
		t.hasFinal = true
		t.final = p.GetBoolParam()
	}
	raw := m.GetRawOutputContents()
	if len(raw) > 0 && len(raw) != len(m.GetOutputs()) {
		return t, fmt.Errorf("%d outputs but %d raw_output_contents", len(m.GetOutputs()), len(raw))
	}
	for i, out := range m.GetOutputs() {
		name := out.GetName()
		text := d.triton.isTextOutput(name)
		if !text && name != outputNumTokens && name != outputNumInputTokens && name != outputFinishReason {
			continue
		}
		var r []byte
		if len(raw) > 0 {
			r = raw[i]
		}
		switch {
		case text || name == outputFinishReason:
			elems, err := bytesOutput(out, r)
			if err != nil {
				return t, fmt.Errorf("output %s: %w", name, err)
			}
			if text {
				t.outputsFound++
				for _, e := range elems {
					t.text = t.text || len(e) > 0
				}
			} else if len(elems) > 0 {
				t.hasFinish = true
				t.finish = realFinishReason(sanitize(elems[0]))
			} else {
				t.hasFinish = true
			}
		case name == outputNumTokens:
			if n, ok := firstCount(out, r); ok {
				t.tokens, t.hasTokens = n, true
			}
		case name == outputNumInputTokens:
			t.inputTokens, t.hasInput = firstCount(out, r)
		}
	}
	return t, nil
}

func bytesOutput(out *tritonpb.ModelInferResponse_InferOutputTensor, raw []byte) ([][]byte, error) {
	if dt := out.GetDatatype(); dt != "" && dt != DatatypeBytes {
		return nil, fmt.Errorf("datatype %s, want BYTES", dt)
	}
	if raw != nil {
		return DecodeBytesTensor(raw, maxBytesElements)
	}
	return out.GetContents().GetBytesContents(), nil
}

// firstCount reads the first element of an integer output.
func firstCount(out *tritonpb.ModelInferResponse_InferOutputTensor, raw []byte) (int, bool) {
	var v uint64
	switch out.GetDatatype() {
	case DatatypeUint32, DatatypeInt32:
		if len(raw) >= 4 {
			v = uint64(leUint32(raw))
			if out.GetDatatype() == DatatypeInt32 && int32(v) < 0 {
				return 0, false
			}
		} else if c := out.GetContents(); len(c.GetUintContents()) > 0 {
			v = uint64(c.GetUintContents()[0])
		} else if len(c.GetIntContents()) > 0 && c.GetIntContents()[0] >= 0 {
			v = uint64(c.GetIntContents()[0])
		} else {
			return 0, false
		}
	case DatatypeUint64, DatatypeInt64:
		if len(raw) >= 8 {
			v = uint64(leUint32(raw)) | uint64(leUint32(raw[4:]))<<32
			if out.GetDatatype() == DatatypeInt64 && int64(v) < 0 {
				return 0, false
			}
		} else if c := out.GetContents(); len(c.GetUint64Contents()) > 0 {
			v = c.GetUint64Contents()[0]
		} else if len(c.GetInt64Contents()) > 0 && c.GetInt64Contents()[0] >= 0 {
			v = uint64(c.GetInt64Contents()[0])
		} else {
			return 0, false
		}
	default:
		return 0, false
	}
	if v > maxTokensPerChunk*64 {
		return 0, false
	}
	return int(v), true
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// stream runs one request over ModelStreamInfer.
func (d *tritonGRPCDriver) stream(ctx context.Context, c tritonpb.GRPCInferenceServiceClient, msg *tritonpb.ModelInferRequest, r *Result) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	// As for HTTP: a stall only while the probe's deadline has not passed.
	idle := time.AfterFunc(d.opts.StreamIdleTimeout, func() {
		if ctx.Err() == nil {
			cancel(errStreamStalled)
		}
	})
	defer idle.Stop()
	fail := func(err error, doing string) {
		r.EndToEnd = time.Since(r.Start)
		r.Outcome, r.Err = d.classify(ctx, sctx, err, doing)
	}
	st, err := c.ModelStreamInfer(sctx)
	if err != nil {
		fail(err, "opening the stream")
		return
	}
	if err := st.Send(msg); err != nil {
		// The real error comes from Recv (Send reports io.EOF then).
		if _, rerr := st.Recv(); rerr != nil && rerr != io.EOF {
			err = rerr
		}
		fail(err, "sending the request")
		return
	}
	if err := st.CloseSend(); err != nil {
		fail(err, "half-closing the stream")
		return
	}
	var counts tritonCounts
	defer counts.finish(r)
	var total int64
	responses, sawFinalParam := 0, false
	lastFinish := ""
	for {
		m, err := st.Recv()
		now := time.Now()
		if err == io.EOF {
			r.EndToEnd = now.Sub(r.Start)
			switch {
			case ctx.Err() != nil || deadlinePassed(ctx):
				// The deadline travels to the server (grpc-timeout), which
				// may end the RPC with OK a moment before our own timer.
				r.Outcome, r.Err = d.classify(ctx, sctx, err, fmt.Sprintf("reading the stream after %d responses", responses))
			case responses > 0 && !sawFinalParam:
				// A server older than triton_final_response: the stream
				// ending with OK after our half-close is its end.
				r.Outcome, r.FinishReason = OutcomeSuccess, lastFinish
			case responses == 0:
				r.Outcome, r.Err = OutcomeIncomplete, errors.New("stream ended with OK before any response")
			default:
				r.Outcome, r.Err = OutcomeIncomplete, fmt.Errorf("stream ended with OK after %d responses, none flagged triton_final_response", responses)
			}
			return
		}
		if err != nil {
			fail(err, fmt.Sprintf("reading the stream after %d responses", responses))
			return
		}
		idle.Reset(d.opts.StreamIdleTimeout)
		total += int64(proto.Size(m))
		if total > d.opts.MaxResponseBytes {
			r.end(now, OutcomeProtocolError, fmt.Errorf("stream exceeds %d bytes (max_response_bytes)", d.opts.MaxResponseBytes))
			return
		}
		if em := m.GetErrorMessage(); em != "" {
			r.end(now, OutcomeGRPCError, fmt.Errorf("stream response error_message after %d responses: %s", responses, sanitize([]byte(em))))
			return
		}
		ir := m.GetInferResponse()
		if ir == nil {
			r.end(now, OutcomeProtocolError, errors.New("stream response without infer_response or error_message"))
			return
		}
		t, err := d.readResponse(ir)
		if err != nil {
			r.end(now, OutcomeProtocolError, fmt.Errorf("response %d: %w", responses+1, err))
			return
		}
		responses++
		setInputTokens(r, t.inputTokens, t.hasInput)
		sawFinalParam = sawFinalParam || t.hasFinal
		if t.hasFinish {
			counts.anyFinish = true
			if t.finish != "" {
				lastFinish = t.finish
			}
		}
		if t.text && r.Streamed {
			if err := counts.add(r, now, t.tokens, t.hasTokens); err != nil {
				// A cut returns with the stream unread: the deferred
				// cancel resets it, as a client giving up does.
				r.stopOnChunkError(now, err)
				return
			}
		}
		if !r.Streamed && t.hasTokens {
			r.OutputTokens += t.tokens
			r.OutputTokensSource = TokenSourceServer
		}
		if t.final {
			r.end(now, OutcomeSuccess, nil)
			r.FinishReason = lastFinish
			// Let the server end the RPC (it does once our half-closed
			// stream has no request left), so it does not log a cancel.
			idle.Stop()
			grace := time.AfterFunc(drainGrace, func() { cancel(errDrained) })
			for {
				if _, err := st.Recv(); err != nil {
					break
				}
			}
			grace.Stop()
			return
		}
	}
}

// unary runs one request over ModelInfer.
func (d *tritonGRPCDriver) unary(ctx context.Context, c tritonpb.GRPCInferenceServiceClient, msg *tritonpb.ModelInferRequest, r *Result) {
	m, err := c.ModelInfer(ctx, msg)
	now := time.Now()
	r.EndToEnd = now.Sub(r.Start)
	if err != nil {
		r.Outcome, r.Err = d.classify(ctx, nil, err, "waiting for the answer")
		return
	}
	t, err := d.readResponse(m)
	if err != nil {
		r.Outcome, r.Err = OutcomeProtocolError, err
		return
	}
	setInputTokens(r, t.inputTokens, t.hasInput)
	if t.outputsFound == 0 {
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("answer has none of the outputs %s", strings.Join(d.triton.Outputs, ", "))
		return
	}
	if t.hasTokens {
		r.OutputTokens, r.OutputTokensSource = t.tokens, TokenSourceServer
	}
	r.FinishReason = t.finish
	r.Outcome = OutcomeSuccess
}

// connTrace times the connection attempts of one channel. grpc-go dials
// and handshakes on its own goroutines, not in the probe's, so each
// attempt is recorded here and a probe that waited for the channel takes
// the phases of the attempt that made it ready.
type connTrace struct {
	tls bool // attempts end with a TLS handshake
	// certExpiry is the earliest certificate expiry (Unix nanoseconds) of
	// the latest completed TLS handshake; 0 before one.
	certExpiry atomic.Int64
	mu         sync.Mutex
	// last is the latest attempt; ok the latest whose connection was
	// established (TCP connected, and TLS done when tls).
	last, ok *dialAttempt
}

type dialAttempt struct {
	start                 time.Time
	conn                  net.Conn
	dnsStart, dnsDone     time.Time
	connStart, connDone   time.Time
	tlsStart, tlsDone     time.Time
	connected, handshaken bool
}

// dialer dials with nd as before, reporting DNS and TCP connect through
// the same net/http/httptrace hooks net.Dialer gives the HTTP drivers, so
// resolution, happy eyeballs and timeouts are unchanged and the phases
// mean the same. An IP literal has no DNS phase.
func (ct *connTrace) dialer(nd *net.Dialer, lastErr *lastError) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		a := &dialAttempt{start: time.Now()}
		ct.mu.Lock()
		ct.last = a
		ct.mu.Unlock()
		set := func(dst *time.Time, first bool) {
			now := time.Now()
			ct.mu.Lock()
			if !first || dst.IsZero() {
				*dst = now
			}
			ct.mu.Unlock()
		}
		trace := &httptrace.ClientTrace{
			DNSStart: func(httptrace.DNSStartInfo) { set(&a.dnsStart, false) },
			DNSDone: func(i httptrace.DNSDoneInfo) {
				if i.Err == nil {
					set(&a.dnsDone, false)
				}
			},
			// Happy eyeballs may race several: the phase runs from the
			// first start to the first success (a losing racer can report
			// after the dial returned).
			ConnectStart: func(string, string) { set(&a.connStart, true) },
			ConnectDone: func(_, _ string, err error) {
				if err == nil {
					set(&a.connDone, true)
				}
			},
		}
		c, err := nd.DialContext(httptrace.WithClientTrace(ctx, trace), "tcp", addr)
		lastErr.set(err)
		if err == nil {
			ct.mu.Lock()
			a.conn, a.connected = c, true
			if !ct.tls {
				ct.ok = a
			}
			ct.mu.Unlock()
		}
		return c, err
	}
}

// handshake records a TLS handshake on raw, the connection an attempt
// dialled.
func (ct *connTrace) handshake(raw net.Conn, start, end time.Time, err error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	a := ct.last
	if a == nil || a.conn != raw {
		return
	}
	a.tlsStart = start
	if err == nil {
		a.tlsDone, a.handshaken = end, true
		ct.ok = a
	}
}

// phases fills in dns, connect and tls for a probe that began waiting for
// the channel at since: from the attempt that made the channel ready
// (ready), else from the latest attempt (a failure: the phases that
// completed before it). An attempt already under way at since was
// started for someone else; the probe reports none of its phases, which
// would otherwise overlap time outside the probe.
func (ct *connTrace) phases(since time.Time, ready bool, p *Phases) {
	if ct == nil {
		return
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	a := ct.last
	if ready {
		a = ct.ok
	}
	if a == nil || a.start.Before(since) {
		return
	}
	p.DNS, p.HasDNS = span(a.dnsStart, a.dnsDone)
	p.Connect, p.HasConnect = span(a.connStart, a.connDone)
	p.TLS, p.HasTLS = span(a.tlsStart, a.tlsDone)
}

// span is b−a when both happened in that order.
func span(a, b time.Time) (time.Duration, bool) {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0, false
	}
	return b.Sub(a), true
}

// timedCreds times the TLS handshake of the credentials it wraps.
type timedCreds struct {
	credentials.TransportCredentials
	ct *connTrace
}

func (c *timedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	start := time.Now()
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	c.ct.handshake(raw, start, time.Now(), err)
	if ti, ok := info.(credentials.TLSInfo); ok && err == nil {
		if e := EarliestExpiry(ti.State.PeerCertificates); !e.IsZero() {
			c.ct.certExpiry.Store(e.UnixNano())
		}
	}
	return conn, info, err
}

func (c *timedCreds) Clone() credentials.TransportCredentials {
	return &timedCreds{TransportCredentials: c.TransportCredentials.Clone(), ct: c.ct}
}

// rpcTraceKey carries a probe's *rpcTrace in the context of its RPC.
type rpcTraceKey struct{}

// rpcTrace is what grpc-go's stats events said about one RPC: when it
// began on the ready channel, when the request message was handed to the
// transport, and when the first response frame (headers, or the trailers
// of a trailers-only answer) was read. The last comes from the transport's
// reader goroutine as it parses the frame, hence the mutex.
type rpcTrace struct {
	mu                 sync.Mutex
	begin, sent, first time.Time
}

// phases sets write (begin → request sent) and first_byte (request sent
// → first response frame) from what happened.
func (t *rpcTrace) phases(p *Phases) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.Write, p.HasWrite = span(t.begin, t.sent)
	p.FirstByte, p.HasFirstByte = span(t.sent, t.first)
}

// rpcStats feeds the rpcTrace found in an RPC's context; other RPCs (the
// readiness check) carry none and cost a context lookup.
type rpcStats struct{}

func (rpcStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (rpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (rpcStats) HandleConn(context.Context, stats.ConnStats) {}

func (rpcStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	t, _ := ctx.Value(rpcTraceKey{}).(*rpcTrace)
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	first := func(dst *time.Time, at time.Time) {
		if dst.IsZero() || at.Before(*dst) {
			*dst = at
		}
	}
	switch s := s.(type) {
	case *stats.Begin:
		first(&t.begin, s.BeginTime)
	case *stats.OutPayload:
		// The first message is the request; the stream sends no other.
		if t.sent.IsZero() {
			t.sent = s.SentTime
		}
	case *stats.InHeader, *stats.InTrailer:
		first(&t.first, now)
	case *stats.InPayload:
		first(&t.first, s.RecvTime)
	}
}
