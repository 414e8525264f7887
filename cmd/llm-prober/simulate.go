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
	if err := srv.ListenAndServe(ctx, flags.Listen); err != nil {
		logger.Error("Simulator stopped", "err", err)
		return 1
	}
	return 0
}
