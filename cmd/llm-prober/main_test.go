package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"
	"go.uber.org/goleak"
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

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testDaemon struct {
	url     string
	dir     string
	logs    *syncBuffer
	hup     chan os.Signal
	cancel  context.CancelFunc
	done    chan int
	cfgPath string
}

// startDaemon runs serve() in-process on a loopback port, exactly as main
// does apart from the listener and the signal channel.
func startDaemon(t *testing.T, cfg string, opts ...func(*serveOptions)) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "key"), "sk-planted-secret-123456\n")
	cfgPath := filepath.Join(dir, "llm-prober.yml")
	writeFile(t, cfgPath, cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	level := promslog.NewLevel()
	_ = level.Set("debug")
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{
		url: "http://" + l.Addr().String(), dir: dir, logs: logs, cfgPath: cfgPath,
		hup: make(chan os.Signal, 1), cancel: cancel, done: make(chan int, 1),
	}
	emptyWebConfig := ""
	o := serveOptions{
		configFile:      cfgPath,
		webFlags:        &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: new(false), WebConfigFile: &emptyWebConfig},
		shutdownTimeout: 5 * time.Second,
		logger:          promslog.New(&promslog.Config{Level: level, Writer: logs}),
		stderr:          logs,
		listener:        l,
		reloadSignals:   td.hup,
	}
	for _, fn := range opts {
		fn(&o)
	}
	go func() { td.done <- serve(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-td.done:
			if code != 0 {
				t.Errorf("serve exited %d; logs:\n%s", code, logs.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s")
		}
		if strings.Contains(logs.String(), "sk-planted-secret") {
			t.Errorf("secret leaked into logs:\n%s", logs.String())
		}
	})
	waitFor(t, func() bool {
		resp, err := http.Get(td.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return td
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	t.Fatalf("metric %s not found", name)
	return ""
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
	problems, err := testutil.GatherAndLint(newDaemon(serveOptions{logger: promslog.NewNopLogger()}).registry)
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
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("LLM_PROBER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is required (make test installs it): not on PATH")
		}
		t.Skip("promtool not on PATH; `make test` installs Debian's prometheus package")
	}
	cmd := exec.Command(path, "check", "metrics")
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

	writeFile(t, td.cfgPath, brokenConfig)
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

	writeFile(t, td.cfgPath, secondConfig)
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
	writeFile(t, td.cfgPath, brokenConfig)
	td.hup <- syscall.SIGHUP
	waitFor(t, func() bool { return metricValue(t, td, "llm_prober_config_last_reload_successful") == "0" })
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") {
		t.Errorf("old config not kept after SIGHUP with a broken file")
	}
	writeFile(t, td.cfgPath, secondConfig)
	td.hup <- syscall.SIGHUP
	waitFor(t, func() bool { return metricValue(t, td, "llm_prober_config_last_reload_successful") == "1" })
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
	writeFile(t, path, brokenConfig)
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
	writeFile(t, filepath.Join(dir, "key"), "sk-planted-secret-123456\n")
	writeFile(t, filepath.Join(dir, "c.yml"), goodConfig)
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
