package main

import (
	"bytes"
	"context"
	"testing"
)

// TestAnswerExamplesLoad: the examples for assertions, reasoning models
// and rate-limit headroom pass check-config.
func TestAnswerExamplesLoad(t *testing.T) {
	for _, example := range []string{"canary.yml", "reasoning.yml", "hosted-ratelimit.yml", "tracing.yml"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check-config", "../../examples/" + example}, &stdout, &stderr); code != 0 {
			t.Errorf("example config %s: exit %d: %s", example, code, stderr.String())
		}
	}
}
