package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"sync"
	"time"
)

// A release holds a request back until a planned instant: the requests of
// a burst are prepared ahead of it (body built, connection made) and
// written together when the scheduler closes the channel (schedule.Ticket
// Release). Drivers find it in the probe's context.

type releaseKey struct{}

// WithRelease returns ctx carrying release: a driver given this context
// prepares the request (builds it, gets its connection: a pooled or newly
// dialed HTTP/1.x connection, a READY gRPC channel) and writes it only
// once release is closed. Result.Start is then taken at the release, just
// before the write, so TTFT keeps its definition; connection setup done
// while preparing is still reported in the phases, before Start. Targets
// with new_connection_per_probe prepare only the request: their TTFT is
// to include connection setup, so they connect after the release. A nil
// release leaves ctx as it is.
func WithRelease(ctx context.Context, release <-chan struct{}) context.Context {
	if release == nil {
		return ctx
	}
	return context.WithValue(ctx, releaseKey{}, release)
}

// releaseOf returns the release ctx carries, or nil; nil also when it is
// already closed, since the request may then go at once.
func releaseOf(ctx context.Context) <-chan struct{} {
	rel, _ := ctx.Value(releaseKey{}).(<-chan struct{})
	if rel == nil {
		return nil
	}
	select {
	case <-rel:
		return nil
	default:
		return rel
	}
}

// waitRelease blocks until release is closed (true) or ctx ends (false).
func waitRelease(ctx context.Context, release <-chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-ctx.Done():
		// Both may be ready; a release that came counts.
		select {
		case <-release:
			return true
		default:
			return false
		}
	}
}

// errReleaseAbandoned ends a held HTTP/1.x write whose request ended
// before its release; nothing of the request was written.
var errReleaseAbandoned = errors.New("request ended before its release")

// gateConn is every connection the HTTP drivers dial. A request held for
// a release arms the connection it got (httptrace GotConn, in the
// request's goroutine, before net/http hands the request to the
// connection's writer): the next Write then waits for the release and
// records the moment it passes, immediately before the first byte goes
// out. Everything else net/http does for the request (serialising the
// head and body into its buffer) is done by then. Unarmed connections
// write straight through.
type gateConn struct {
	net.Conn
	mu     sync.Mutex
	gate   *writeGate
	closed chan struct{}
	once   sync.Once
}

// writeGate is one armed request: its release, its context's end, and
// where to record when the write was let through. Without a release the
// write only records its start (stampWrites).
type writeGate struct {
	release <-chan struct{}
	done    <-chan struct{}
	trace   *traceRecorder
}

func newGateConn(c net.Conn) *gateConn { return &gateConn{Conn: c, closed: make(chan struct{})} }

func (c *gateConn) arm(g *writeGate) {
	c.mu.Lock()
	c.gate = g
	c.mu.Unlock()
}

func (c *gateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	g := c.gate
	c.gate = nil
	c.mu.Unlock()
	if g != nil {
		if g.release != nil {
			select {
			case <-g.release:
			case <-g.done:
				return 0, errReleaseAbandoned
			case <-c.closed:
				return 0, net.ErrClosed
			}
		}
		g.trace.set(&g.trace.start)
	}
	return c.Conn.Write(p)
}

func (c *gateConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// dialGated wraps a dial function so that every connection is a gateConn.
func dialGated(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newGateConn(c), nil
	}
}

// heldConn returns the gateConn under conn when the request will be
// written on it alone (HTTP/1.x, over TLS or not); nil for HTTP/2, whose
// connection is shared by concurrent requests, and for anything else.
func heldConn(conn net.Conn) *gateConn {
	if tc, ok := conn.(*tls.Conn); ok {
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return nil
		}
		conn = tc.NetConn()
	}
	gc, _ := conn.(*gateConn)
	return gc
}

// holdHooks adds to ct what holds a request for release. With preconnect
// the request is held at GotConn: an HTTP/1.x connection is armed (the
// write waits), any other (HTTP/2) is held right there, before net/http
// writes anything. Without it (new_connection_per_probe) the request is
// held at GetConn, before a connection is looked for, so that connection
// setup stays inside TTFT. tr.start records when it was let through.
func (tr *traceRecorder) holdHooks(ctx context.Context, ct *httptrace.ClientTrace, release <-chan struct{}, preconnect bool) {
	wait := func() {
		if waitRelease(ctx, release) {
			tr.set(&tr.start)
		}
	}
	if !preconnect {
		ct.GetConn = func(string) { wait() }
		return
	}
	gotConn := ct.GotConn
	ct.GotConn = func(i httptrace.GotConnInfo) {
		gotConn(i)
		if gc := heldConn(i.Conn); gc != nil {
			gc.arm(&writeGate{release: release, done: ctx.Done(), trace: tr})
			return
		}
		wait()
	}
}

// stampWrites adds to ct what starts a request that is not held at its
// write, as a held one starts: on a pooled HTTP/1.x connection, Start is
// taken immediately before the first byte goes out, so that net/http's
// work between Do and the write (the pool, handing the request to the
// connection's writer goroutine and that goroutine waking up, the head
// serialised) is not in TTFT. Under load that wake-up was most of the
// client's share of TTFT. A new connection keeps Start before Do, so that
// connection setup stays inside TTFT; HTTP/2 shares its connection's
// writes among requests and keeps it there too.
func (tr *traceRecorder) stampWrites(ct *httptrace.ClientTrace) {
	gotConn := ct.GotConn
	ct.GotConn = func(i httptrace.GotConnInfo) {
		gotConn(i)
		if !i.Reused {
			return
		}
		if gc := heldConn(i.Conn); gc != nil {
			gc.arm(&writeGate{trace: tr})
		}
	}
}

// released reports whether the held request was let through, and when.
func (tr *traceRecorder) released() (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.start, !tr.start.IsZero()
}

func (tr *traceRecorder) wasReleased() bool {
	_, ok := tr.released()
	return ok
}
