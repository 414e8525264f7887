//go:build unix

// Package soaklong is the opt-in fleet soak (`make soak-long`): the real
// binary runs 1,000 probes (by default) against the simulator with faults
// for SOAK_LONG_DURATION (1h by default), remote writing to a real
// Prometheus 2.42 that also scrapes it every 15 s, and reports RSS and
// goroutines over time, every probe accounted for, and remote-write
// samples sent against samples stored.
//
// It runs only when SOAK_LONG_DURATION is set: an hour does not fit in
// make test. SOAK_LONG_DURATION=2m SOAK_LONG_PROBES=200 is a short run.
package soaklong

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

type point struct {
	at               time.Duration
	rss, goroutines  float64
	requests, queued float64
}

func TestSoakLong(t *testing.T) {
	v := os.Getenv("SOAK_LONG_DURATION")
	if v == "" {
		t.Skip("opt-in: make soak-long (SOAK_LONG_DURATION=1h)")
	}
	duration, err := time.ParseDuration(v)
	if err != nil || duration < time.Minute {
		t.Fatalf("SOAK_LONG_DURATION=%q: want at least 1m", v)
	}
	probes := envInt(t, "SOAK_LONG_PROBES", 1000)
	promBin := testutil.RequireTool(t, "prometheus", "LLM_PROBER_REQUIRE_PROMTOOL", "install Debian's prometheus package (scripts/ensure-promtool.sh)")
	bin := testutil.BuildBinary(t)
	dir := t.TempDir()
	simAddr, proberAddr, promAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)

	sim := testutil.StartProcess(t, "simulate", exec.Command(bin, "simulate", "--log.level=warn", "--listen", simAddr,
		"--latency.ttft-base=20ms", "--latency.decode-base=5ms", "--latency.jitter=0.1",
		"--fault.error-rate=0.02", "--fault.error-status=503", "--fault.reset-rate=0.01",
		"--fault.stall-rate=0.01", "--fault.stall-duration=3s", "--fault.truncate-rate=0.01"))
	sim.WaitHTTP(t, "http://"+simAddr+"/health")

	// Ten probes per target, each every 15 s with jitter: 1,000 probes
	// are about 67 requests/s.
	var b strings.Builder
	b.WriteString("targets:\n")
	for i := range (probes + 9) / 10 {
		fmt.Fprintf(&b, "  - name: t%04d\n    protocol: openai_chat\n    url: http://%s\n    model: sim-llm\n    stream_idle_timeout: 2s\n    timeout: 10s\n    probes:\n", i, simAddr)
		for j := range min(10, probes-10*i) {
			fmt.Fprintf(&b, "      - {name: p%d, schedule: {every: 15s, jitter: 5s}}\n", j)
		}
	}
	fmt.Fprintf(&b, `workloads:
  default: {max_tokens: {distribution: uniform, mean: 16, range: 0.5}, ignore_eos: true}
external_labels: {location: soak}
remote_write:
  - url: http://%s/api/v1/write
    interval: 15s
    # 1,000 probes gather about 130,000 samples every 15 s: 500,000 ride
    # out a minute of receiver outage. The ring's pages become resident
    # as it first fills, so RSS grows until it wraps (then stays flat).
    queue_config: {capacity: 500000, max_samples_per_send: 5000}
`, promAddr)
	cfgPath := filepath.Join(dir, "llm-prober.yml")
	testutil.WriteFile(t, cfgPath, b.String())

	testutil.WriteFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`
global: {scrape_interval: 15s, scrape_timeout: 10s}
scrape_configs:
  - job_name: llm-prober
    static_configs: [{targets: ['%s']}]
`, proberAddr))
	prom := testutil.StartProcess(t, "prometheus", exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr, "--web.enable-remote-write-receiver"))
	prom.WaitHTTP(t, "http://"+promAddr+"/-/ready")

	prober := testutil.StartProcess(t, "llm-prober", exec.Command(bin, "--config.file="+cfgPath,
		"--web.listen-address="+proberAddr, "--log.level=warn", "--web.shutdown-timeout=30s"))
	base := "http://" + proberAddr
	prober.WaitReady(t, base)

	start := time.Now()
	var points []point
	for time.Since(start) < duration {
		time.Sleep(min(15*time.Second, duration-time.Since(start)))
		f := testutil.Scrape(t, base)
		rss, _ := testutil.RSS(prober.Cmd.Process.Pid)
		points = append(points, point{at: time.Since(start).Round(time.Second), rss: float64(rss), goroutines: f.Sum("go_goroutines"),
			requests: f.Sum("llm_probe_requests_total"), queued: f.Sum("llm_prober_remote_write_queue_samples")})
		if prober.Exited() {
			t.Fatalf("llm-prober exited:\n%s", prober.Tail(40))
		}
	}

	// Accounting: every probe sent requests, and scheduled = requests +
	// skipped + in flight.
	f := testutil.Scrape(t, base)
	missing := 0
	for _, m := range f.Series("llm_probe_scheduled_total") {
		tg, p := testutil.Label(m, "target"), testutil.Label(m, "probe")
		if f.Sum("llm_probe_requests_total", "target", tg, "probe", p) == 0 {
			missing++
		}
	}
	scheduled, requests := f.Sum("llm_probe_scheduled_total"), f.Sum("llm_probe_requests_total")
	skipped, inFlight := f.Sum("llm_probe_skipped_total"), f.Sum("llm_probe_in_flight_requests")
	configured := len(f.Series("llm_probe_scheduled_total"))
	if configured != probes || missing != 0 {
		t.Errorf("%d probes configured, %d with series, %d without a request", probes, configured, missing)
	}
	if scheduled != requests+skipped+inFlight {
		t.Errorf("scheduled %v != requests %v + skipped %v + in flight %v", scheduled, requests, skipped, inFlight)
	}

	// Remote write: what the prober says it sent against what Prometheus
	// stored with the external label, read right after a send emptied
	// the queue (the next gather is up to 15 s away).
	var sent, received float64
	testutil.Poll(t, "an empty remote-write queue", time.Minute, 100*time.Millisecond, func() (bool, string) {
		f := testutil.Scrape(t, base)
		sent = f.Sum("llm_prober_remote_write_samples_sent_total")
		q := f.Sum("llm_prober_remote_write_queue_samples")
		return q == 0, fmt.Sprintf("%v queued", q)
	})
	window := fmt.Sprintf("%ds", int((time.Since(start) + time.Minute).Seconds()))
	// count_over_time drops the metric name, so series of different
	// names but the same labels would collide: counted name by name.
	for _, name := range labelValues(t, promAddr, "__name__", `{location="soak"}`) {
		received += query(t, promAddr, fmt.Sprintf(`sum(count_over_time({__name__=%q,location="soak"}[%s]))`, name, window))
	}
	dropped := f.Sum("llm_prober_remote_write_samples_dropped_total")

	if err := prober.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := prober.Wait(60 * time.Second); !exited || err != nil {
		t.Errorf("llm-prober after SIGTERM: exited %v, %v", exited, err)
	}

	t.Logf("soak-long: %d probes for %s; scheduled %v, requests %v, skipped %v, in flight %v, probes without a request %d",
		probes, duration, scheduled, requests, skipped, inFlight, missing)
	t.Logf("remote write: sent %v, stored with location=soak %v (difference %v), dropped %v", sent, received, sent-received, dropped)
	t.Logf("%8s %10s %10s %12s %10s", "t", "RSS MiB", "goroutines", "requests", "rw queued")
	for _, p := range points {
		t.Logf("%8s %10.1f %10.0f %12.0f %10.0f", p.at, p.rss/(1<<20), p.goroutines, p.requests, p.queued)
	}
	if duration >= 10*time.Minute && len(points) >= 8 {
		// Flat within 5% after warm-up (histograms filling, the queue's
		// ring first filling): the last quarter's peak against the second
		// quarter's. Peaks, not single samples: RSS swings by 15% or more
		// with each garbage collection, so two samples compare GC phases.
		// A shorter run is all warm-up.
		q := len(points) / 4
		early, late := points[q:2*q], points[len(points)-q:]
		peak := func(ps []point, v func(point) float64) float64 {
			m := 0.0
			for _, p := range ps {
				m = max(m, v(p))
			}
			return m
		}
		rss := func(p point) float64 { return p.rss }
		gor := func(p point) float64 { return p.goroutines }
		t.Logf("peaks, second quarter / last quarter: RSS %.1f / %.1f MiB, goroutines %v / %v",
			peak(early, rss)/(1<<20), peak(late, rss)/(1<<20), peak(early, gor), peak(late, gor))
		if peak(late, rss) > peak(early, rss)*1.05 {
			t.Errorf("RSS grew: peak %.1f MiB in the second quarter, %.1f MiB in the last", peak(early, rss)/(1<<20), peak(late, rss)/(1<<20))
		}
		if peak(late, gor) > peak(early, gor)*1.05 {
			t.Errorf("goroutines grew: peak %v in the second quarter, %v in the last", peak(early, gor), peak(late, gor))
		}
	}
	if sent != received {
		t.Errorf("remote write: %v samples sent, %v stored", sent, received)
	}
	if dropped != 0 {
		t.Errorf("remote write dropped %v samples", dropped)
	}
}

func query(t *testing.T, addr, q string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data.Result) != 1 {
		t.Fatalf("query %s: %v (%d results)", q, err, len(body.Data.Result))
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func labelValues(t *testing.T, addr, label, match string) []string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/label/" + label + "/values?match[]=" + url.QueryEscape(match))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data) == 0 {
		t.Fatalf("label values of %s for %s: %v (%d)", label, match, err, len(body.Data))
	}
	return body.Data
}
