package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/llm-prober/llm-prober/simulator"
)

// simulate runs the built-in simulated LLM server until ctx ends.
func simulate(ctx context.Context, flags *simulator.Flags, logger *slog.Logger, stderr io.Writer) int {
	cfg, err := flags.Config()
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober simulate: %v\n", err)
		return 1
	}
	srv, err := simulator.New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober simulate: %v\n", err)
		return 1
	}
	logger.Info("Simulated LLM server listening", "address", flags.Listen)
	// Either listener failing stops the other.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	grpcErr := make(chan error, 1)
	if flags.GRPCListen != "" {
		go func() {
			err := srv.ListenAndServeGRPC(ctx, flags.GRPCListen)
			if err != nil {
				cancel()
			}
			grpcErr <- err
		}()
	} else {
		grpcErr <- nil
	}
	code := 0
	if err := srv.ListenAndServe(ctx, flags.Listen); err != nil {
		logger.Error("Simulator stopped", "err", err)
		code = 1
	}
	cancel()
	if err := <-grpcErr; err != nil {
		logger.Error("Simulator gRPC stopped", "err", err)
		code = 1
	}
	return code
}
