// Package simtest runs the simulator on loopback for other packages'
// tests, so each of them measures against the same real server without
// writing out its start and shutdown again.
package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/simulator"
)

// Sim is a running simulator.
type Sim struct {
	// URL is the HTTP base, e.g. http://127.0.0.1:40213.
	URL string
	// GRPCAddr is the Triton gRPC address (host:port); empty unless
	// started with StartWithGRPC.
	GRPCAddr string
	Server   *simulator.Server
}

// Start serves cfg over HTTP on a loopback port until the test ends; a
// serve error fails the test.
func Start(t testing.TB, cfg simulator.Config) *Sim {
	t.Helper()
	return start(t, cfg, false)
}

// StartWithGRPC also serves Triton's gRPC API on its own loopback port.
func StartWithGRPC(t testing.TB, cfg simulator.Config) *Sim {
	t.Helper()
	return start(t, cfg, true)
}

func start(t testing.TB, cfg simulator.Config, withGRPC bool) *Sim {
	t.Helper()
	srv, err := simulator.New(cfg, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	hl := listen()
	s := &Sim{URL: "http://" + hl.Addr().String(), Server: srv}
	serves := []func(context.Context) error{func(ctx context.Context) error { return srv.Serve(ctx, hl) }}
	if withGRPC {
		gl := listen()
		s.GRPCAddr = gl.Addr().String()
		serves = append(serves, func(ctx context.Context) error { return srv.ServeGRPC(ctx, gl) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(serves))
	for _, serve := range serves {
		go func() { done <- serve(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range serves {
			if err := <-done; err != nil {
				t.Errorf("simulator: %v", err)
			}
		}
	})
	return s
}

// GroundTruth fetches the simulator's record of request id from the
// simulator at baseURL, waiting up to 5 s for the request to complete.
func GroundTruth(t testing.TB, baseURL, id string) simulator.RequestRecord {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/debug/requests/%s?wait=5s", baseURL, id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ground truth for %s: %d %s", id, resp.StatusCode, b)
	}
	var rec simulator.RequestRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("ground truth for %s: %v", id, err)
	}
	return rec
}
