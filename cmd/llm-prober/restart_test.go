package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// Restart safety: SIGTERM during a burst drains the burst's requests and
// records them; past the drain share of --web.shutdown-timeout they are
// cancelled and recorded as such; a reload in the middle of a burst loses
// nothing.

// slowSimulator answers in about tokens × 50ms.
func slowSimulator(t *testing.T) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = 50 * time.Millisecond
	cfg.Latency.DecodePerRunning = 0
	cfg.Latency.Jitter = 0
	return simtest.Start(t, cfg).URL
}

// burstConfig: a burst of 8 every 2s whose requests take tokens × 50ms.
func burstConfig(url string, tokens int, extra string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: burst, schedule: {burst: 8, period: 2s}}
      - {name: steady, schedule: {every: 300ms}}
%sworkloads:
  default: {max_tokens: %d, ignore_eos: true}
`, url, extra, tokens)
}

// sigtermDuringBurst runs the binary, waits for a full burst in flight,
// sends SIGTERM and returns the logs after it, how long the exit took and
// the files the process left in its working, home and temp directories.
func sigtermDuringBurst(t *testing.T, tokens int, shutdownTimeout string) (after string, took time.Duration, leftovers []string) {
	t.Helper()
	bin := testutil.BuildBinary(t)
	url := slowSimulator(t)
	cfgPath := testutil.WriteConfig(t, burstConfig(url, tokens, ""), nil)
	// The process gets empty working, home and temp directories; the
	// config lives elsewhere. It must write nothing (the image runs with a
	// read-only root filesystem).
	work, home, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--web.listen-address="+addr, "--log.level=debug", "--web.shutdown-timeout="+shutdownTimeout)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "TMPDIR="+tmp)
	p := testutil.StartProcess(t, "llm-prober", cmd)
	base := "http://" + addr
	p.WaitReady(t, base)
	// A whole burst in flight (a burst fires within 2s of the start).
	testutil.WaitFor(t, "8 burst requests in flight", waitTimeout, func() bool {
		return testutil.Scrape(t, base).Sum("llm_probe_in_flight_requests", "probe", "burst") == 8
	})
	mark := len(p.Output())
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Wait(60 * time.Second)
	if !exited {
		t.Fatalf("no exit within 60s of SIGTERM:\n%s", p.Output())
	}
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.Output())
	}
	took = time.Since(start)
	for _, d := range []string{work, home, tmp} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			leftovers = append(leftovers, filepath.Join(d, e.Name()))
		}
	}
	return p.Output()[mark:], took, leftovers
}

// burstResults counts the burst probe's recorded results in logs: every
// result is logged once (debug, or warn/info on a success transition).
func burstResults(logs, outcome string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "probe=burst") && strings.Contains(line, "outcome="+outcome) &&
			(strings.Contains(line, `msg="Probe done"`) || strings.Contains(line, `msg="Probe failing"`)) {
			n++
		}
	}
	return n
}

func TestSIGTERMDrainsBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Requests of about 3s; the drain waits for them.
	after, took, leftovers := sigtermDuringBurst(t, 60, "30s")
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if n := burstResults(after, "success"); n < 8 {
		t.Errorf("%d of the burst's 8 requests recorded as success after SIGTERM:\n%s", n, after)
	}
	if strings.Contains(after, "Cancelled in-flight probes") || !strings.Contains(after, `msg=Stopped`) {
		t.Errorf("unexpected shutdown:\n%s", after)
	}
	if len(leftovers) > 0 {
		t.Errorf("the daemon wrote files: %v", leftovers)
	}
}

func TestSIGTERMPastDeadlineCancelsAndRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Requests of about 30s, a 500ms drain: cancelled, and recorded.
	after, took, leftovers := sigtermDuringBurst(t, 600, "500ms")
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if n := strings.Count(after, "Cancelled in-flight probes"); n != 1 {
		t.Errorf("the cancellation summary logged %d times, want once:\n%s", n, after)
	}
	if n := burstResults(after, "cancelled"); n < 8 {
		t.Errorf("%d of the burst's 8 cancelled requests recorded:\n%s", n, after)
	}
	if n := strings.Count(after, "probe cancelled after"); n < 8 {
		t.Errorf("%d results say they were cancelled:\n%s", n, after)
	}
	if took > 5*time.Second {
		t.Errorf("took %s to stop with a 500ms shutdown timeout", took)
	}
	if len(leftovers) > 0 {
		t.Errorf("the daemon wrote files: %v", leftovers)
	}
}

// TestReloadMidBurstLosesNothing reloads while a burst is in flight, twice
// (a change elsewhere in the file, then a change of the burst's own
// schedule), then stops every schedule and accounts for every arrival.
func TestReloadMidBurstLosesNothing(t *testing.T) {
	url := slowSimulator(t)
	td := startDaemon(t, burstConfig(url, 30, ""))
	inFlight := func() float64 {
		return testutil.Scrape(t, td.url).Sum("llm_probe_in_flight_requests", "probe", "burst")
	}
	reload := func(cfg string) {
		t.Helper()
		testutil.WriteFile(t, td.cfgPath, cfg)
		if status, _, body := get(t, "POST", td.url+"/-/reload"); status != http.StatusOK {
			t.Fatalf("reload: %d %s", status, body)
		}
	}
	other := "  - name: other\n    protocol: openai_chat\n    url: " + url + "\n    model: sim-llm\n    probes: [{name: p, schedule: {every: 1h}}]\n"
	testutil.WaitFor(t, "8 burst requests in flight", waitTimeout, func() bool { return inFlight() == 8 })
	reload(burstConfig(url, 30, other)) // the burst's probe is unchanged
	testutil.WaitFor(t, "the burst's requests to finish", waitTimeout, func() bool { return inFlight() == 0 })
	testutil.WaitFor(t, "the next 8 burst requests in flight", waitTimeout, func() bool { return inFlight() == 8 })
	changed := strings.Replace(burstConfig(url, 30, other), "period: 2s", "period: 3s", 1)
	reload(changed) // the burst's probe restarts; its requests finish
	// Stop scheduling: every probe's schedule becomes practically never.
	time.Sleep(500 * time.Millisecond)
	quiet := strings.NewReplacer("{burst: 8, period: 3s}", "{every: 24h}", "{every: 300ms}", "{every: 24h}").Replace(changed)
	reload(quiet)
	var mfs testutil.Families
	testutil.WaitFor(t, "no request in flight after the schedules stopped", waitTimeout, func() bool {
		mfs = testutil.Scrape(t, td.url)
		return mfs.Sum("llm_probe_in_flight_requests") == 0
	})
	for _, p := range []string{"burst", "steady"} {
		scheduled := mfs.Sum("llm_probe_scheduled_total", "probe", p)
		requests := mfs.Sum("llm_probe_requests_total", "probe", p)
		skipped := mfs.Sum("llm_probe_skipped_total", "probe", p)
		success := mfs.Sum("llm_probe_requests_total", "probe", p, "outcome", "success")
		t.Logf("%s: scheduled %v, requests %v (success %v), skipped %v", p, scheduled, requests, success, skipped)
		if scheduled == 0 || scheduled != requests+skipped {
			t.Errorf("%s: scheduled %v != requests %v + skipped %v", p, scheduled, requests, skipped)
		}
		if success != requests {
			t.Errorf("%s: %v of %v requests succeeded; a reload must not cancel requests in flight", p, success, requests)
		}
	}
	if n := mfs.Sum("llm_probe_requests_total", "probe", "burst"); n < 16 {
		t.Errorf("burst: %v requests recorded, want at least the two bursts in flight during the reloads (16)", n)
	}
}
