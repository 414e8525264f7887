// Package soak runs the real llm-prober binary for a long time against the
// simulator with every schedule kind and every fault, and checks that it
// stays healthy: every planned probe accounted for, no goroutine growth,
// flat memory, no panics, /metrics always answering.
//
// `make test` runs it for 60 seconds; `make soak` for 10 minutes
// (SOAK_DURATION=30m make soak for longer). The figures are printed with -v.
package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const plantedKey = "sk-soak-planted-key-5f2c91"

// soakConfig uses every schedule kind (every with jitter, constant and
// Poisson rates, a closed loop, bursts by period and by cron, repeating
// stages, an active window, per-probe and per-target in-flight limits) on
// every protocol the simulator speaks, plus two targets that cannot be
// reached. %[1]s is the simulator's HTTP address, %[2]s its gRPC address,
// %[3]s a closed port; %[4]s is extra target settings (empty, or a header
// that changes every target's fingerprint).
const soakConfig = `targets:
  - name: chat
    protocol: openai_chat
    url: http://%[1]s
    model: sim-llm
    api_key_file: key
    stream_idle_timeout: 1s
    timeout: 10s
    max_in_flight: 24
%[4]s    probes:
      - {name: every, schedule: {every: 300ms, jitter: 100ms}}
      - {name: rate, schedule: {rate: 8/s}}
      - {name: poisson, workload: synthetic, schedule: {rate: 6/s, distribution: poisson}}
      - {name: closed, schedule: {concurrency: 2}}
      - {name: burst, schedule: {burst: 12, period: 3s}}
      - {name: cron-burst, schedule: {burst: 6, cron: "* * * * *"}}
      - name: stages
        workload: chat
        schedule:
          stages: [{rate: 4/s, duration: 3s}, {concurrency: 2, duration: 3s}]
          repeat: true
      - {name: windowed, schedule: {rate: 3/s, active: "*/2 * * * *"}}
      - {name: tight, stream: false, schedule: {rate: 10/s, max_in_flight: 1}}
  - name: completions
    protocol: openai_completions
    url: http://%[1]s
    model: sim-llm
    timeout: 1s
    stream_idle_timeout: 5s
    max_in_flight: 4
%[4]s    probes:
      - {name: burst, schedule: {burst: 8, period: 2s}}
      - {name: every, schedule: {every: 500ms}}
  - name: tgi
    protocol: tgi
    url: http://%[1]s
    model: sim-llm
    stream_idle_timeout: 1s
%[4]s    probes:
      - {name: rate, schedule: {rate: 3/s, distribution: poisson}}
  - name: ollama
    protocol: ollama
    url: http://%[1]s
    model: sim-llm
    stream_idle_timeout: 1s
%[4]s    probes:
      - {name: every, schedule: {every: 400ms}}
  - name: triton-http
    protocol: triton_generate
    url: http://%[1]s
    model: sim-llm
    stream_idle_timeout: 1s
    triton: {preset: vllm_backend}
%[4]s    probes:
      - {name: every, schedule: {every: 400ms}}
  - name: triton-grpc
    protocol: triton_grpc
    address: %[2]s
    model: sim-llm
    stream_idle_timeout: 1s
%[4]s    probes:
      - {name: rate, schedule: {rate: 3/s}}
      - {name: closed, stream: false, schedule: {concurrency: 1}}
  - name: refused
    protocol: openai_chat
    url: http://%[3]s
    model: m
%[4]s    probes:
      - {name: every, schedule: {every: 1s}}
  - name: no-dns
    protocol: openai_chat
    url: http://soak.invalid:8000
    model: m
%[4]s    probes:
      - {name: every, schedule: {every: 2s}}
workloads:
  default: {max_tokens: {distribution: uniform, mean: 12, range: 0.5}, ignore_eos: true}
  synthetic:
    prompts: {synthetic: {input_tokens: {mean: 64, stddev: 8}}, seed: 1}
    max_tokens: {distribution: exponential, mean: 10, cap: 40}
    ignore_eos: true
  chat:
    prompts:
      system: Be brief.
      inline: [Hi, {messages: [{role: user, content: Hi}, {role: assistant, content: Hello}, {role: user, content: Bye}]}]
      selection: random
    max_tokens: 6
`

// quietSchedules replaces every schedule with one that practically never
// fires (periodic kinds start at a random phase), keeping every probe and so
// its series: the state before and after the soak proper.
func quietSchedules(cfg string) string {
	var out strings.Builder
	for line := range strings.Lines(cfg) {
		if i := strings.Index(line, "schedule:"); i >= 0 && strings.HasPrefix(strings.TrimSpace(line), "- ") {
			// One-line probe: cut its schedule off and close the map.
			line = line[:i] + "schedule: {every: 24h}}\n"
		} else if strings.TrimSpace(line) == "schedule:" {
			line = strings.Replace(line, "schedule:", "schedule: {every: 24h}", 1)
		} else if strings.Contains(line, "stages:") || strings.Contains(line, "repeat:") {
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SOAK_DURATION")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 20*time.Second {
		t.Fatalf("SOAK_DURATION=%q: want a duration of at least 20s", v)
	}
	return d
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak runs the real binary for a minute")
	}
	duration := soakDuration(t)
	dir := t.TempDir()
	readSources(t)
	bin := buildBinary(t, dir)

	simAddr, grpcAddr, proberAddr, closedAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	// Every fault at a few percent; stalls and slow first tokens outlast
	// the targets' stream_idle_timeout (1s) and the completions target's
	// timeout (1s), so they end as stream_stalled and timeout.
	sim := startProcess(t, dir, "simulate", bin, "simulate", "--log.level=warn",
		"--listen", simAddr, "--grpc-listen", grpcAddr,
		"--latency.ttft-base=5ms", "--latency.decode-base=2ms", "--latency.jitter=0.1",
		"--fault.error-rate=0.03", "--fault.error-status=503",
		"--fault.reset-rate=0.03",
		"--fault.stall-rate=0.02", "--fault.stall-duration=2s",
		"--fault.malformed-rate=0.02",
		"--fault.slow-first-token-rate=0.03", "--fault.slow-first-token-delay=1500ms",
		"--fault.truncate-rate=0.02",
		"--fault.error-event-rate=0.02")
	waitHTTP(t, "http://"+simAddr+"/health", sim)

	writeFile(t, filepath.Join(dir, "key"), plantedKey+"\n")
	full := fmt.Sprintf(soakConfig, simAddr, grpcAddr, closedAddr, "")
	// Drivers rebuilt at the end (a changed header) close their idle
	// connections, so the goroutine count can come back to the baseline.
	quietEnd := quietSchedules(fmt.Sprintf(soakConfig, simAddr, grpcAddr, closedAddr, "    headers: {X-Soak-Phase: end}\n"))
	cfgPath := filepath.Join(dir, "llm-prober.yml")
	writeFile(t, cfgPath, quietSchedules(full))

	prober := startProcess(t, dir, "llm-prober", bin, "--config.file="+cfgPath,
		"--web.listen-address="+proberAddr, "--log.level=info", "--web.shutdown-timeout=20s")
	base := "http://" + proberAddr
	waitHTTP(t, base+"/-/ready", prober)
	s := &scraper{t: t, url: base + "/metrics", pid: prober.cmd.Process.Pid}

	// Baseline: every target set up, nothing scheduled.
	time.Sleep(2 * time.Second)
	baseline := s.sample(0)

	writeFile(t, cfgPath, full)
	reload(t, base, prober)
	start := time.Now()
	interval := max(duration/40, 2*time.Second)
	reloadedMidway := false
	var samples []sample
	for elapsed := time.Duration(0); elapsed < duration; elapsed = time.Since(start) {
		time.Sleep(min(interval, duration-elapsed))
		samples = append(samples, s.sample(time.Since(start)))
		if !reloadedMidway && time.Since(start) > duration/2 {
			// A reload in the middle: an unchanged file (no-op), then a
			// change of one probe's schedule (it restarts; its requests in
			// flight finish and are recorded), over both SIGHUP and HTTP.
			reload(t, base, prober)
			writeFile(t, cfgPath, strings.Replace(full, "{burst: 12, period: 3s}", "{burst: 12, period: 2500ms}", 1))
			if err := prober.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			reloadedMidway = true
		}
		if prober.exited() {
			t.Fatalf("llm-prober exited during the soak:\n%s", prober.tail())
		}
	}
	runEnd := time.Since(start)

	// Stop scheduling, let in-flight requests end, and account.
	writeFile(t, cfgPath, quietEnd)
	reload(t, base, prober)
	final := waitSettled(t, s)
	if v := final.value("llm_prober_config_last_reload_successful", nil); v != 1 {
		t.Errorf("llm_prober_config_last_reload_successful = %v after the reloads", v)
	}

	report(t, runEnd, baseline, samples, final, s)
	checkAccounting(t, final)
	checkOutcomes(t, final)
	checkGoroutines(t, baseline, samples, final)
	checkRSS(t, duration, samples)

	if err := prober.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := prober.wait(30 * time.Second); err != nil {
		t.Errorf("llm-prober after SIGTERM: %v\n%s", err, prober.tail())
	}
	logs := prober.output()
	for _, bad := range []string{"panic:", "fatal error:", "DATA RACE", "goroutine 1 [", plantedKey} {
		if strings.Contains(logs, bad) {
			t.Errorf("llm-prober's output contains %q:\n%s", bad, prober.tail())
		}
	}
	if strings.Contains(sim.output(), "panic:") {
		t.Errorf("simulator panicked:\n%s", sim.tail())
	}
}

// waitSettled scrapes until nothing is in flight and two scrapes a second
// apart agree on every counter that accounting uses.
func waitSettled(t *testing.T, s *scraper) sample {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	prev := s.sample(0)
	for {
		time.Sleep(time.Second)
		cur := s.sample(0)
		if cur.sum("llm_probe_in_flight_requests", nil) == 0 && sameAccounting(prev, cur) {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("probes still in flight 60s after the schedules stopped: %v", cur.sum("llm_probe_in_flight_requests", nil))
		}
		prev = cur
	}
}

func sameAccounting(a, b sample) bool {
	for _, name := range []string{"llm_probe_scheduled_total", "llm_probe_requests_total", "llm_probe_skipped_total"} {
		if a.sum(name, nil) != b.sum(name, nil) {
			return false
		}
	}
	return true
}

type probeKey struct{ target, probe string }

func checkAccounting(t *testing.T, final sample) {
	t.Helper()
	var total float64
	for _, k := range final.probes() {
		sel := map[string]string{"target": k.target, "probe": k.probe}
		scheduled := final.sum("llm_probe_scheduled_total", sel)
		sent := final.sum("llm_probe_requests_total", sel)
		skipped := final.sum("llm_probe_skipped_total", sel)
		total += scheduled
		if scheduled != sent+skipped {
			t.Errorf("%s/%s: scheduled %v != requests %v + skipped %v", k.target, k.probe, scheduled, sent, skipped)
		}
	}
	if total == 0 {
		t.Error("nothing was scheduled")
	}
	// Every schedule kind sent something (cron and active windows need a
	// minute boundary, which a 60-second run may straddle only once).
	for _, k := range []probeKey{{"chat", "every"}, {"chat", "rate"}, {"chat", "poisson"}, {"chat", "closed"}, {"chat", "burst"},
		{"chat", "stages"}, {"chat", "tight"}, {"completions", "burst"}, {"tgi", "rate"}, {"ollama", "every"},
		{"triton-http", "every"}, {"triton-grpc", "rate"}, {"triton-grpc", "closed"}} {
		if final.sum("llm_probe_requests_total", map[string]string{"target": k.target, "probe": k.probe, "outcome": "success"}) == 0 {
			t.Errorf("%s/%s: no successful request", k.target, k.probe)
		}
	}
	if final.sum("llm_probe_skipped_total", map[string]string{"target": "chat", "probe": "tight"}) == 0 {
		t.Error("chat/tight (rate 10/s, max_in_flight 1) never skipped")
	}
}

// checkOutcomes: every injected fault shows up as its outcome somewhere.
func checkOutcomes(t *testing.T, final sample) {
	t.Helper()
	for _, o := range []string{"success", "http_5xx", "incomplete", "protocol_error", "stream_stalled", "timeout", "connect_error", "grpc_error"} {
		if final.sum("llm_probe_requests_total", map[string]string{"outcome": o}) == 0 {
			t.Errorf("no request ended as %s", o)
		}
	}
}

func checkGoroutines(t *testing.T, baseline sample, samples []sample, final sample) {
	t.Helper()
	b, f := baseline.value("go_goroutines", nil), final.value("go_goroutines", nil)
	// Idle connections of rebuilt drivers are closed; what stays is the
	// same set of long-lived goroutines as at the start. A little slack
	// for connections the transport is still tearing down.
	if f > b+15 {
		t.Errorf("goroutines grew: %v at the start, %v at the end (settled)", b, f)
	}
	// During the run the count follows the load; its second half must not
	// climb above the first (a leak of one per request would).
	half := len(samples) / 2
	if half >= 2 {
		first, second := maxGauge(samples[:half], "go_goroutines"), maxGauge(samples[half:], "go_goroutines")
		if second > 1.5*first+50 {
			t.Errorf("goroutines rising during the run: max %v in the first half, %v in the second", first, second)
		}
	}
}

// checkRSS: after a warm-up (a quarter of the run, at least 15s) the
// resident set stays within generous bounds: a leak proportional to the
// requests sent (thousands a minute) would exceed them.
func checkRSS(t *testing.T, duration time.Duration, samples []sample) {
	t.Helper()
	warm := max(duration/4, 15*time.Second)
	var after []float64
	for _, s := range samples {
		if s.at >= warm {
			after = append(after, s.rss)
		}
	}
	if len(after) < 3 {
		return
	}
	ref := after[0]
	last := after[len(after)-3:]
	end := slices.Min(last)
	if end > 1.5*ref+32<<20 {
		t.Errorf("RSS grew after warm-up: %.1f MiB at %s, %.1f MiB at the end", ref/(1<<20), warm, end/(1<<20))
	}
}

func maxGauge(samples []sample, name string) float64 {
	m := math.Inf(-1)
	for _, s := range samples {
		m = max(m, s.value(name, nil))
	}
	return m
}

func report(t *testing.T, ran time.Duration, baseline sample, samples []sample, final sample, s *scraper) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s of every schedule kind and every fault against the simulator\n", ran.Round(time.Second))
	fmt.Fprintf(&b, "%8s %10s %10s %8s %8s\n", "t", "rss_MiB", "heap_MiB", "gorout", "scrape")
	all := append(append([]sample{baseline}, samples...), final)
	for i, x := range all {
		label := x.at.Round(time.Second).String()
		if i == 0 {
			label = "base"
		} else if i == len(all)-1 {
			label = "settled"
		}
		fmt.Fprintf(&b, "%8s %10.1f %10.1f %8.0f %8s\n", label, x.rss/(1<<20), x.value("go_memstats_heap_inuse_bytes", nil)/(1<<20),
			x.value("go_goroutines", nil), x.scrape.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "%-26s %9s %9s %9s  %s\n", "probe", "scheduled", "requests", "skipped", "outcomes")
	var sched, req, skip float64
	for _, k := range final.probes() {
		sel := map[string]string{"target": k.target, "probe": k.probe}
		sc, rq, sk := final.sum("llm_probe_scheduled_total", sel), final.sum("llm_probe_requests_total", sel), final.sum("llm_probe_skipped_total", sel)
		sched, req, skip = sched+sc, req+rq, skip+sk
		fmt.Fprintf(&b, "%-26s %9.0f %9.0f %9.0f  %s\n", k.target+"/"+k.probe, sc, rq, sk, final.outcomes(sel))
	}
	fmt.Fprintf(&b, "%-26s %9.0f %9.0f %9.0f  %s\n", "total", sched, req, skip, final.outcomes(nil))
	fmt.Fprintf(&b, "accounted: %.0f of %.0f scheduled (requests + skipped)\n", req+skip, sched)
	fmt.Fprintf(&b, "goroutines: %.0f at the start, max %.0f, %.0f settled; RSS %.1f MiB at the start, max %.1f MiB, %.1f MiB settled\n",
		baseline.value("go_goroutines", nil), maxGauge(all, "go_goroutines"), final.value("go_goroutines", nil),
		baseline.rss/(1<<20), maxRSS(all)/(1<<20), final.rss/(1<<20))
	fmt.Fprintf(&b, "/metrics: %d scrapes, all answered, slowest %s\n", s.n, s.slowest.Round(time.Millisecond))
	t.Log("\n" + b.String())
}

func maxRSS(samples []sample) float64 {
	m := 0.0
	for _, s := range samples {
		m = max(m, s.rss)
	}
	return m
}

// scraper reads the prober's /metrics and its RSS; every scrape must answer.
type scraper struct {
	t       *testing.T
	url     string
	pid     int
	n       int
	slowest time.Duration
}

type sample struct {
	at     time.Duration
	rss    float64
	scrape time.Duration
	mfs    map[string]*dto.MetricFamily
}

var client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (s *scraper) sample(at time.Duration) sample {
	s.t.Helper()
	t0 := time.Now()
	resp, err := client.Get(s.url)
	if err != nil {
		s.t.Fatalf("/metrics did not answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	s.n++
	s.slowest = max(s.slowest, took)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("/metrics does not parse: %v", err)
	}
	return sample{at: at, rss: float64(vmRSS(s.t, s.pid)), scrape: took, mfs: mfs}
}

func matches(m *dto.Metric, sel map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := sel[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(sel)
}

func (s sample) sum(name string, sel map[string]string) float64 {
	var v float64
	for _, m := range s.mfs[name].GetMetric() {
		if matches(m, sel) {
			switch {
			case m.Counter != nil:
				v += m.GetCounter().GetValue()
			case m.Gauge != nil:
				v += m.GetGauge().GetValue()
			case m.Untyped != nil:
				v += m.GetUntyped().GetValue()
			}
		}
	}
	return v
}

func (s sample) value(name string, sel map[string]string) float64 { return s.sum(name, sel) }

func (s sample) probes() []probeKey {
	seen := map[probeKey]bool{}
	for _, m := range s.mfs["llm_probe_scheduled_total"].GetMetric() {
		var k probeKey
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "target":
				k.target = lp.GetValue()
			case "probe":
				k.probe = lp.GetValue()
			}
		}
		seen[k] = true
	}
	out := make([]probeKey, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].target != out[j].target {
			return out[i].target < out[j].target
		}
		return out[i].probe < out[j].probe
	})
	return out
}

func (s sample) outcomes(sel map[string]string) string {
	counts := map[string]float64{}
	for _, m := range s.mfs["llm_probe_requests_total"].GetMetric() {
		if !matches(m, sel) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "outcome" && m.GetCounter().GetValue() > 0 {
				counts[lp.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.0f", k, counts[k])
	}
	return strings.Join(parts, " ")
}

// vmRSS reads the resident set of pid in bytes from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			kib, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmRSS in /proc/pid/status")
	return 0
}

func reload(t *testing.T, base string, p *process) {
	t.Helper()
	resp, err := client.Post(base+"/-/reload", "text/plain", nil)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d %s\n%s", resp.StatusCode, b, p.tail())
	}
}

// readSources reads the module's Go sources, so that go test's cache
// (which records the files a test opens) reruns the soak when the code of
// the binary it builds changes.
func readSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "../.." && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "go.mod") || strings.HasSuffix(path, "go.sum"):
			_, err := os.ReadFile(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the sources: %v", err)
	}
}

// buildBinary builds llm-prober as make build does (with the race detector
// when SOAK_RACE is set: slower, larger, but it sees races under faults).
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "llm-prober")
	args := []string{"build", "-trimpath", "-o", bin}
	env := append(os.Environ(), "CGO_ENABLED=0")
	if os.Getenv("SOAK_RACE") != "" {
		args = append(args, "-race")
		env = append(os.Environ(), "CGO_ENABLED=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, "../../cmd/llm-prober")...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// process is a child process whose output goes to a file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProcess(t *testing.T, dir, name, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %s", p.name, d)
	}
}

func (p *process) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail is the end of the process's output, for failure messages.
func (p *process) tail() string {
	out := p.output()
	if len(out) > 8000 {
		out = "…" + out[len(out)-8000:]
	}
	return out
}

func waitHTTP(t *testing.T, url string, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s not answering at %s: %v\n%s", p.name, url, err, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
