package testutil

import (
	"os"
	"runtime"
	"testing"
)

func TestRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	b, err := RSS(os.Getpid())
	if err != nil || b <= 0 {
		t.Fatalf("RSS of this process: %d, %v", b, err)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS of no process succeeded")
	}
}
