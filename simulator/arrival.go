package simulator

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Arrival: when a request reached the server, as opposed to when the
// client wrote it. A prober's burst spread is taken at its writes; what a
// server sees is the spread of its reads, which is later by the loopback
// transfer, the server's own wake-ups and (on a shared machine) the
// prober's CPU. Two instants are kept per request, both from the
// monotonic clock (so a spread within the simulator is never skewed by a
// wall-clock step) and anchored at the server's start so they can be
// compared with the other Unix-nanosecond times of a record:
//
//   - first byte: the first read on the connection that returned bytes of
//     this request (arrivalConn). With a request small enough for one
//     segment this is when the whole request was in the server's hands;
//   - headers: when net/http had parsed the head and called the handler.
//
// A request's body is read later still (ReceivedUnixNano).

// arrivalConn is every HTTP connection the simulator accepts. It is armed
// while idle (new, or between requests) and records the first read that
// returns data; the handler takes that time for its request and leaves
// the connection disarmed until net/http reports it idle again, so the
// reads of a body or a pipelined next request never stand in for a first
// byte.
type arrivalConn struct {
	net.Conn
	epoch time.Time
	armed atomic.Bool
	// first is the monotonic time since epoch of the armed read, +1 so
	// that 0 means none (a read at the epoch itself stays distinguishable).
	first atomic.Int64
}

func (c *arrivalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.CompareAndSwap(true, false) {
		c.first.Store(int64(time.Since(c.epoch)) + 1)
	}
	return n, err
}

// SetLinger reaches the TCP connection underneath, for the reset fault
// (gen.go), which must send an RST rather than a FIN.
func (c *arrivalConn) SetLinger(sec int) error {
	if tcp, ok := c.Conn.(*net.TCPConn); ok {
		return tcp.SetLinger(sec)
	}
	return nil
}

// rearm is called when the connection turns idle: the next bytes read are
// the next request's first.
func (c *arrivalConn) rearm() {
	c.first.Store(0)
	c.armed.Store(true)
}

// take returns the first-byte time of the current request and clears it;
// false when none was recorded (the request's bytes were read while
// disarmed, e.g. pipelined behind the previous one).
func (c *arrivalConn) take() (time.Duration, bool) {
	c.armed.Store(false)
	v := c.first.Swap(0)
	return time.Duration(v - 1), v != 0
}

// arrivalListener wraps every accepted connection in an armed arrivalConn.
type arrivalListener struct {
	net.Listener
	epoch time.Time
}

func (l *arrivalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ac := &arrivalConn{Conn: c, epoch: l.epoch}
	ac.armed.Store(true)
	return ac, nil
}

// arrivalConnState re-arms a connection whenever net/http reports it idle
// (after a response, before the next request is read).
func arrivalConnState(c net.Conn, st http.ConnState) {
	if ac, ok := c.(*arrivalConn); ok && st == http.StateIdle {
		ac.rearm()
	}
}

type arrivalConnKey struct{}

type arrivalKey struct{}

// arrival is one request's two instants, Unix nanoseconds on the server's
// monotonic clock; firstByte is 0 when unknown (a handler served without
// the simulator's listener, as in tests through Handler).
type arrival struct{ firstByte, headers int64 }

// monoUnixNano converts a monotonic offset from the server's start into
// Unix nanoseconds: the start's wall time plus the elapsed monotonic time.
func (s *Server) monoUnixNano(since time.Duration) int64 {
	return s.started.UnixNano() + int64(since)
}

// stampArrival records, at the handler's entry, the request's arrival in
// its context.
func (s *Server) stampArrival(r *http.Request) *http.Request {
	a := arrival{headers: s.monoUnixNano(time.Since(s.started))}
	if ac, ok := r.Context().Value(arrivalConnKey{}).(*arrivalConn); ok {
		if d, ok := ac.take(); ok {
			a.firstByte = s.monoUnixNano(d)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), arrivalKey{}, a))
}

// withArrival fills rec's arrival times from ctx.
func withArrival(ctx context.Context, rec RequestRecord) RequestRecord {
	if a, ok := ctx.Value(arrivalKey{}).(arrival); ok {
		rec.FirstByteUnixNano, rec.HeadersUnixNano = a.firstByte, a.headers
	}
	return rec
}
