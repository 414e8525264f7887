package simulator

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

func TestMetrics(t *testing.T) {
	cfg := fastConfig()
	cfg.Metrics.LegacyNames = true
	ts := startServer(t, cfg)
	for _, id := range []string{"m-1", "m-2"} {
		resp := ts.post(t, "/v1/chat/completions", chatBody(4, map[string]any{"ignore_eos": true}), "X-Request-Id", id)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A truncated stream counts as aborted.
	resp := ts.post(t, "/v1/completions", completionBody(4, map[string]any{"ignore_eos": true}), HeaderFault, "truncate:after=1")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = ts.truth(t, "m-2")

	// What testutil.GatherAndLint does, without its diff dependency
	// (not in go.mod): the registry, then the text /metrics serves, as
	// promtool check metrics reads it.
	mfs, err := ts.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	code, body := ts.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	textProblems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(problems, textProblems...) {
		// vLLM's names are namespaced with a colon, which promlint (and
		// promtool) flag on real vLLM too; any other problem is ours.
		if strings.HasPrefix(p.Metric, "vllm:") && p.Text == "metric names should not contain ':'" {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	text := string(body)
	for _, want := range []string{
		`vllm:num_requests_running{engine="0",model_name="sim-llm"} 0`,
		`vllm:num_requests_waiting{engine="0",model_name="sim-llm"} 0`,
		`vllm:kv_cache_usage_perc{engine="0",model_name="sim-llm"} 0`,
		`vllm:gpu_cache_usage_perc{engine="0",model_name="sim-llm"} 0`,
		`vllm:generation_tokens_total{engine="0",model_name="sim-llm"} 9`,
		`vllm:prompt_tokens_total{engine="0",model_name="sim-llm"} 14`,
		`vllm:request_success_total{engine="0",finished_reason="length",model_name="sim-llm"} 2`,
		`vllm:request_success_total{engine="0",finished_reason="abort",model_name="sim-llm"} 1`,
		`vllm:time_to_first_token_seconds_count{engine="0",model_name="sim-llm"} 3`,
		`vllm:inter_token_latency_seconds_count{engine="0",model_name="sim-llm"} 6`,
		`vllm:time_per_output_token_seconds_count{engine="0",model_name="sim-llm"} 6`,
		`vllm:e2e_request_latency_seconds_count{engine="0",model_name="sim-llm"} 3`,
		`vllm:request_queue_time_seconds_bucket`,
		`vllm:request_prefill_time_seconds_bucket`,
		`vllm:request_decode_time_seconds_bucket`,
		`vllm:request_time_per_output_token_seconds_bucket`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestGracefulShutdown(t *testing.T) {
	t.Run("in-flight request finishes", func(t *testing.T) {
		cfg := fastConfig()
		cfg.Latency.DecodeBase = 10 * time.Millisecond
		ts := startServer(t, cfg)
		resp := ts.post(t, "/v1/chat/completions", chatBody(30, map[string]any{"ignore_eos": true}))
		ts.cancel()
		evs, err := readSSE(resp.Body)
		resp.Body.Close()
		if err != nil || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("stream cut by graceful shutdown: %v", err)
		}
		select {
		case err := <-ts.done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return")
		}
		ts.cancel = nil
		ts.client.CloseIdleConnections()
	})
	t.Run("grace period is bounded", func(t *testing.T) {
		cfg := fastConfig()
		cfg.ShutdownTimeout = 100 * time.Millisecond
		ts := startServer(t, cfg)
		resp := ts.post(t, "/v1/chat/completions", chatBody(5, map[string]any{"ignore_eos": true}), HeaderFault, "stall:for=1m")
		start := time.Now()
		ts.stop()
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("shutdown took %s", d)
		}
		_, err := readSSE(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Log("aborted stream ended without a read error")
		}
	})
	t.Run("ListenAndServe", func(t *testing.T) {
		srv, err := New(fastConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		// Find a free port, then let ListenAndServe bind it.
		addr := testutil.FreeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.ListenAndServe(ctx, addr) }()
		testutil.WaitFor(t, "the server to listen on "+addr, 10*time.Second, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := srv.ListenAndServe(context.Background(), "256.0.0.1:1"); err == nil {
			t.Fatal("bad address accepted")
		}
	})
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		testutil.WriteFile(t, p, content)
		return p
	}
	good := write("good.yml", `seed: 9
served_model_names: [m1, m2]
latency:
  ttft_base: 100ms
  decode_base: 20ms
scheduler:
  max_running: 4
faults:
  stall_rate: 0.5
`)
	cfg, err := LoadConfigFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 9 || cfg.ServedModelNames[1] != "m2" || cfg.Latency.TTFTBase != 100*time.Millisecond ||
		cfg.Latency.PrefillPerToken != DefaultConfig().Latency.PrefillPerToken || cfg.Scheduler.MaxRunning != 4 || cfg.Faults.StallRate != 0.5 {
		t.Fatalf("loaded %+v", cfg)
	}

	for _, tc := range []struct{ content, want string }{
		{"latency:\n  ttft_bse: 1s\n", "bad.yml:2: field ttft_bse not found"},
		{"seed: 1\nscheduler:\n  max_running: 0\n", "bad.yml:3: scheduler.max_running: must be between 1 and 65536, got 0"},
		{"faults:\n  reset_rate: 2\n", "bad.yml:2: faults.reset_rate: must be between 0 and 1, got 2"},
		{"served_model_names: [a, a]\n", "bad.yml:1: served_model_names[1]: duplicate name"},
		{"latency: [1\n", "bad.yml:"},
		{"latency:\n  jitter: lots\n", "bad.yml:2:"},
	} {
		p := write("bad.yml", tc.content)
		_, err := LoadConfigFile(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.content, err, tc.want)
		}
	}
	if _, err := LoadConfigFile(filepath.Join(dir, "missing.yml")); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Error("New accepted a zero Config")
	}
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sim.yml")
	testutil.WriteFile(t, p, "latency:\n  decode_base: 20ms\n  ttft_base: 99ms\nseed: 5\n")
	parse := func(args ...string) (*Flags, error) {
		app := kingpin.New("test", "")
		cmd := app.Command("simulate", "")
		f := RegisterFlags(cmd)
		_, err := app.Parse(append([]string{"simulate"}, args...))
		return f, err
	}
	f, err := parse("--config.file", p, "--latency.decode-base", "3ms", "--fault.reset-rate", "0.25", "--model", "x", "--model", "y")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	// Flag beats file, file beats default, unset flag does not hide file.
	if cfg.Latency.DecodeBase != 3*time.Millisecond || cfg.Latency.TTFTBase != 99*time.Millisecond || cfg.Seed != 5 ||
		cfg.Faults.ResetRate != 0.25 || strings.Join(cfg.ServedModelNames, ",") != "x,y" || f.Listen != DefaultListenAddress {
		t.Fatalf("config %+v listen %s", cfg, f.Listen)
	}

	f, err = parse("--fault.stall-rate", "3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Config(); err == nil || !strings.Contains(err.Error(), "faults.stall_rate") {
		t.Fatalf("invalid flag value: %v", err)
	}
	f, err = parse("--config.file", filepath.Join(dir, "none.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Config(); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
