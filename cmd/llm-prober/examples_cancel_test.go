package main

import (
	"bytes"
	"context"
	"testing"
)

// TestCancellationExampleLoads: the cancellation probes' example passes
// check-config.
func TestCancellationExampleLoads(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "../../examples/cancellation.yml"}, &stdout, &stderr); code != 0 {
		t.Errorf("example config cancellation.yml: exit %d: %s", code, stderr.String())
	}
}
