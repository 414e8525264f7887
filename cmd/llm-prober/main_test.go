package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const goodConfig = `
targets:
  - name: first
    protocol: openai_chat
    url: http://127.0.0.1:1
    model: m
    api_key_file: key
    probes: [{name: p, schedule: {every: 1h}}]
`

const secondConfig = `
targets:
  - name: second
    protocol: openai_chat
    url: http://127.0.0.1:1
    model: m
    api_key_file: key
    probes: [{name: p, schedule: {every: 1h}}]
`

const brokenConfig = `
targets:
  - name: second
    protocol: openia_chat
`

type testDaemon struct {
	url     string
	logs    *testutil.SyncBuffer
	hup     chan os.Signal
	cfgPath string
}

// waitTimeout bounds the waits for a daemon's state: generous for a loaded
// machine under the race detector.
const waitTimeout = 10 * time.Second

// startDaemon runs serve() in-process on a loopback port with cfg (beside
// it, the key file holding plantedAPIKey), exactly as main does apart from
// the listener and the signal channel, and waits until it is ready.
func startDaemon(t *testing.T, cfg string, opts ...func(*serveOptions)) *testDaemon {
	t.Helper()
	cfgPath := testutil.WriteConfig(t, cfg, map[string]string{"key": plantedAPIKey + "\n"})
	td := &testDaemon{logs: &testutil.SyncBuffer{}, hup: make(chan os.Signal, 1), cfgPath: cfgPath}
	// Registered first, so it runs after the daemon stopped.
	t.Cleanup(func() {
		if strings.Contains(td.logs.String(), "sk-planted-secret") {
			t.Errorf("secret leaked into logs:\n%s", td.logs.String())
		}
	})
	o := serveOptions{configFile: cfgPath, reloadSignals: td.hup}
	for _, fn := range opts {
		fn(&o)
	}
	td.url = "http://" + serveInProcess(t, o, "", td.logs)
	testutil.WaitReady(t, td.url)
	return td
}

// serveInProcess runs serve(o) in a goroutine on a loopback listener, with
// --web.config.file webConfig ("" for none), debug logs and stderr into logs
// and a 5s shutdown timeout, and returns the listener's address. When the
// test ends serve must return 0 within 10s.
func serveInProcess(t *testing.T, o serveOptions, webConfig string, logs *testutil.SyncBuffer) string {
	t.Helper()
	l := testutil.Listen(t)
	level := promslog.NewLevel()
	_ = level.Set("debug")
	o.webFlags = &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: new(false), WebConfigFile: &webConfig}
	o.shutdownTimeout = 5 * time.Second
	o.logger = promslog.New(&promslog.Config{Level: level, Writer: logs})
	o.stderr = logs
	o.listener = l
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d; logs:\n%s", code, logs.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s")
		}
	})
	return l.Addr().String()
}

func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func metricValue(t *testing.T, td *testDaemon, name string) string {
	t.Helper()
	_, _, body := get(t, "GET", td.url+"/metrics")
	v, n := testutil.SampleLine(body, name)
	if n == 0 {
		t.Fatalf("metric %s not found", name)
	}
	return v
}

func TestEndpoints(t *testing.T) {
	td := startDaemon(t, goodConfig)
	cases := []struct {
		method, path string
		status       int
		contentType  string
		contains     string
	}{
		{"GET", "/", 200, "text/html", "/metrics"},
		{"GET", "/metrics", 200, "text/plain; version=0.0.4", "llm_prober_build_info"},
		{"GET", "/-/healthy", 200, "text/plain", "Healthy"},
		{"GET", "/-/ready", 200, "text/plain", "Ready"},
		{"GET", "/-/reload", 405, "text/plain", "POST"},
		{"GET", "/config", 200, "text/plain", "api_key: <secret>"},
	}
	for _, c := range cases {
		status, ct, body := get(t, c.method, td.url+c.path)
		if status != c.status || !strings.HasPrefix(ct, c.contentType) || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s: got %d %q, body contains %q: %v", c.method, c.path, status, ct, c.contains, strings.Contains(body, c.contains))
		}
		if strings.Contains(body, "sk-planted-secret") {
			t.Errorf("%s leaks the API key", c.path)
		}
	}
	// OpenMetrics is negotiated when asked for.
	req, _ := http.NewRequest("GET", td.url+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("OpenMetrics not negotiated: %q", ct)
	}
}

func TestMetricsLint(t *testing.T) {
	td := startDaemon(t, goodConfig)
	_, _, body := get(t, "GET", td.url+"/metrics")
	problems, err := promtestutil.GatherAndLint(newDaemon(serveOptions{logger: promslog.NewNopLogger()}).registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	promtoolCheckMetrics(t, body)
}

// promtoolCheckMetrics pipes an exposition through `promtool check metrics`.
// make test installs promtool and sets LLM_PROBER_REQUIRE_PROMTOOL, so the
// check is skipped only when running go test by hand without it.
func promtoolCheckMetrics(t *testing.T, exposition string) {
	t.Helper()
	cmd := exec.Command(testutil.RequirePromtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics failed: %v\n%s", err, out)
	}
}

func TestReloadOverHTTP(t *testing.T) {
	td := startDaemon(t, goodConfig)
	if v := metricValue(t, td, "llm_prober_config_last_reload_successful"); v != "1" {
		t.Fatalf("after start: reload_successful = %s", v)
	}

	testutil.WriteFile(t, td.cfgPath, brokenConfig)
	status, _, body := get(t, "POST", td.url+"/-/reload")
	if status != 500 || !strings.Contains(body, `unknown protocol "openia_chat"`) {
		t.Errorf("broken reload: %d %s", status, body)
	}
	if v := metricValue(t, td, "llm_prober_config_last_reload_successful"); v != "0" {
		t.Errorf("after broken reload: reload_successful = %s", v)
	}
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") {
		t.Errorf("old config not kept:\n%s", cfg)
	}
	if status, _, _ := get(t, "GET", td.url+"/-/ready"); status != 200 {
		t.Error("not ready after a failed reload")
	}

	testutil.WriteFile(t, td.cfgPath, secondConfig)
	if status, _, body := get(t, "POST", td.url+"/-/reload"); status != 200 {
		t.Fatalf("good reload: %d %s", status, body)
	}
	if v := metricValue(t, td, "llm_prober_config_last_reload_successful"); v != "1" {
		t.Errorf("after good reload: reload_successful = %s", v)
	}
	if v := metricValue(t, td, "llm_prober_config_last_reload_success_timestamp_seconds"); v == "0" {
		t.Error("reload timestamp not set")
	}
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: second") {
		t.Errorf("new config not served:\n%s", cfg)
	}
}

func TestReloadOnSIGHUP(t *testing.T) {
	td := startDaemon(t, goodConfig)
	testutil.WriteFile(t, td.cfgPath, brokenConfig)
	td.hup <- syscall.SIGHUP
	testutil.WaitFor(t, "llm_prober_config_last_reload_successful 0", waitTimeout, func() bool {
		return metricValue(t, td, "llm_prober_config_last_reload_successful") == "0"
	})
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") {
		t.Errorf("old config not kept after SIGHUP with a broken file")
	}
	testutil.WriteFile(t, td.cfgPath, secondConfig)
	td.hup <- syscall.SIGHUP
	testutil.WaitFor(t, "llm_prober_config_last_reload_successful 1", waitTimeout, func() bool {
		return metricValue(t, td, "llm_prober_config_last_reload_successful") == "1"
	})
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: second") {
		t.Errorf("new config not loaded after SIGHUP")
	}
}

func TestReloadDisabled(t *testing.T) {
	td := startDaemon(t, goodConfig, func(o *serveOptions) { o.disableReload = true })
	if status, _, _ := get(t, "POST", td.url+"/-/reload"); status != http.StatusForbidden {
		t.Errorf("reload with --web.disable-reload: status %d, want 403", status)
	}
}

func TestStartWithInvalidConfigExits1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yml")
	testutil.WriteFile(t, path, brokenConfig)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--config.file=" + path, "--web.listen-address=127.0.0.1:0"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), path+":4:5: targets[0].protocol: unknown protocol") {
		t.Errorf("stderr lacks the located error:\n%s", stderr.String())
	}
}

func TestCheckConfig(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "../../testdata/bad.yml"}, &stdout, &stderr); code != 1 {
		t.Errorf("bad file: exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "bad.yml:13:5: targets[2].protocol") {
		t.Errorf("bad file: no line:column error:\n%s", stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	for _, example := range []string{"llm-prober.yml", "tgi.yml", "ollama.yml", "vllm.yml", "triton-sidecar.yml", "triton-generate.yml"} {
		if code := run(context.Background(), []string{"check-config", "../../examples/" + example}, &stdout, &stderr); code != 0 {
			t.Errorf("example config %s: exit %d: %s", example, code, stderr.String())
		}
	}
	stdout.Reset()
	dir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(dir, "key"), "sk-planted-secret-123456\n")
	testutil.WriteFile(t, filepath.Join(dir, "c.yml"), goodConfig)
	if code := run(context.Background(), []string{"check-config", "--print", filepath.Join(dir, "c.yml")}, &stdout, &stderr); code != 0 {
		t.Fatalf("--print: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if strings.Contains(out, "sk-planted") || !strings.Contains(out, "api_key: <secret>") || !strings.Contains(out, "stream_idle_timeout: 30s") {
		t.Errorf("--print output wrong:\n%s", out)
	}
}

func TestVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, &stderr); code != 0 {
		t.Errorf("--version exit %d", code)
	}
	if !strings.Contains(stdout.String()+stderr.String(), "llm-prober, version") {
		t.Errorf("--version output: %q %q", stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"--no-such-flag"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown flag exit %d, want 2", code)
	}
}
