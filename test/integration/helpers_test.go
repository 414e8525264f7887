// Package integration drives the real probe drivers against the real
// simulator over loopback and checks the prober's numbers against the
// simulator's ground truth.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sim struct {
	url string
}

// startSimulator serves cfg on a loopback port until the test ends.
func startSimulator(t *testing.T, cfg simulator.Config) *sim {
	t.Helper()
	srv, err := simulator.New(cfg, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simulator: %v", err)
		}
	})
	return &sim{url: "http://" + l.Addr().String()}
}

func newDriver(t *testing.T, protocol string, opts probe.TargetOptions) probe.Driver {
	t.Helper()
	d, err := probe.NewDriver(protocol, opts, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// groundTruth fetches the simulator's record of one request, waiting for it
// to be complete.
func (s *sim) groundTruth(t *testing.T, id string) simulator.RequestRecord {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/debug/requests/%s?wait=5s", s.url, id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("ground truth for %s: %d %s", id, resp.StatusCode, b)
	}
	var rec simulator.RequestRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// probeOnce sends a short streamed probe with a bounded deadline.
func probeOnce(d probe.Driver, maxTokens int, timeout time.Duration) *probe.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Probe(ctx, &probe.Request{
		Prompt:    "tell me about lighthouses",
		MaxTokens: maxTokens,
		IgnoreEOS: true,
		Stream:    true,
	})
}
