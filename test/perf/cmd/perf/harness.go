package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
	"github.com/llm-prober/llm-prober/workload"
)

// shapeKind is the traffic shape of one measured window.
type shapeKind int

const (
	closedLoop   shapeKind = iota // n streams kept in flight
	poissonRate                   // open loop, Poisson arrivals at rate/s
	constantRate                  // open loop, evenly spaced at rate/s
	burstEvery                    // n requests at once every period
)

type shape struct {
	kind shapeKind
	n    int
	rate float64
	// lead is the burst lead (schedule.Job.BurstLead) of a burst shape,
	// period its time between bursts.
	lead, period time.Duration
}

func (s shape) String() string {
	switch s.kind {
	case closedLoop:
		return fmt.Sprintf("c%d", s.n)
	case poissonRate:
		return fmt.Sprintf("poisson%g", s.rate)
	case constantRate:
		return fmt.Sprintf("constant%g", s.rate)
	}
	return fmt.Sprintf("burst%d", s.n)
}

// harness holds what lives across windows, as in the daemon: one driver
// (one connection pool) for the target, one ProbeMetrics registered in a
// registry, and the raw client.
type harness struct {
	o       options
	sim     *simProcess
	driver  probe.Driver
	metrics *collector.ProbeMetrics
	// work is the probe's workload, as the daemon builds it from a
	// configuration: one inline prompt, so every request shares its
	// encoded body.
	work *workload.Generator
	raw  *rawClient
}

const (
	perfTarget = "sim"
	perfProbe  = "perf"
	perfModel  = "sim-llm"
	prompt     = "Explain in two sentences what a KV cache is."
)

func newHarness(sim *simProcess, o options) (*harness, error) {
	d, err := probe.NewDriver(probe.ProtocolOpenAIChat, probe.TargetOptions{
		Name: perfTarget, URL: sim.url, Model: perfModel,
	}, promslog.NewNopLogger())
	if err != nil {
		return nil, err
	}
	pm := collector.NewProbeMetrics()
	prometheus.NewRegistry().MustRegister(pm)
	pm.Add(collector.ProbeSeries{Target: perfTarget, Probe: perfProbe, Model: perfModel,
		SLO: collector.SLO{TTFT: 250 * time.Millisecond, TPOT: 20 * time.Millisecond, Objective: 0.99}})
	return &harness{
		o: o, sim: sim, driver: d, metrics: pm,
		work: workload.New(&config.Workload{
			Prompts:   config.Prompts{Inline: []config.Prompt{{Text: prompt}}},
			MaxTokens: config.MaxTokens{Mean: o.outputTokens},
			IgnoreEOS: true,
		}),
		raw: newRawClient(sim.url, o.outputTokens),
	}, nil
}

func (h *harness) close() {
	h.driver.Close()
	h.raw.close()
}

// usage is CPU and wall time of one measured window; simCPU is the
// simulator process's CPU in the same window (from /proc), for context.
type usage struct {
	cpu, wall, simCPU time.Duration
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f between two rusage readings, after a GC so that garbage
// of earlier work is not collected on this window's account.
func measure(sim *simProcess, f func()) usage {
	runtime.GC()
	pid := sim.cmd.Process.Pid
	s0, c0, t0 := procCPU(pid), cpuTime(), time.Now()
	f()
	return usage{cpu: cpuTime() - c0, wall: time.Since(t0), simCPU: procCPU(pid) - s0}
}

// probeRun is what the prober side records of one request.
type probeRun struct {
	res     *probe.Result
	planned time.Time
}

type proberStats struct {
	use               usage
	runs              []probeRun
	skipped           atomic.Int64
	spreads           []time.Duration
	requests, success int
	tokens            int
	// last holds the ids of the last successful requests, whose chunk
	// gaps the cost rows read from ground truth.
	last idRing
}

// idRing keeps the last gapSample ids added.
type idRing struct {
	ids  []string
	next int
}

// gapSample is how many requests of each cost window have their chunk
// gaps read from the simulator's ground truth.
const gapSample = 50

func (r *idRing) add(id string) {
	if len(r.ids) < gapSample {
		r.ids = append(r.ids, id)
		return
	}
	r.ids[r.next] = id
	r.next = (r.next + 1) % gapSample
}

// runProber drives the real engine for d: a schedule runner job whose Run
// does what the daemon's does (engine.Probe.SendAt with the ticket's
// release, the send reported to the ticket, lag and result into
// ProbeMetrics). record keeps every Result.
func (h *harness) runProber(ctx context.Context, sh shape, d time.Duration, record bool) (*proberStats, error) {
	ps := &proberStats{}
	var mu sync.Mutex
	spec := schedule.Spec{MaxInFlight: 4096}
	switch sh.kind {
	case closedLoop:
		spec.Concurrency = sh.n
	case poissonRate:
		spec.Rate, spec.Poisson = sh.rate, true
	case constantRate:
		spec.Rate = sh.rate
	case burstEvery:
		spec.Burst, spec.Period = sh.n, sh.period
	}
	p := &engine.Probe{Target: perfTarget, Name: perfProbe, Model: perfModel, Stream: true,
		Timeout: 30 * time.Second, Driver: h.driver, Workload: h.work}
	job := schedule.Job{
		Key:         perfTarget + "/" + perfProbe,
		Fingerprint: sh.String(),
		Spec:        spec,
		BurstLead:   sh.lead,
		Skipped: func(reason string) {
			ps.skipped.Add(1)
			h.metrics.Skipped(perfTarget, perfProbe, reason)
		},
		BurstSpread: func(s time.Duration) {
			h.metrics.ObserveBurstSpread(perfTarget, perfProbe, s)
			mu.Lock()
			ps.spreads = append(ps.spreads, s)
			mu.Unlock()
		},
		Run: func(ctx context.Context, tk schedule.Ticket) bool {
			res := p.SendAt(ctx, tk.Release(), tk.Planned).Result
			tk.Sent(res.Start)
			h.metrics.ObserveScheduleLag(perfTarget, perfProbe, max(res.Start.Sub(tk.Planned), 0))
			h.metrics.Observe(perfTarget, perfProbe, res)
			ok := res.Outcome == probe.OutcomeSuccess
			mu.Lock()
			ps.requests++
			if ok {
				ps.success++
				ps.tokens += res.OutputTokens
				ps.last.add(res.RequestID)
			}
			if record {
				ps.runs = append(ps.runs, probeRun{res: res, planned: tk.Planned})
			}
			mu.Unlock()
			return ok
		},
	}
	var runErr error
	ps.use = measure(h.sim, func() {
		r := schedule.NewRunner(promslog.NewNopLogger(), schedule.Options{Seed: 1})
		r.Apply([]schedule.Job{job})
		select {
		case <-time.After(d):
		case <-ctx.Done():
			runErr = ctx.Err()
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.Stop(sctx)
	})
	return ps, runErr
}

// rawClient is the floor: net/http, the same request body, the body read
// in a loop into a fixed buffer, nothing parsed, nothing recorded.
type rawClient struct {
	// prefix makes the ids of this client's requests unique in the
	// simulator's ground truth across harnesses.
	prefix string
	url    string
	body   []byte
	tokens int
	client *http.Client
	tr     *http.Transport
	seq    atomic.Int64
}

func newRawClient(base string, tokens int) *rawClient {
	tr := &http.Transport{
		DisableCompression:  true,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
	}
	body := fmt.Sprintf(`{"max_tokens":%d,"messages":[{"role":"user","content":%q}],"model":%q,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
		tokens, prompt, perfModel)
	return &rawClient{prefix: "raw-" + strconv.FormatUint(rand.Uint64(), 36) + "-", url: base + "/v1/chat/completions", body: []byte(body), tokens: tokens,
		client: &http.Client{Transport: tr}, tr: tr}
}

func (c *rawClient) close() { c.tr.CloseIdleConnections() }

// rawTTFT is the raw client's own time to first token of one request, for
// the overhead comparison.
type rawTTFT struct {
	id   string
	ttft time.Duration
}

var contentKey = []byte(`"content":"`)

// firstContent reports whether b holds a chat chunk with non-empty
// content ("content":"x…; the role chunk has "content":"").
func firstContent(b []byte) bool {
	for {
		i := bytes.Index(b, contentKey)
		if i < 0 {
			return false
		}
		b = b[i+len(contentKey):]
		if len(b) > 0 && b[0] != '"' {
			return true
		}
	}
}

// do sends one request, named as the prober names its own (so both pay
// for an id), and reads the whole body; false on any failure. With ttft
// it also times its first content chunk the way the prober does (from
// just before the request is handed to net/http), scanning what it reads
// until then; without, it only reads.
func (c *rawClient) do(ctx context.Context, ttft *rawTTFT) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return "", false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	id := c.prefix + strconv.FormatInt(c.seq.Add(1), 10)
	req.Header.Set("X-Request-Id", id)
	if ttft != nil {
		ttft.id = id
	}
	start := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return id, false
	}
	defer resp.Body.Close()
	var buf [4096]byte
	// tail keeps the end of the previous read, so a key split between two
	// reads is still found.
	var tail []byte
	for {
		n, err := resp.Body.Read(buf[:])
		if ttft != nil && ttft.ttft == 0 && n > 0 {
			if firstContent(append(tail, buf[:n]...)) {
				ttft.ttft = time.Since(start)
			}
			tail = append(tail[:0], buf[max(n-len(contentKey), 0):n]...)
		}
		if err == io.EOF {
			return id, resp.StatusCode == http.StatusOK
		}
		if err != nil {
			return id, false
		}
	}
}

type rawStats struct {
	use                      usage
	requests, failed, tokens int
	ttfts                    []rawTTFT
	last                     idRing
}

// runRaw drives the raw client with a shape for d: n goroutines in a loop
// or a local Poisson process. With ttft it times every request's first
// content chunk.
func (h *harness) runRaw(ctx context.Context, sh shape, d time.Duration, ttft bool) *rawStats {
	return runRawClient(ctx, h.sim, h.raw, sh, d, ttft)
}

func runRawClient(ctx context.Context, sim *simProcess, c *rawClient, sh shape, d time.Duration, ttft bool) *rawStats {
	rs := &rawStats{}
	var ok, failed atomic.Int64
	var mu sync.Mutex
	one := func() {
		var t *rawTTFT
		if ttft {
			t = &rawTTFT{}
		}
		if id, good := c.do(ctx, t); good {
			ok.Add(1)
			mu.Lock()
			rs.last.add(id)
			mu.Unlock()
			if t != nil && t.ttft > 0 {
				mu.Lock()
				rs.ttfts = append(rs.ttfts, *t)
				mu.Unlock()
			}
		} else {
			failed.Add(1)
		}
	}
	rs.use = measure(sim, func() {
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		switch sh.kind {
		case closedLoop:
			for range sh.n {
				wg.Go(func() {
					for time.Now().Before(end) && ctx.Err() == nil {
						one()
					}
				})
			}
		default:
			panic("raw client: closed loop only")
		}
		wg.Wait()
	})
	rs.requests = int(ok.Load() + failed.Load())
	rs.failed = int(failed.Load())
	rs.tokens = int(ok.Load()) * c.tokens
	return rs
}

// rssMB reads VmRSS of a process from /proc.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}
