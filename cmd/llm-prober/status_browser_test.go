package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/nvmltest"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

// chromiumPath finds headless Chromium for the browser tests. `make test`
// installs Debian's chromium (scripts/ensure-chromium.sh) and sets
// LLM_PROBER_REQUIRE_CHROMIUM when it is there, so the test fails rather
// than skips when it should run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium"}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			candidates = append(candidates, p)
		}
	}
	for _, p := range candidates {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if os.Getenv("LLM_PROBER_REQUIRE_CHROMIUM") != "" {
		t.Fatal("Chromium is required (make test installed it, LLM_PROBER_REQUIRE_CHROMIUM is set) but /usr/bin/chromium is missing")
	}
	t.Skip("Chromium not installed; run scripts/ensure-chromium.sh (apt-get install chromium) or set CHROMIUM=/path/to/chromium")
	return ""
}

// chromium runs headless Chromium once with a fresh profile and returns its
// stdout. It runs in its own process group, killed whole if it overstays.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// dumpDOM loads url and returns the DOM after Chromium parsed and rendered
// it (what a user's browser would hold): through --dump-dom with
// JavaScript, through the DevTools protocol in a browser started with
// --blink-settings=scriptEnabled=false without (--dump-dom needs a script).
func dumpDOM(t *testing.T, bin, url string, noScript *devtools) string {
	t.Helper()
	var dom string
	if noScript == nil {
		dom = chromium(t, bin, "--dump-dom", url)
	} else {
		dom = noScript.outerHTML(url)
	}
	// The parser, not the server, inserts <tbody>: proof that this is a
	// browser's DOM and not the raw response.
	if !strings.Contains(dom, "<tbody>") {
		t.Fatalf("%s: no browser-built DOM:\n%s", url, dom)
	}
	return dom
}

// screenshot saves a PNG of url under dir and logs where it is; with
// LLM_PROBER_SCREENSHOT_DIR set it is also copied there, to look at after
// the test's temporary directory is gone.
func screenshot(t *testing.T, bin, url, dir, name string) {
	t.Helper()
	path := filepath.Join(dir, name)
	chromium(t, bin, "--screenshot="+path, "--window-size=1280,900", "--hide-scrollbars", url)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot of %s: %v (size %v)", url, err, fi)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", url, path, fi.Size())
	if keep := os.Getenv("LLM_PROBER_SCREENSHOT_DIR"); keep != "" {
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(filepath.Join(keep, name), b, 0o644); err != nil {
			t.Errorf("keeping the screenshot: %v", err)
		}
	}
}

// statusConfig probes the simulator three ways: a healthy target with
// server metrics, one whose stream fails midway (a mid-stream error event
// after 3 tokens), and one that refuses connections.
func statusConfig(sim, gpus string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    api_key_file: key
    server_metrics: {url: %[1]s/metrics, kind: vllm}
    probes:
      - {name: steady, schedule: {every: 100ms}, slo: {ttft: 250ms, tpot: 20ms}}
  - name: flaky
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    api_key_file: key
    headers: {X-Sim-Fault: "error_event:after=3,status=502"}
    probes:
      - {name: midstream, schedule: {every: 100ms}}
  - name: down
    protocol: openai_completions
    url: http://127.0.0.1:1
    model: sim-llm
    probes:
      - {name: refused, schedule: {every: 200ms}}
workloads:
  default: {max_tokens: 8, ignore_eos: true}
gpus: %[2]s
`, sim, gpus)
}

// TestStatusPageInBrowser loads the status pages of a running daemon in
// headless Chromium, with and without JavaScript, and checks the DOM the
// browser built: every target and probe with its last outcome and its
// TTFT and TPOT charts, the failing targets' errors, the server and GPU
// summaries, a probe page with a failure's debug log and waterfall, and
// another result's waterfall chosen from the table.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromiumPath(t)
	sim := startSimulator(t)
	gpus := "{enabled: false}"
	withGPU := false
	if _, err := exec.LookPath("gcc"); err == nil {
		stub := nvmltest.Build(t)
		stub.Set(t, nvmltest.Devices(2, nil))
		gpus = "{enabled: true, library: " + stub.Path + "}"
		withGPU = true
	}
	td := startDaemon(t, statusConfig(sim, gpus), func(o *serveOptions) { o.historyResults = 100 })
	testutil.WaitFor(t, "5 successes of sim, 2 http_5xx of flaky, 2 connect_errors of down", waitTimeout, func() bool {
		mfs := testutil.Scrape(t, td.url)
		return mfs.Sum("llm_probe_requests_total", "target", "sim", "outcome", "success") >= 5 &&
			mfs.Sum("llm_probe_requests_total", "target", "flaky", "outcome", "http_5xx") >= 2 &&
			mfs.Sum("llm_probe_requests_total", "target", "down", "outcome", "connect_error") >= 2
	})
	shots := t.TempDir()
	noScript := startDevtools(t, bin, false)

	for _, script := range []bool{true, false} {
		browser := noScript
		if script {
			browser = nil
		}
		t.Run(fmt.Sprintf("index/javascript=%v", script), func(t *testing.T) {
			dom := dumpDOM(t, bin, td.url+"/", browser)
			mustMatch(t, dom,
				// Every target with protocol and endpoint, every probe.
				`<h3>sim</h3>`, `<h3>flaky</h3>`, `<h3>down</h3>`,
				`openai_completions</span> · <span class="mono endpoint">http://127.0.0.1:1</span>`,
				`data-probe="steady"`, `data-probe="midstream"`, `data-probe="refused"`,
				// Last outcomes.
				`(?s)data-probe="steady">.*?<td class="outcome ok">success</td>`,
				`(?s)data-probe="midstream">.*?<td class="outcome fail">http_5xx</td>`,
				`(?s)data-probe="refused">.*?<td class="outcome fail">connect_error</td>`,
				// The failing targets' errors, and a link to each probe page.
				`<span class="err last-error">[^<]*502[^<]*</span>`,
				`<span class="err last-error">[^<]*(refused|connect)[^<]*</span>`,
				`<a href="/probes/flaky/midstream">results</a>`,
				// Success ratio and TTFT percentiles of the healthy probe.
				`(?s)data-probe="steady">.*?100\.0% <span class="muted">\(\d+/\d+\)</span></td><td class="n">[0-9.]+ ms</td><td class="n">[0-9.]+ ms</td>`,
				// Server summary: scraped by the page itself (nothing
				// scrapes /metrics for the servers here... except the
				// WaitFor above, which is fine either way).
				`Server metrics \(vllm, <span class="mono">[^<]+/metrics</span>\): <span class="ok">up</span>`,
				`<th>KV cache usage</th>`,
				// The links and version of the old landing page.
				`<a href="/metrics">Metrics</a>`, `<a href="/config">Configuration</a>`, `<a href="/-/healthy">Health</a>`,
				`<a href="/-/ready">Readiness</a>`, `<a href="/-/reload">Reload info</a>`, `Version: <span class="mono">\(version=`,
			)
			// The charts, in the DOM the browser built: TTFT and TPOT per
			// probe, the SLO of the probe that has one as a line, the
			// failures as ticks, what each shows in its title.
			if n := strings.Count(dom, `<svg class="spark" width="150" height="44" viewBox="0 0 300 88" role="img">`); n != 6 {
				t.Errorf("%d sparklines, want 2 for each of 3 probes", n)
			}
			mustMatch(t, probeRowOf(t, dom, "steady"),
				`<svg class="spark"[^>]*><title>TTFT of the last \d+ results \(over [^)]+\): \d+ successful, min [0-9.]+ ms, max [0-9.]+ m?s; SLO 250\.0 ms \(dashed line\);`,
				`<svg class="spark"[^>]*><title>TPOT of the last \d+ results[^<]*SLO 20\.00 ms \(dashed line\)`,
				`<path class="slo" d="M0 \d+H300">`, `<path class="line" d="M\d+ \d+[l0-9 -]*">`)
			mustMatch(t, probeRowOf(t, dom, "midstream"), `<title>TTFT of the last \d+ results[^<]*; [1-9]\d* failures? \(red ticks\)`, `<path class="fails" d="(M\d+ 76V88)+">`)
			mustMatch(t, probeRowOf(t, dom, "refused"), `<title>TTFT of the last \d+ results \(over [^)]+\): no successful streamed result with a first token; \d+ failures \(red ticks\)\.</title>`)
			if withGPU {
				mustMatch(t, dom, `<td>NVIDIA H100 80GB HBM3<br>`, `<th>memory used / total</th>`, `[0-9.]+ / [0-9.]+ GiB`, `\d+ °C`, `\d+ / \d+ W`)
			} else {
				mustMatch(t, dom, `No GPU metrics \(gpus.enabled is false\)`)
			}
			assertNoSecrets(t, "/ in Chromium", dom)
			if script {
				screenshot(t, bin, td.url+"/", shots, "status.png")
			} else {
				// Drawn, at their size, with scripts off.
				for _, b := range noScript.boxes(td.url+"/", "svg.spark") {
					if b != [2]float64{150, 44} {
						t.Errorf("a sparkline laid out at %v, want 150×44", b)
					}
				}
			}
		})
		t.Run(fmt.Sprintf("probe/javascript=%v", script), func(t *testing.T) {
			dom := dumpDOM(t, bin, td.url+"/probes/flaky/midstream", browser)
			mustMatch(t, dom,
				`<h2>flaky / midstream</h2>`,
				`<td class="outcome fail">http_5xx</td>`,
				// A failure's error, and its debug log unfolded for the newest.
				`<div class="err error">[^<]*502[^<]*</div>`,
				`<details class="debug-log" open="">`,
				`Sending openai_chat request to http://127\.0\.0\.1:\d+: model="sim-llm" max_tokens=8 stream=true prompt=\d+ messages, \d+ characters`,
				`Response head: status 200`,
				`First token after [0-9.]+ ms \(TTFT\)`,
				`\d+ output chunks, 3 output tokens`,
				`Probe failed after [0-9.]+ ms: outcome=http_5xx err=`,
				// Phases and token columns.
				`<th>first byte</th>`, `<th colspan="2">ITL \(ms\)</th>`,
				// The newest result's waterfall, its row selected, each
				// row linking to its own.
				`<h3 id="waterfall">Result of <span title="[^"]+">[0-9:.]+</span>: <span class="fail">http_5xx</span>, request id <span class="mono">[0-9a-f]{32}</span></h3>`,
				`<svg class="waterfall" width="760" height="\d+" viewBox="0 0 760 \d+" role="img"><title>Phases of request [0-9a-f]{32} \(http_5xx\), from its start: dns [^;]+; connect [^;]+; tls [^;]+; write [0-9.]+ ms; first byte [0-9.]+ ms; TTFT [0-9.]+ ms; end-to-end [0-9.]+ ms\.</title>`,
				`<rect class="fail" x="112" y="\d+" width="\d+" height="14">`,
				`<tr class="result failrow selected">\s*<td class="n" title="[^"]+"><a href="\?result=[0-9a-f]{32}#waterfall" aria-current="true">`,
				`<a href="\?result=[0-9a-f]{32}#waterfall">`,
				// Its sparklines in the summary.
				`<p class="charts"><svg class="spark"`,
			)
			assertNoSecrets(t, "probe page in Chromium", dom)
			if script {
				screenshot(t, bin, td.url+"/probes/flaky/midstream", shots, "probe.png")
			}
		})
	}
	// A successful result's waterfall, chosen by the link in its row (the
	// second row: not the default).
	var chosen string
	t.Run("waterfall", func(t *testing.T) {
		dom := dumpDOM(t, bin, td.url+"/probes/sim/steady", noScript)
		links := regexp.MustCompile(`<a href="\?result=([0-9a-f]{32})#waterfall">`).FindAllStringSubmatch(dom, -1)
		if len(links) == 0 {
			t.Fatalf("no result links:\n%s", dom)
		}
		chosen = links[0][1]
		url := td.url + "/probes/sim/steady?result=" + chosen
		for _, browser := range []*devtools{nil, noScript} {
			dom = dumpDOM(t, bin, url, browser)
			mustMatch(t, dom,
				`request id <span class="mono">`+chosen+`</span></h3>`,
				`<a href="\?result=`+chosen+`#waterfall" aria-current="true">`,
				`<title>Phases of request `+chosen+` \(success\), from its start: `,
				// TTFT from the start, the stream after it, the first
				// token marked, values in ms.
				`<rect class="ttft" x="112" y="\d+" width="\d+" height="14">`,
				`<rect class="stream" x="\d+" y="\d+" width="\d+" height="14">`,
				`<path class="mark" d="M\d+ 8V\d+">`,
				`<text class="value" x="\d+" y="\d+">[0-9.]+ ms</text>`,
			)
			if strings.Contains(dom, "no longer kept") {
				t.Error("a kept result said gone")
			}
		}
		// Drawn with scripts off: at most 760 wide (narrower windows shrink
		// it), in its own proportions.
		h, _ := strconv.ParseFloat(regexp.MustCompile(`viewBox="0 0 760 (\d+)"`).FindStringSubmatch(dom)[1], 64)
		if b := noScript.boxes(url, "svg.waterfall"); len(b) != 1 || b[0][0] < 400 || b[0][0] > 760 || math.Abs(b[0][1]/b[0][0]-h/760) > 0.01 {
			t.Errorf("waterfall laid out at %v, want one up to 760 × %v wide, in proportion", b, h)
		}
		screenshot(t, bin, url, shots, "waterfall.png")
	})
	t.Run("unknown probe", func(t *testing.T) {
		code, _, body := get(t, "GET", td.url+"/probes/sim/nope")
		if code != 404 || !strings.Contains(body, `id="not-found"`) {
			t.Errorf("unknown probe: %d\n%s", code, body)
		}
	})
}

// probeRowOf is the row of probe on "/" in dom.
func probeRowOf(t *testing.T, dom, probe string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr class="probe[^"]*" data-probe="` + regexp.QuoteMeta(probe) + `">(.*?)</tr>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no row of probe %s in:\n%s", probe, dom)
	}
	return m[1]
}

func mustMatch(t *testing.T, text string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(text) {
			t.Errorf("DOM does not match %s", p)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", text)
	}
}
