package simulator

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestArrivalFirstByteAndHeaders writes a request's first byte, waits, and
// then writes the rest: the first byte must be recorded before the wait
// and the head after it, on the first request of a connection and on the
// next one that reuses it.
func TestArrivalFirstByteAndHeaders(t *testing.T) {
	ts := startServer(t, fastConfig())
	addr := ts.url[len("http://"):]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	const hold = 30 * time.Millisecond
	for i, id := range []string{"arrival-1", "arrival-2"} {
		body := `{"model":"sim-llm","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
		req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: %s\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
		if _, err := io.WriteString(c, req[:1]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
		if _, err := io.WriteString(c, req[1:]); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: HTTP %d", i, resp.StatusCode)
		}
		rec := ts.truth(t, id)
		if rec.FirstByteUnixNano == 0 || rec.HeadersUnixNano == 0 {
			t.Fatalf("request %d: arrival not recorded: first byte %d, headers %d", i, rec.FirstByteUnixNano, rec.HeadersUnixNano)
		}
		if gap := time.Duration(rec.HeadersUnixNano - rec.FirstByteUnixNano); gap < hold*9/10 {
			t.Errorf("request %d: first byte to headers %v, want at least the %v the client held the rest back", i, gap, hold)
		}
		// Received is wall clock, the others monotonic from the same
		// start: allow a little clock drift between them.
		if d := time.Duration(rec.ReceivedUnixNano - rec.HeadersUnixNano); d < -5*time.Millisecond {
			t.Errorf("request %d: body read %v before the head was parsed", i, -d)
		}
	}
}

// TestArrivalConnTake: the connection arms, records one first read and
// leaves reads while disarmed (a body, a pipelined request) unrecorded.
func TestArrivalConnTake(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ac := &arrivalConn{Conn: a, epoch: time.Now()}
	if _, ok := ac.take(); ok {
		t.Fatal("a fresh connection reported a first byte")
	}
	ac.rearm()
	go func() { _, _ = b.Write([]byte("xy")) }()
	buf := make([]byte, 1)
	if _, err := ac.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Read(buf); err != nil {
		t.Fatal(err)
	}
	d, ok := ac.take()
	if !ok || d < 0 {
		t.Fatalf("take = %v, %v; want the first read's time", d, ok)
	}
	if _, ok := ac.take(); ok {
		t.Fatal("take twice reported a first byte twice")
	}
	go func() { _, _ = b.Write([]byte("z")) }()
	if _, err := ac.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, ok := ac.take(); ok {
		t.Fatal("a read while disarmed (body, pipelined request) counted as a first byte")
	}
}
