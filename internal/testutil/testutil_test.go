package testutil_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// The test binary doubles as the child process of the process tests.
func TestMain(m *testing.M) {
	switch os.Getenv("TESTUTIL_CHILD") {
	case "":
		os.Exit(m.Run())
	case "exit":
		fmt.Println("hello from the child")
		fmt.Fprintln(os.Stderr, "and its stderr")
		os.Exit(3)
	case "serve":
		http.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Ready") })
		fmt.Println("serving")
		_ = http.ListenAndServe(os.Getenv("TESTUTIL_ADDR"), nil)
		os.Exit(1)
	}
}

// fatalTB records a helper's failure instead of failing the test.
type fatalTB struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// failure runs fn with a fatalTB and returns its failure message ("" when
// it did not fail).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}

func TestSyncBuffer(t *testing.T) {
	var b testutil.SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&b, "line\n")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if b.Count("line\n") != 800 || b.Len() != 800*5 {
		t.Errorf("%d lines, %d bytes, want 800 and 4000", b.Count("line\n"), b.Len())
	}
	b.Reset()
	if b.String() != "" {
		t.Errorf("after Reset: %q", b.String())
	}
}

const exposition = `# TYPE llm_probe_requests_total counter
llm_probe_requests_total{outcome="success",probe="a",target="t"} 3
llm_probe_requests_total{outcome="timeout",probe="a",target="t"} 1
llm_probe_requests_total{outcome="success",probe="b",target="t"} 5
# TYPE llm_probe_in_flight_requests gauge
llm_probe_in_flight_requests{probe="a"} 2
llm_probe_in_flight_requests{probe="b"} 0
# TYPE llm_probe_ttft_seconds histogram
llm_probe_ttft_seconds_bucket{le="+Inf"} 7
llm_probe_ttft_seconds_sum 1.5
llm_probe_ttft_seconds_count 7
vllm:request_success_total{model_name="m"} 4
`

func TestScrapeSumAndSampleLine(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, exposition)
	}))
	defer ts.Close()
	mfs := testutil.Scrape(t, ts.URL)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"llm_probe_requests_total", nil, 9},
		{"llm_probe_requests_total", []string{"probe", "a"}, 4},
		{"llm_probe_requests_total", []string{"probe", "a", "outcome", "success"}, 3},
		{"llm_probe_requests_total", []string{"probe", "c"}, 0},
		{"llm_probe_requests_total", []string{"model", "x"}, 0},
		{"llm_probe_in_flight_requests", nil, 2},
		{"vllm:request_success_total", nil, 4},
		{"llm_probe_ttft_seconds", nil, 0},
		{"no_such_metric", nil, 0},
	} {
		if got := mfs.Sum(c.name, c.labels...); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if s := mfs.Series("llm_probe_requests_total", "outcome", "success"); len(s) != 2 || testutil.Label(s[1], "probe") != "b" {
		t.Errorf("Series: %v", s)
	}
	if v, n := testutil.SampleLine(exposition, `llm_probe_in_flight_requests{probe="a"}`); v != "2" || n != 1 {
		t.Errorf("SampleLine: %q %d times", v, n)
	}
	if _, n := testutil.SampleLine(exposition, `llm_probe_in_flight_requests`); n != 0 {
		t.Errorf("SampleLine matched a prefix %d times", n)
	}
}

func TestGetMetricsErrors(t *testing.T) {
	var body atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b := body.Load().(string)
		if b == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, b)
	}))
	defer ts.Close()
	body.Store("")
	if _, err := testutil.GetMetrics(nil, ts.URL); err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("503: %v", err)
	}
	body.Store("a{ 1\n")
	if _, err := testutil.GetMetrics(ts.Client(), ts.URL); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("bad exposition: %v", err)
	}
	if msg := failure(t, func(tb testing.TB) { testutil.Scrape(tb, ts.URL) }); !strings.Contains(msg, "does not parse") {
		t.Errorf("Scrape's failure: %q", msg)
	}
}

func TestPollAndWaitFor(t *testing.T) {
	n := 0
	testutil.Poll(t, "three calls", time.Second, time.Millisecond, func() (bool, string) { n++; return n == 3, "" })
	if n != 3 {
		t.Errorf("%d calls", n)
	}
	start := time.Now()
	msg := failure(t, func(tb testing.TB) {
		testutil.Poll(tb, "the impossible", 100*time.Millisecond, 20*time.Millisecond, func() (bool, string) { return false, "still not" })
	})
	if !strings.HasPrefix(msg, "waited ") || !strings.HasSuffix(msg, " for the impossible: still not") {
		t.Errorf("failure %q", msg)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %s, want about 100ms", took)
	}
	msg = failure(t, func(tb testing.TB) {
		testutil.WaitFor(tb, "nothing", 30*time.Millisecond, func() bool { return false })
	})
	if !strings.Contains(msg, "for nothing") {
		t.Errorf("WaitFor's failure: %q", msg)
	}
}

func TestWaitReady(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/-/ready" || calls.Add(1) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	defer ts.Close()
	testutil.WaitReady(t, ts.URL)
	if calls.Load() != 3 {
		t.Errorf("%d calls, want 3", calls.Load())
	}
}

func TestListenFreeAddrAndHungServer(t *testing.T) {
	l := testutil.Listen(t)
	if !strings.HasPrefix(l.Addr().String(), "127.0.0.1:") {
		t.Errorf("listening on %s", l.Addr())
	}
	addr := testutil.FreeAddr(t)
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr %s not free: %v", addr, err)
	}
	l2.Close()

	ts, arrived := testutil.HungServer(t)
	c := &http.Client{Timeout: 100 * time.Millisecond}
	if resp, err := c.Get(ts.URL + "/metrics"); err == nil {
		resp.Body.Close()
		t.Error("the hung server answered")
	}
	if arrived.Load() != 1 {
		t.Errorf("arrived %d, want 1", arrived.Load())
	}
}

func TestSelfSignedCert(t *testing.T) {
	c := testutil.SelfSignedCert(t)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{c.Cert}}
	ts.StartTLS()
	defer ts.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.Pool}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
		t.Errorf("PEM pair: %v", err)
	}
}

func TestWriteConfigAndRepoRoot(t *testing.T) {
	path := testutil.WriteConfig(t, "targets: []\n", map[string]string{"key": "sk-x\n"})
	for name, want := range map[string]string{"llm-prober.yml": "targets: []\n", "key": "sk-x\n"} {
		p := filepath.Join(filepath.Dir(path), name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v", name, fi.Mode(), err)
		}
	}
	root := testutil.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "testutil", "testutil.go")); err != nil {
		t.Errorf("RepoRoot %s: %v", root, err)
	}
}

func child(t *testing.T, mode string, env ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "TESTUTIL_CHILD="+mode), env...)
	return cmd
}

func TestProcess(t *testing.T) {
	p := testutil.StartProcess(t, "exiting child", child(t, "exit"))
	exited, err := p.Wait(time.Minute)
	var exit *exec.ExitError
	if !exited || !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exited %v, err %v; want exit status 3", exited, err)
	}
	if out := p.Output(); !strings.Contains(out, "hello from the child") || !strings.Contains(out, "and its stderr") {
		t.Errorf("output %q", out)
	}
	if tail := p.Tail(1); tail != "…\nand its stderr" {
		t.Errorf("Tail(1) = %q", tail)
	}

	msg := failure(t, func(tb testing.TB) {
		testutil.StartProcess(tb, "short-lived child", child(t, "exit")).WaitReady(tb, "http://"+testutil.FreeAddr(t))
	})
	if !strings.Contains(msg, "short-lived child exited (exit status 3)") || !strings.Contains(msg, "hello from the child") {
		t.Errorf("waiting on a child that exits: %q", msg)
	}

	addr := testutil.FreeAddr(t)
	p = testutil.StartProcess(t, "serving child", child(t, "serve", "TESTUTIL_ADDR="+addr))
	p.WaitReady(t, "http://"+addr)
	p.Stop()
	if exited, _ := p.Wait(0); !exited {
		t.Error("still running after Stop")
	}
}

func TestBuildBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llm-prober")
	}
	bin := testutil.BuildBinary(t)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "llm-prober, version") {
		t.Errorf("%s --version: %v\n%s", bin, err, out)
	}
	if again := testutil.BuildBinary(t); again != bin && strings.Contains(bin, "go-build") {
		t.Errorf("built twice under go test: %s, then %s", bin, again)
	}
}
