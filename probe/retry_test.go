package probe

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// connServer is a raw HTTP/1.1 server whose every accepted connection is
// handled by the next function of a script, so a test decides exactly
// when a connection answers, breaks or is reset.
type connServer struct {
	l net.Listener

	mu     sync.Mutex
	script []func(net.Conn, *bufio.Reader)
	conns  int
}

func newConnServer(t *testing.T, script ...func(net.Conn, *bufio.Reader)) *connServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &connServer{l: l, script: script}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			i := s.conns
			s.conns++
			s.mu.Unlock()
			if i >= len(s.script) {
				c.Close()
				continue
			}
			wg.Go(func() {
				defer c.Close()
				s.script[i](c, bufio.NewReader(c))
			})
		}
	})
	return s
}

func (s *connServer) url() string { return "http://" + s.l.Addr().String() }

func (s *connServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// nextRequest reads one request whole from a kept-alive connection's
// reader; false when the client went away.
func nextRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err == nil
}

// answer writes a streamed chat answer with a keep-alive head; with
// breakAfterFirst it stops after the first chunk.
func answer(c net.Conn, breakAfterFirst bool) {
	w := bufio.NewWriter(c)
	fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	events := []string{chatDelta("a"), chatDelta("b"), chatFinish("length"), usageChunk(3, 2)}
	for i, e := range events {
		data := "data: " + e + "\n\n"
		fmt.Fprintf(w, "%x\r\n%s\r\n", len(data), data)
		if breakAfterFirst && i == 0 {
			w.Flush()
			return
		}
	}
	done := "data: [DONE]\n\n"
	fmt.Fprintf(w, "%x\r\n%s\r\n0\r\n\r\n", len(done), done)
	w.Flush()
}

// reset closes c with a TCP reset, as a server does that closed a socket
// with unread data in it.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// Script steps.
var (
	// serveThenDrop answers one request with a keep-alive head, then, once
	// the client has written its next request on the same connection,
	// resets it: llama.cpp's server closing after a stream, with the race
	// always lost.
	serveThenDrop = func(c net.Conn, br *bufio.Reader) {
		if !nextRequest(br) {
			return
		}
		answer(c, false)
		nextRequest(br)
		reset(c)
	}
	serveAll = func(c net.Conn, br *bufio.Reader) {
		for nextRequest(br) {
			answer(c, false)
		}
	}
	resetAtOnce = func(c net.Conn, br *bufio.Reader) {
		nextRequest(br)
		reset(c)
	}
	// serveThenBreak answers one request, then answers the next with one
	// chunk and resets.
	serveThenBreak = func(c net.Conn, br *bufio.Reader) {
		if !nextRequest(br) {
			return
		}
		answer(c, false)
		if !nextRequest(br) {
			return
		}
		answer(c, true)
		reset(c)
	}
)

func TestStaleConnectionRetriedOnce(t *testing.T) {
	srv := newConnServer(t, serveThenDrop, serveAll)
	d, _ := newDriver(t, ProtocolOpenAIChat, srv.url(), nil)
	first := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, first, OutcomeSuccess, "")
	if first.Retry != nil {
		t.Fatalf("first probe on a new connection retried: %+v", first.Retry)
	}
	before := time.Now()
	second := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, second, OutcomeSuccess, "")
	if second.Retry == nil || second.Retry.Reason != RetryReset || second.Retry.Err == nil {
		t.Fatalf("retry = %+v, want reason %s with the first attempt's error", second.Retry, RetryReset)
	}
	// The measured attempt is the retry: a new connection, timed from its
	// own start.
	if second.Phases.ConnectionReused || !second.Phases.HasConnect {
		t.Errorf("phases %+v: want the retry's new connection", second.Phases)
	}
	if !second.Start.After(before) || second.TTFT <= 0 || second.OutputTokens != 2 {
		t.Errorf("start %v (probe began %v), ttft %v, tokens %d", second.Start, before, second.TTFT, second.OutputTokens)
	}
	if n := srv.connections(); n != 2 {
		t.Errorf("%d connections, want 2 (the pooled one and the retry's)", n)
	}
}

func TestResetOfANewConnectionIsNotRetried(t *testing.T) {
	srv := newConnServer(t, resetAtOnce, serveAll)
	d, _ := newDriver(t, ProtocolOpenAIChat, srv.url(), nil)
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeIncomplete, "")
	if r.Retry != nil || srv.connections() != 1 {
		t.Errorf("retry %+v over %d connections: a fresh connection's failure is the server's", r.Retry, srv.connections())
	}
}

func TestFailedRetryStaysAFailure(t *testing.T) {
	srv := newConnServer(t, serveThenDrop, resetAtOnce, serveAll)
	d, _ := newDriver(t, ProtocolOpenAIChat, srv.url(), nil)
	wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeIncomplete, "")
	if r.Retry == nil {
		t.Error("the failed retry does not say that it was one")
	}
	if n := srv.connections(); n != 2 {
		t.Errorf("%d connections, want 2: one retry only", n)
	}
}

func TestBreakAfterAnswerBytesIsNotRetried(t *testing.T) {
	srv := newConnServer(t, serveThenBreak, serveAll)
	d, _ := newDriver(t, ProtocolOpenAIChat, srv.url(), nil)
	wantOutcome(t, probeOnce(t, d, streamReq(), 5*time.Second), OutcomeSuccess, "")
	r := probeOnce(t, d, streamReq(), 5*time.Second)
	wantOutcome(t, r, OutcomeIncomplete, "")
	if r.Retry != nil || srv.connections() != 1 {
		t.Errorf("retry %+v over %d connections: the server had begun answering", r.Retry, srv.connections())
	}
	if r.TTFT <= 0 {
		t.Error("the chunk that arrived before the break was not recorded")
	}
}
