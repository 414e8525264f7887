package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/llm-prober/llm-prober/simulator"
)

// simProcess is `llm-prober simulate` running as a child process, so its
// CPU is not in this process's rusage.
type simProcess struct {
	url string
	cmd *exec.Cmd
	dir string
	// client fetches ground truth; it is separate from the clients under
	// test and only used outside the measured windows.
	client *http.Client
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startSimulator starts `llm-prober simulate` with decode per token and
// any extra flags.
func startSimulator(ctx context.Context, o options, decode time.Duration, extra ...string) (*simProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "llm-prober-perf-")
	if err != nil {
		return nil, err
	}
	// Ground truth must hold every request of a measured window until it
	// has been fetched (back to back at 64 streams: a few thousand/s).
	cfgFile := filepath.Join(dir, "sim.yml")
	if err := os.WriteFile(cfgFile, []byte("ground_truth: {capacity: 40000, max_chunks_per_request: 512}\n"), 0o600); err != nil {
		return nil, err
	}
	args := []string{"simulate",
		"--listen", addr, "--grpc-listen=", "--config.file", cfgFile,
		"--log.level=warn",
		"--latency.ttft-base=" + o.ttft.String(),
		"--latency.decode-base=" + decode.String(),
		// No slowdown with load: every step gets the same token cadence.
		"--latency.decode-per-running=0",
		"--scheduler.max-running=1024",
		"--scheduler.max-queue=4096",
		"--scheduler.kv-cache-capacity-tokens=1000000",
		"--output.tokens-per-chunk=1",
	}
	cmd := exec.CommandContext(ctx, o.bin, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	s := &simProcess{url: "http://" + addr, cmd: cmd, dir: dir,
		client: &http.Client{Timeout: 30 * time.Second}}
	if err := waitHTTP(ctx, s.url+"/health", 10*time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("simulator: %w", err)
	}
	return s, nil
}

func (s *simProcess) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// groundTruth fetches the simulator's record of one request.
func (s *simProcess) groundTruth(id string) (simulator.RequestRecord, error) {
	var rec simulator.RequestRecord
	resp, err := s.client.Get(s.url + "/debug/requests/" + id + "?wait=5s")
	if err != nil {
		return rec, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return rec, errNoTruth
	}
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("ground truth %s: HTTP %d", id, resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&rec)
	return rec, err
}
