package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// arrivals is a test server's record of its connections and of when each
// request arrived, with the HTTP version it came in.
type arrivals struct {
	mu     sync.Mutex
	conns  int
	at     []time.Time
	protos []int
}

func (a *arrivals) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		a.mu.Lock()
		a.conns++
		a.mu.Unlock()
	}
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.protos = append(a.protos, r.ProtoMajor)
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (a *arrivals) get() (conns int, at []time.Time, protos []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns, append([]time.Time(nil), a.at...), append([]int(nil), a.protos...)
}

// probeHeld starts n probes of d held for release and returns their
// results as they end.
func probeHeld(d Driver, n int, release <-chan struct{}, timeout time.Duration) <-chan *Result {
	out := make(chan *Result, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(WithRelease(context.Background(), release), timeout)
			defer cancel()
			out <- d.Probe(ctx, &Request{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 2, Stream: true})
		}()
	}
	return out
}

// TestReleaseHoldsHTTPRequests: held requests are built and their
// connections made before the release, nothing of them reaches the server
// until it, and Start is at the release, with the hold outside every phase.
func TestReleaseHoldsHTTPRequests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tls, h2  bool
		perProbe bool
		// conns is how many connections the server has before the
		// release: one per request, none, or for HTTP/2 at least one
		// (requests that start together before any connection exists
		// each dial: net/http learns it speaks HTTP/2 only after the
		// handshake).
		conns    int
		someOnly bool
	}{
		{name: "http1", conns: 4},
		{name: "http1-tls", tls: true, conns: 4},
		{name: "h2", tls: true, h2: true, conns: 1, someOnly: true},
		{name: "new-connection-per-probe", perProbe: true, conns: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			a := &arrivals{}
			ts := httptest.NewUnstartedServer(a.wrap(chatStream()))
			ts.Config.ConnState = a.connState
			if tc.tls {
				ts.EnableHTTP2 = tc.h2
				ts.StartTLS()
			} else {
				ts.Start()
			}
			t.Cleanup(ts.Close)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) {
				o.NewConnectionPerProbe = tc.perProbe
				if tc.tls {
					o.TLS.CA = caPEM(ts)
				}
			})

			release := make(chan struct{})
			results := probeHeld(d, n, release, 10*time.Second)
			if tc.conns > 0 {
				testutil.WaitFor(t, "connections made before the release", 5*time.Second, func() bool {
					c, _, _ := a.get()
					return c >= tc.conns
				})
			}
			time.Sleep(50 * time.Millisecond)
			conns, at, _ := a.get()
			if (conns != tc.conns && !tc.someOnly) || conns < tc.conns || len(at) != 0 {
				t.Fatalf("before the release: %d connections (want %d), %d requests arrived (want none)", conns, tc.conns, len(at))
			}
			released := time.Now()
			close(release)
			for range n {
				r := <-results
				wantOutcome(t, r, OutcomeSuccess, "")
				if r.Start.Before(released) {
					t.Errorf("Start %v before the release", released.Sub(r.Start))
				}
				if r.Phases.Write > 40*time.Millisecond {
					t.Errorf("write phase %v includes the hold", r.Phases.Write)
				}
				if tc.perProbe && !r.Phases.HasConnect {
					t.Error("new_connection_per_probe: no connect phase after the release")
				}
			}
			_, at, protos := a.get()
			for i, x := range at {
				if x.Before(released) {
					t.Errorf("request %d arrived %v before the release", i, released.Sub(x))
				}
				if want := map[bool]int{false: 1, true: 2}[tc.h2]; protos[i] != want {
					t.Errorf("request %d over HTTP/%d, want %d", i, protos[i], want)
				}
			}
		})
	}
}

// TestReleaseAbandoned: a held request whose probe ends before the
// release writes nothing and ends as a timeout.
func TestReleaseAbandoned(t *testing.T) {
	a := &arrivals{}
	ts := httptest.NewUnstartedServer(a.wrap(chatStream()))
	ts.Config.ConnState = a.connState
	ts.Start()
	t.Cleanup(ts.Close)
	d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)
	release := make(chan struct{})
	defer close(release)
	r := <-probeHeld(d, 1, release, 200*time.Millisecond)
	wantOutcome(t, r, OutcomeTimeout, "")
	time.Sleep(20 * time.Millisecond)
	if conns, at, _ := a.get(); conns != 1 || len(at) != 0 {
		t.Errorf("%d connections, %d requests arrived; want the connection made and nothing written", conns, len(at))
	}
}

// TestReleaseAfterFailedPreparation: a request that could not get a
// connection before its release is sent at the release as any other, and
// its failure is measured from there.
func TestReleaseAfterFailedPreparation(t *testing.T) {
	l := testutil.Listen(t)
	url := "http://" + l.Addr().String()
	l.Close()
	d, _ := newDriver(t, ProtocolOpenAIChat, url, nil)
	release := make(chan struct{})
	results := probeHeld(d, 1, release, 5*time.Second)
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-results:
		t.Fatalf("ended before the release: %s %v", r.Outcome, r.Err)
	default:
	}
	released := time.Now()
	close(release)
	r := <-results
	wantOutcome(t, r, OutcomeConnectError, "")
	if r.Start.Before(released) {
		t.Errorf("Start %v before the release", released.Sub(r.Start))
	}
}

// TestReleaseHoldsGRPC: a held triton_grpc request waits for its release
// on a READY channel (pooled) or connects after it (per probe).
func TestReleaseHoldsGRPC(t *testing.T) {
	port, _ := startSimGRPC(t, nil)
	for _, perProbe := range []bool{false, true} {
		t.Run("new_connection_per_probe="+strconv.FormatBool(perProbe), func(t *testing.T) {
			d, _ := newDriver(t, ProtocolTritonGRPC, "", func(o *TargetOptions) {
				o.Address = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
				o.Model = "sim-llm"
				o.NewConnectionPerProbe = perProbe
			})
			// The first probe checks readiness; the held ones follow.
			wantOutcome(t, probeOnce(t, d, &Request{Prompt: "x", MaxTokens: 2, Stream: true}, 10*time.Second), OutcomeSuccess, "")
			release := make(chan struct{})
			results := probeHeld(d, 3, release, 10*time.Second)
			// Unheld, they would be done in ~25 ms.
			time.Sleep(100 * time.Millisecond)
			if len(results) != 0 {
				t.Fatal("a held request ended before its release")
			}
			released := time.Now()
			close(release)
			for range 3 {
				r := <-results
				wantOutcome(t, r, OutcomeSuccess, "")
				if r.Start.Before(released) {
					t.Errorf("Start %v before the release", released.Sub(r.Start))
				}
				if perProbe && !r.Phases.HasConnect {
					t.Error("per-probe channel: no connect phase after the release")
				}
			}
		})
	}
}

// A request gated at its write on a pooled connection: WroteRequest (the
// request buffered) comes before the flush that stamps start. The write
// must still be a phase, ending at start, and first byte count from there.
func TestPhasesOfRequestStampedAfterWroteRequest(t *testing.T) {
	base := time.Now()
	tr := &traceRecorder{
		gotConn: base,
		wrote:   base.Add(10 * time.Microsecond),
		start:   base.Add(50 * time.Microsecond),
		resp:    base.Add(2 * time.Millisecond),
		reused:  true,
	}
	p, gotConn := tr.phases()
	if !gotConn {
		t.Fatal("gotConn = false")
	}
	if !p.HasWrite || p.Write != 0 {
		t.Errorf("write = %v (has %v), want 0 and present", p.Write, p.HasWrite)
	}
	if want := 1950 * time.Microsecond; !p.HasFirstByte || p.FirstByte != want {
		t.Errorf("first byte = %v (has %v), want %v", p.FirstByte, p.HasFirstByte, want)
	}
}
