package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
)

// stepKind is the shape of one load step.
type stepKind int

const (
	closedLoop  stepKind = iota // n streams kept in flight
	poissonRate                 // open loop, rate requests/s
	burstEvery                  // n requests at once every burstPeriod
)

const burstPeriod = time.Second

type step struct {
	name string
	kind stepKind
	n    int
	rate float64
}

func parseSteps(s string) ([]step, error) {
	var out []step
	if strings.TrimSpace(s) == "" {
		return nil, nil // only the daemon and the micro-benchmarks
	}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		var (
			st  = step{name: f}
			err error
		)
		switch {
		case strings.HasPrefix(f, "c"):
			st.kind = closedLoop
			st.n, err = strconv.Atoi(f[1:])
		case strings.HasPrefix(f, "rate"):
			st.kind = poissonRate
			st.rate, err = strconv.ParseFloat(f[4:], 64)
		case strings.HasPrefix(f, "burst"):
			st.kind = burstEvery
			st.n, err = strconv.Atoi(f[5:])
		default:
			err = fmt.Errorf("unknown step")
		}
		if err != nil || (st.n <= 0 && st.rate <= 0) {
			return nil, fmt.Errorf("step %q: want cN, rateR or burstN", f)
		}
		out = append(out, st)
	}
	return out, nil
}

// harness holds what lives across steps, as in the daemon: one driver (one
// connection pool) for the target, one ProbeMetrics registered in a
// registry.
type harness struct {
	o       options
	sim     *simProcess
	driver  probe.Driver
	metrics *collector.ProbeMetrics
	req     probe.Request
	raw     *rawClient
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
		req: probe.Request{
			Model:     perfModel,
			Messages:  []probe.Message{{Role: "user", Content: prompt}},
			MaxTokens: o.outputTokens,
			IgnoreEOS: true,
			Stream:    true,
		},
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
func (h *harness) measure(f func()) usage {
	runtime.GC()
	pid := h.sim.cmd.Process.Pid
	s0, c0, t0 := procCPU(pid), cpuTime(), time.Now()
	f()
	return usage{cpu: cpuTime() - c0, wall: time.Since(t0), simCPU: procCPU(pid) - s0}
}

// probeRun is what the prober side records of one request.
type probeRun struct {
	res     *probe.Result
	planned time.Time
	// called is when Run called the driver: Start − called is the
	// driver's own work before the request is handed to net/http.
	called time.Time
}

type proberStats struct {
	use               usage
	runs              []probeRun
	skipped           atomic.Int64
	spreads           []time.Duration
	requests, success int
	tokens            int
}

type rawStats struct {
	use                      usage
	requests, failed, tokens int
}

type stepResult struct {
	step   step
	prober *proberStats
	raw    *rawStats
	truth  truthStats
	rssMB  float64
}

func (h *harness) runStep(ctx context.Context, st step) (stepResult, error) {
	// Prober: warm-up (connections, pools), then the measured window.
	if _, err := h.runProber(ctx, st, h.o.warmup, false); err != nil {
		return stepResult{}, err
	}
	var stopProfile func()
	if h.o.profileDir != "" {
		f, err := os.Create(filepath.Join(h.o.profileDir, "prober-"+st.name+".pprof"))
		if err != nil {
			return stepResult{}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return stepResult{}, err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	ps, err := h.runProber(ctx, st, h.o.stepDuration, true)
	if stopProfile != nil {
		stopProfile()
	}
	if err != nil {
		return stepResult{}, err
	}
	rss := rssMB(os.Getpid())
	// Ground truth is fetched outside any measured window and before the
	// raw client's requests could evict it.
	truth := h.compareTruth(ps.runs)

	h.runRaw(ctx, st, h.o.warmup)
	rs := h.runRaw(ctx, st, h.o.stepDuration)
	return stepResult{step: st, prober: ps, raw: rs, truth: truth, rssMB: rss}, nil
}

// runProber drives the real engine: a schedule runner job whose Run does
// what the daemon's does (probe, report the send to the ticket, record lag
// and the result in ProbeMetrics).
func (h *harness) runProber(ctx context.Context, st step, d time.Duration, record bool) (*proberStats, error) {
	ps := &proberStats{}
	var mu sync.Mutex
	spec := schedule.Spec{MaxInFlight: 4096}
	switch st.kind {
	case closedLoop:
		spec.Concurrency = st.n
	case poissonRate:
		spec.Rate, spec.Poisson = st.rate, true
	case burstEvery:
		spec.Burst, spec.Period = st.n, burstPeriod
	}
	job := schedule.Job{
		Key:         perfTarget + "/" + perfProbe,
		Fingerprint: st.name,
		Spec:        spec,
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
			called := time.Now()
			req := h.req
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			res := h.driver.Probe(ctx, &req)
			tk.Sent(res.Start)
			h.metrics.ObserveScheduleLag(perfTarget, perfProbe, max(res.Start.Sub(tk.Planned), 0))
			h.metrics.Observe(perfTarget, perfProbe, res)
			ok := res.Outcome == probe.OutcomeSuccess
			mu.Lock()
			ps.requests++
			if ok {
				ps.success++
				ps.tokens += res.OutputTokens
			}
			if record {
				ps.runs = append(ps.runs, probeRun{res: res, planned: tk.Planned, called: called})
			}
			mu.Unlock()
			return ok
		},
	}
	var runErr error
	ps.use = h.measure(func() {
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
	url    string
	body   []byte
	tokens int
	client *http.Client
	tr     *http.Transport
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
	return &rawClient{url: base + "/v1/chat/completions", body: []byte(body), tokens: tokens,
		client: &http.Client{Transport: tr}, tr: tr}
}

func (c *rawClient) close() { c.tr.CloseIdleConnections() }

// do sends one request and reads the whole body; false on any failure.
func (c *rawClient) do(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var buf [4096]byte
	for {
		_, err := resp.Body.Read(buf[:])
		if err == io.EOF {
			return resp.StatusCode == http.StatusOK
		}
		if err != nil {
			return false
		}
	}
}

// runRaw drives the raw client with the step's shape: n goroutines in a
// loop, a local Poisson process, or bursts from a ticker.
func (h *harness) runRaw(ctx context.Context, st step, d time.Duration) *rawStats {
	rs := &rawStats{}
	var ok, failed atomic.Int64
	one := func() {
		if h.raw.do(ctx) {
			ok.Add(1)
		} else {
			failed.Add(1)
		}
	}
	rs.use = h.measure(func() {
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		switch st.kind {
		case closedLoop:
			for range st.n {
				wg.Go(func() {
					for time.Now().Before(end) && ctx.Err() == nil {
						one()
					}
				})
			}
		case poissonRate:
			rng := rand.New(rand.NewPCG(1, 2))
			next := time.Now()
			for ctx.Err() == nil {
				next = next.Add(time.Duration(rng.ExpFloat64() / st.rate * float64(time.Second)))
				if !next.Before(end) {
					break
				}
				time.Sleep(time.Until(next))
				wg.Go(one)
			}
		case burstEvery:
			t := time.NewTicker(burstPeriod)
			for ctx.Err() == nil && time.Now().Before(end) {
				for range st.n {
					wg.Go(one)
				}
				<-t.C
			}
			t.Stop()
		}
		wg.Wait()
	})
	rs.requests = int(ok.Load() + failed.Load())
	rs.failed = int(failed.Load())
	rs.tokens = int(ok.Load()) * h.raw.tokens
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
