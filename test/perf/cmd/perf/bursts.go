package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/trace"
	"strconv"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/simulator"
)

// Bursts are measured at both ends: where the client wrote each request
// (what llm_probe_burst_spread_seconds records) and where the simulator
// received it (its ground truth: first byte read, head parsed, body
// read). Beside the prober run two raw clients on the same requests, to
// separate what the prober adds from what the machine imposes:
//
//   - barrier: one goroutine per request on a connection dialled before
//     the release, blocked on a channel that the release closes, then
//     one Write: the least any goroutine-per-request client can do;
//   - one writer: a single goroutine writes the prepared requests one
//     after another: no wake-ups at all, only the write system calls.

// Burst clients.
const (
	clientProber    = "prober"
	clientBarrier   = "barrier"
	clientOneWriter = "one writer"
)

// burstRow is the bursts of one client at one period.
type burstRow struct {
	client string
	// conns says whether the server keeps connections (pooled) or closes
	// each after its answer (new).
	conns  string
	period time.Duration
	// bursts counts the measured bursts with a write spread.
	bursts              int
	sent, failed, dials int
	skipped             int64
	// writes is, per burst, first to last write start: for the prober
	// the job's BurstSpread reports (Result.Start, taken immediately
	// before the first byte is written), exactly what
	// llm_probe_burst_spread_seconds records.
	writes []time.Duration
	lags   []time.Duration
	// firstByte, headers and received are the simulator's arrival
	// spreads, per burst whose every request has a record.
	firstByte, headers, received []time.Duration
	missing                      int
}

// burstReq is one request of a burst: which burst (group) and its id.
type burstReq struct {
	group int64
	id    string
}

// bursts runs the prober at each period and both raw clients at the
// first (a floor does not depend on the period: they dial or keep their
// connections the same way at any), in two alternating rounds after an
// unmeasured burst window of the prober.
func (h *harness) bursts(ctx context.Context, n int, conns string) ([]burstRow, error) {
	var rows []burstRow
	for i, p := range h.o.burstPeriods {
		rows = append(rows, burstRow{client: clientProber, conns: conns, period: p})
		if i == 0 {
			rows = append(rows, burstRow{client: clientBarrier, conns: conns, period: p},
				burstRow{client: clientOneWriter, conns: conns, period: p})
		}
	}
	if _, err := h.runProber(ctx, shape{kind: burstEvery, n: n, lead: engine.BurstLead, period: time.Second}, h.o.warmup, false); err != nil {
		return nil, err
	}
	const rounds = 2
	reqs := make([][]burstReq, len(rows))
	for round := range rounds {
		for i := range rows {
			r := &rows[i]
			count := h.o.burstCount / rounds
			if round == 0 {
				count = h.o.burstCount - count
			}
			got, err := h.burstWindow(ctx, r, n, count)
			if err != nil {
				return nil, err
			}
			reqs[i] = append(reqs[i], got...)
		}
	}
	for i := range rows {
		h.arrivals(&rows[i], reqs[i])
	}
	return rows, h.traceBurst(ctx, n, conns)
}

// burstWindow measures count bursts of one row's client.
func (h *harness) burstWindow(ctx context.Context, r *burstRow, n, count int) ([]burstReq, error) {
	if r.client != clientProber {
		rb, err := rawBursts(ctx, h.sim, h.raw.body, n, r.period, count, r.client == clientOneWriter, r.conns == "new")
		if err != nil {
			return nil, err
		}
		r.writes = append(r.writes, rb.writes...)
		r.sent += rb.sent
		r.failed += rb.failed
		r.dials += rb.dials
		r.bursts += len(rb.writes)
		return rb.reqs, nil
	}
	// The runner fires the first burst as it starts: a window of
	// count-1 periods and a half holds count bursts.
	ps, err := h.runProber(ctx, shape{kind: burstEvery, n: n, lead: engine.BurstLead, period: r.period},
		time.Duration(count-1)*r.period+r.period/2, true)
	if err != nil {
		return nil, err
	}
	lags, failed, dials := lagsOf(ps.runs)
	r.writes = append(r.writes, ps.spreads...)
	r.bursts += len(ps.spreads)
	r.lags = append(r.lags, lags...)
	r.failed += failed
	r.dials += dials
	r.sent += len(ps.runs)
	r.skipped += ps.skipped.Load()
	var out []burstReq
	for _, run := range ps.runs {
		out = append(out, burstReq{group: run.planned.UnixNano(), id: run.res.RequestID})
	}
	return out, nil
}

// arrivals fetches the ground truth of every request of a row and fills
// its arrival spreads.
func (h *harness) arrivals(r *burstRow, reqs []burstReq) {
	var qs []truthQuery
	for _, q := range reqs {
		qs = append(qs, truthQuery{id: q.id})
	}
	firstByte, headers, received := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, a := range h.sim.truths(qs) {
		if a.err != nil || a.rec.ReceivedUnixNano == 0 {
			r.missing++
			continue
		}
		received[a.q.id] = a.rec.ReceivedUnixNano
		if a.rec.HeadersUnixNano != 0 {
			headers[a.q.id] = a.rec.HeadersUnixNano
		}
		if a.rec.FirstByteUnixNano != 0 {
			firstByte[a.q.id] = a.rec.FirstByteUnixNano
		}
	}
	r.firstByte = groupSpreads(reqs, firstByte)
	r.headers = groupSpreads(reqs, headers)
	r.received = groupSpreads(reqs, received)
}

// groupSpreads groups requests by burst and returns, for each burst with
// a time for every request, the last minus the first.
func groupSpreads(reqs []burstReq, at map[string]int64) []time.Duration {
	type span struct {
		first, last int64
		complete    bool
		n           int
	}
	groups := map[int64]*span{}
	var order []int64
	for _, r := range reqs {
		g, ok := groups[r.group]
		if !ok {
			g = &span{complete: true}
			groups[r.group] = g
			order = append(order, r.group)
		}
		t, ok := at[r.id]
		if !ok {
			g.complete = false
			continue
		}
		if g.n == 0 || t < g.first {
			g.first = t
		}
		if g.n == 0 || t > g.last {
			g.last = t
		}
		g.n++
	}
	var out []time.Duration
	for _, k := range order {
		if g := groups[k]; g.complete && g.n >= 2 {
			out = append(out, time.Duration(g.last-g.first))
		}
	}
	return out
}

// traceBurst writes, with -trace-dir, a runtime/trace of the prober
// sending three bursts at a 1 s period (outside the measured windows:
// tracing costs CPU of its own). `go tool trace` then shows what each
// request's goroutine did between the release and its write.
func (h *harness) traceBurst(ctx context.Context, n int, conns string) error {
	if h.o.traceDir == "" || ctx.Err() != nil {
		return ctx.Err()
	}
	if err := os.MkdirAll(h.o.traceDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(h.o.traceDir, "burst-"+conns+".trace"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := trace.Start(f); err != nil {
		return err
	}
	_, err = h.runProber(ctx, shape{kind: burstEvery, n: n, lead: engine.BurstLead, period: time.Second}, 3500*time.Millisecond, false)
	trace.Stop()
	return err
}

// rawBurstStats is what rawBursts measured.
type rawBurstStats struct {
	writes              []time.Duration
	reqs                []burstReq
	sent, failed, dials int
}

// rawConn is one of the raw burst client's connections and its reader.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

// rawBursts sends count bursts of n requests every period, each request
// on its own connection, dialled (or kept from the previous burst when
// the server kept it) engine.BurstLead before the release; the requests
// are serialised before the release too. With oneWriter a single
// goroutine writes them all in turn; otherwise each connection's
// goroutine waits for the release and writes its own. fresh dials every
// burst's connections anew (the server closes each after its answer).
func rawBursts(ctx context.Context, sim *simProcess, body []byte, n int, period time.Duration, count int, oneWriter, fresh bool) (rawBurstStats, error) {
	var st rawBurstStats
	u, err := url.Parse(sim.url)
	if err != nil {
		return st, err
	}
	conns := make([]*rawConn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.c.Close()
			}
		}
	}()
	prefix := "burst-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	next := time.Now().Add(period)
	for b := range count {
		if err := sleepUntil(ctx, next.Add(-engine.BurstLead)); err != nil {
			return st, err
		}
		reqs := make([][]byte, n)
		for i := range n {
			if fresh && conns[i] != nil {
				conns[i].c.Close()
				conns[i] = nil
			}
			if conns[i] == nil {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", u.Host)
				if err != nil {
					return st, fmt.Errorf("raw burst: %w", err)
				}
				conns[i] = &rawConn{c: c, br: bufio.NewReader(c)}
				st.dials++
			}
			id := fmt.Sprintf("%s-%d-%d", prefix, b, i)
			reqs[i] = fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s",
				u.Host, simulator.HeaderRequestID, id, len(body), body)
			st.reqs = append(st.reqs, burstReq{group: next.UnixNano(), id: id})
		}
		release := make(chan struct{})
		starts := make([]time.Time, n)
		ok := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if !oneWriter {
					<-release
					starts[i] = time.Now()
					if _, err := conns[i].c.Write(reqs[i]); err != nil {
						return
					}
				} else {
					<-release
				}
				ok[i] = readAnswer(conns[i])
			})
		}
		if err := sleepUntil(ctx, next); err != nil {
			close(release)
			wg.Wait()
			return st, err
		}
		if oneWriter {
			for i := range n {
				starts[i] = time.Now()
				_, _ = conns[i].c.Write(reqs[i])
			}
		}
		close(release)
		wg.Wait()
		first, last := starts[0], starts[0]
		for i, t := range starts {
			if t.Before(first) {
				first = t
			}
			if t.After(last) {
				last = t
			}
			st.sent++
			if !ok[i] {
				st.failed++
				conns[i].c.Close()
				conns[i] = nil
			}
		}
		st.writes = append(st.writes, last.Sub(first))
		next = next.Add(period)
	}
	return st, nil
}

// readAnswer reads one response whole; false when it failed.
func readAnswer(c *rawConn) bool {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

func sleepUntil(ctx context.Context, t time.Time) error {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
