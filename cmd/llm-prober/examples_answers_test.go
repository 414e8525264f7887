package main

import (
	"bytes"
	"context"
	"testing"
)

// TestAnswerExamplesLoad: the examples for assertions, reasoning models
// rate-limit headroom and the prefix cache pass check-config.
func TestAnswerExamplesLoad(t *testing.T) {
	for _, example := range []string{"canary.yml", "reasoning.yml", "hosted-ratelimit.yml", "tracing.yml", "prefix-cache.yml"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check-config", "../../examples/" + example}, &stdout, &stderr); code != 0 {
			t.Errorf("example config %s: exit %d: %s", example, code, stderr.String())
		}
	}
}
