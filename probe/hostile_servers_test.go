package probe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/internal/tritonpb"
)

// Hostile servers, one test each: every probe must end in the right outcome
// within its timeout and with bounded memory. Cases covered elsewhere:
//   - a first byte that never comes after the request was read:
//     TestOutcomes "deadline before head" (timeout) and "stall before first
//     byte of body" (stream_stalled);
//   - endless streams (content, comments, slow keep-alives), a 100 MB line,
//     JSON bombs: TestHostileInputs, TestHostileNonStreamBomb;
//   - a redirect not followed by default: TestOutcomes "redirect not
//     followed";
//   - TLS with a wrong CA and DNS failure over HTTP: TestTLS "wrong CA",
//     TestConnectErrors "dns".

// rawServer accepts TCP connections and hands each to serve; it stops with
// the test.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + l.Addr().String()
}

// readRequest consumes one HTTP request from c.
func readRequest(c net.Conn) (*http.Request, bool) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return nil, false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return req, true
}

// hostileRun probes once and reports the result, the wall time and the
// bytes allocated meanwhile.
func hostileRun(t *testing.T, d Driver, req *Request, timeout time.Duration) (*Result, time.Duration, uint64) {
	t.Helper()
	var r *Result
	start := time.Now()
	alloc := allocatedDuring(func() { r = probeOnce(t, d, req, timeout) })
	took := time.Since(start)
	t.Logf("%s after %s (timeout %s), allocated %.1f MiB: %v", r.Outcome, took.Round(time.Millisecond), timeout, float64(alloc)/(1<<20), r.Err)
	return r, took, alloc
}

// Generous bounds for a loaded 2-core machine under -race: the point is
// that nothing waits for the server forever nor grows with what it sends.
const (
	hostileSlack    = 10 * time.Second
	hostileMaxAlloc = 16 << 20
)

func checkBounded(t *testing.T, took, timeout time.Duration, alloc uint64) {
	t.Helper()
	if took > timeout+hostileSlack {
		t.Errorf("took %s with a %s timeout", took, timeout)
	}
	if alloc > hostileMaxAlloc {
		t.Errorf("allocated %d MiB, want ≤ %d MiB", alloc>>20, hostileMaxAlloc>>20)
	}
}

func TestHostileHeadersNeverFinish(t *testing.T) {
	t.Run("slow trickle", func(t *testing.T) {
		// A status line, then one header line every 50ms, never the blank
		// line: only the probe deadline ends it.
		url := rawServer(t, func(c net.Conn) {
			if _, ok := readRequest(c); !ok {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(c, "X-Slow-%d: x\r\n", i); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		d, _ := newDriver(t, ProtocolOpenAIChat, url, nil)
		timeout := 700 * time.Millisecond
		r, took, alloc := hostileRun(t, d, streamReq(), timeout)
		wantOutcome(t, r, OutcomeTimeout, "waiting for the response head")
		checkBounded(t, took, timeout, alloc)
	})
	t.Run("endless flood", func(t *testing.T) {
		// Header lines as fast as the socket takes them: the 64 KiB head
		// bound ends it long before the deadline.
		line := []byte("X-Flood: " + strings.Repeat("f", 1000) + "\r\n")
		url := rawServer(t, func(c net.Conn) {
			if _, ok := readRequest(c); !ok {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for {
				if _, err := c.Write(line); err != nil {
					return
				}
			}
		})
		d, _ := newDriver(t, ProtocolOpenAIChat, url, nil)
		timeout := 30 * time.Second
		r, took, alloc := hostileRun(t, d, streamReq(), timeout)
		wantOutcome(t, r, OutcomeProtocolError, "response headers exceed the maximum header size")
		checkBounded(t, took, timeout, alloc)
		if took > 15*time.Second {
			t.Errorf("the header bound should end it at once, took %s", took)
		}
	})
}

func TestHostileFirstByteNeverComes(t *testing.T) {
	// The kernel completes the handshake but the server never accepts, so
	// the request sits in socket buffers and nothing ever comes back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, protocol := range []string{ProtocolOpenAIChat, ProtocolTGI, ProtocolOllama, ProtocolTritonGenerate} {
		t.Run(protocol, func(t *testing.T) {
			d, _ := newDriver(t, protocol, "http://"+l.Addr().String(), nil)
			timeout := 500 * time.Millisecond
			r, took, alloc := hostileRun(t, d, streamReq(), timeout)
			wantOutcome(t, r, OutcomeTimeout, "deadline")
			checkBounded(t, took, timeout, alloc)
		})
	}
}

// bigBody writes n bytes of filler (prefix, then repeats of chunk) and
// then tail, flushing as it goes; contentLength, when set, is declared.
func bigBody(contentType, contentLength string, chunk []byte, n int64, tail string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		if contentLength != "" {
			w.Header().Set("Content-Length", contentLength)
		}
		for sent := int64(0); sent < n; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, tail)
	}
}

func TestHostileOneGigabyteBody(t *testing.T) {
	const gib = 1 << 30
	t.Run("stream read through, never held", func(t *testing.T) {
		if testing.Short() {
			t.Skip("streams 1 GiB over loopback")
		}
		// 1 GiB of SSE comments, then a real answer: with the limit raised
		// above it, the probe reads it all and succeeds with memory that
		// does not depend on the size.
		comment := []byte(": " + strings.Repeat("z", 64<<10-3) + "\n")
		ts := startServer(t, bigBody("text/event-stream", "", comment, gib,
			"data: "+chatDelta("ok")+"\n\ndata: "+chatFinish("stop")+"\n\ndata: [DONE]\n\n"))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.MaxResponseBytes = 2 * gib })
		timeout := 3 * time.Minute
		r, took, alloc := hostileRun(t, d, streamReq(), timeout)
		wantOutcome(t, r, OutcomeSuccess, "")
		checkBounded(t, took, timeout, alloc)
	})
	t.Run("stream over the default limit", func(t *testing.T) {
		chunk := []byte("data: " + chatDelta(strings.Repeat("t", 200)) + "\n\n")
		ts := startServer(t, bigBody("text/event-stream", "", chunk, gib, ""))
		d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
		timeout := time.Minute
		r, took, alloc := hostileRun(t, d, streamReq(), timeout)
		wantOutcome(t, r, OutcomeProtocolError, "maximum response size")
		// Every content chunk is a recorded token time; 64 MiB of them is
		// a quarter of a million entries. What matters: the limit, not the
		// gigabyte, bounds it.
		if took > timeout+hostileSlack || alloc > 192<<20 {
			t.Errorf("took %s, allocated %d MiB", took, alloc>>20)
		}
	})
	t.Run("declared Content-Length refused before reading", func(t *testing.T) {
		for _, protocol := range []string{ProtocolOpenAIChat, ProtocolTGI, ProtocolOllama, ProtocolTritonGenerate} {
			t.Run(protocol, func(t *testing.T) {
				var written atomic.Int64
				ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", fmt.Sprint(gib))
					buf := make([]byte, 64<<10)
					for written.Load() < gib {
						n, err := w.Write(buf)
						written.Add(int64(n))
						if err != nil {
							return
						}
					}
				}))
				d, _ := newDriver(t, protocol, ts.URL, nil)
				timeout := 30 * time.Second
				r, took, alloc := hostileRun(t, d, &Request{Prompt: "x", MaxTokens: 4}, timeout)
				wantOutcome(t, r, OutcomeProtocolError, "Content-Length 1073741824")
				checkBounded(t, took, timeout, alloc)
			})
		}
	})
}

// gzipBomb is a small gzip stream that expands to n bytes of SSE events:
// one compressed 1 MiB member repeated (concatenated gzip members decode
// as the concatenation of their contents).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	line := []byte("data: " + chatDelta("a") + "\n\n")
	for written := 0; written < 1<<20; written += len(line) {
		_, _ = zw.Write(line)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(member.Bytes(), n>>20)
}

func TestHostileGzipBomb(t *testing.T) {
	bomb := gzipBomb(t, 256<<20) // 256 MiB of events in well under 1 MiB
	t.Logf("gzip bomb: %d KiB expanding to 256 MiB", len(bomb)>>10)
	var acceptEncoding atomic.Value
	handler := func(contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			acceptEncoding.Store(r.Header.Get("Accept-Encoding"))
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb)
		}
	}
	cases := []struct {
		protocol, contentType string
		stream                bool
	}{
		{ProtocolOpenAIChat, "text/event-stream", true},
		{ProtocolOpenAIChat, "application/json", false},
		{ProtocolTGI, "text/event-stream", true},
		{ProtocolOllama, "application/x-ndjson", true},
		{ProtocolTritonGenerate, "text/event-stream", true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s stream=%v", c.protocol, c.stream), func(t *testing.T) {
			ts := startServer(t, handler(c.contentType))
			d, _ := newDriver(t, c.protocol, ts.URL, nil)
			timeout := 30 * time.Second
			r, took, alloc := hostileRun(t, d, &Request{Prompt: "x", MaxTokens: 4, Stream: c.stream}, timeout)
			wantOutcome(t, r, OutcomeProtocolError, `Content-Encoding "gzip"`)
			checkBounded(t, took, timeout, alloc)
			if got := acceptEncoding.Load(); got != "identity" {
				t.Errorf("Accept-Encoding %q, want identity", got)
			}
		})
	}
}

func TestHostileRedirects(t *testing.T) {
	final := startServer(t, sseHandler(ev(chatDelta("a")), ev(chatFinish("stop")), ev("[DONE]")))
	var authAtOtherHost atomic.Value
	// Another host name for the same loopback server: net/http must not
	// carry the API key there.
	other := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authAtOtherHost.Store(r.Header.Get("Authorization"))
		sseHandler(ev(chatDelta("a")), ev(chatFinish("stop")), ev("[DONE]"))(w, r)
	}))
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	redirectTo := func(code int, to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Redirect(w, r, to+r.URL.Path, code)
		}
	}
	// A redirect to itself, forever.
	loop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, "http://"+r.Host+r.URL.Path, http.StatusTemporaryRedirect)
	})
	follow := func(o *TargetOptions) { o.FollowRedirects = true; o.BearerToken = "sk-redirect-secret" }
	cases := []struct {
		name     string
		handler  http.Handler
		mod      func(*TargetOptions)
		want     Outcome
		contains string
	}{
		{"307 not followed by default", redirectTo(http.StatusTemporaryRedirect, final.URL), nil, OutcomeProtocolError, "redirects are not followed"},
		{"307 followed with follow_redirects", redirectTo(http.StatusTemporaryRedirect, final.URL), follow, OutcomeSuccess, ""},
		{"308 to another host drops the API key", redirectTo(http.StatusPermanentRedirect, otherURL), follow, OutcomeSuccess, ""},
		{"redirect loop stops", loop, follow, OutcomeProtocolError, "stopped after 5 redirects"},
		{"redirect to another scheme refused", redirectTo(http.StatusTemporaryRedirect, "ftp://example.invalid"), follow, OutcomeProtocolError, `redirect to scheme "ftp"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, c.handler)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, c.mod)
			r, took, alloc := hostileRun(t, d, streamReq(), 20*time.Second)
			wantOutcome(t, r, c.want, c.contains)
			checkBounded(t, took, 20*time.Second, alloc)
		})
	}
	if got, _ := authAtOtherHost.Load().(string); got != "" {
		t.Errorf("API key sent to the redirect's other host: %q", got)
	}
}

// hugeTriton is a Triton gRPC server that is ready and answers every
// inference with a message of size bytes, encoded once up front (see
// preEncodedCodec) so that the test's allocation count is the client's.
type hugeTriton struct {
	tritonpb.UnimplementedGRPCInferenceServiceServer
	size int

	once           sync.Once
	unary          *tritonpb.ModelInferResponse
	unaryBytes     []byte
	streamResponse preEncoded
}

// preEncoded is a message already in wire form.
type preEncoded []byte

func (h *hugeTriton) init() {
	h.once.Do(func() {
		h.unary = h.response()
		h.unaryBytes, _ = proto.Marshal(h.unary)
		b, _ := proto.Marshal(&tritonpb.ModelStreamInferResponse{InferResponse: h.response()})
		h.streamResponse = b
	})
}

// preEncodedCodec is the server's proto codec, except that the big answers
// go out as the bytes encoded in init.
type preEncodedCodec struct{ h *hugeTriton }

func (c preEncodedCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case preEncoded:
		return m, nil
	case *tritonpb.ModelInferResponse:
		if m == c.h.unary {
			return c.h.unaryBytes, nil
		}
	}
	return proto.Marshal(v.(proto.Message))
}

func (c preEncodedCodec) Unmarshal(data []byte, v any) error {
	return proto.Unmarshal(data, v.(proto.Message))
}

func (preEncodedCodec) Name() string { return "proto" }

func (h *hugeTriton) ServerReady(context.Context, *tritonpb.ServerReadyRequest) (*tritonpb.ServerReadyResponse, error) {
	return &tritonpb.ServerReadyResponse{Ready: true}, nil
}

func (h *hugeTriton) ModelReady(context.Context, *tritonpb.ModelReadyRequest) (*tritonpb.ModelReadyResponse, error) {
	return &tritonpb.ModelReadyResponse{Ready: true}, nil
}

func (h *hugeTriton) response() *tritonpb.ModelInferResponse {
	return &tritonpb.ModelInferResponse{
		Outputs:           []*tritonpb.ModelInferResponse_InferOutputTensor{{Name: "text_output", Datatype: "BYTES", Shape: []int64{1, 1}}},
		RawOutputContents: [][]byte{make([]byte, h.size)},
	}
}

func (h *hugeTriton) ModelInfer(context.Context, *tritonpb.ModelInferRequest) (*tritonpb.ModelInferResponse, error) {
	return h.unary, nil
}

func (h *hugeTriton) ModelStreamInfer(s grpc.BidiStreamingServer[tritonpb.ModelInferRequest, tritonpb.ModelStreamInferResponse]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return s.SendMsg(h.streamResponse)
}

func startGRPC(t *testing.T, srv *hugeTriton, opts ...grpc.ServerOption) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.init()
	// The server itself may send anything up to 64 MiB.
	s := grpc.NewServer(append(opts, grpc.MaxSendMsgSize(64<<20), grpc.ForceServerCodec(preEncodedCodec{srv}))...)
	tritonpb.RegisterGRPCInferenceServiceServer(s, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func TestHostileGRPC(t *testing.T) {
	grpcDriver := func(t *testing.T, addr string, mod func(*TargetOptions)) Driver {
		t.Helper()
		opts := TargetOptions{Name: "grpc", Address: addr, Model: "m", ConnectTimeout: 2 * time.Second}
		if mod != nil {
			mod(&opts)
		}
		d, err := NewDriver(ProtocolTritonGRPC, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	t.Run("oversized message", func(t *testing.T) {
		// 20 MiB against the 16 MiB default, and 2 MiB against a 1 MiB
		// max_message_bytes; streaming and unary.
		for _, c := range []struct {
			size, limit int
			stream      bool
		}{{20 << 20, 0, true}, {20 << 20, 0, false}, {2 << 20, 1 << 20, true}} {
			t.Run(fmt.Sprintf("%d MiB limit %d stream %v", c.size>>20, c.limit, c.stream), func(t *testing.T) {
				addr := startGRPC(t, &hugeTriton{size: c.size})
				d := grpcDriver(t, addr, func(o *TargetOptions) { o.Triton.MaxMessageBytes = c.limit })
				timeout := 20 * time.Second
				r, took, alloc := hostileRun(t, d, &Request{Prompt: "x", MaxTokens: 4, Stream: c.stream}, timeout)
				wantOutcome(t, r, OutcomeProtocolError, "max_message_bytes")
				// grpc-go reads a message's length prefix and refuses it
				// without allocating its size.
				checkBounded(t, took, timeout, alloc)
				if alloc > uint64(c.size)/2 {
					t.Errorf("allocated %d KiB for a refused %d MiB message", alloc>>10, c.size>>20)
				}
			})
		}
	})
	t.Run("TLS with a wrong CA", func(t *testing.T) {
		cert := testutil.SelfSignedCert(t).Cert
		addr := startGRPC(t, &hugeTriton{size: 10}, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
		d := grpcDriver(t, addr, func(o *TargetOptions) { o.TLS.CAFile = writeCertPEM(t, otherCA(t)) })
		r, took, alloc := hostileRun(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "")
		checkBounded(t, took, 10*time.Second, alloc)
	})
	t.Run("DNS failure", func(t *testing.T) {
		d := grpcDriver(t, "no-such-host.invalid:8001", nil)
		r, took, alloc := hostileRun(t, d, streamReq(), 10*time.Second)
		wantOutcome(t, r, OutcomeConnectError, "no-such-host.invalid")
		checkBounded(t, took, 10*time.Second, alloc)
	})
}
