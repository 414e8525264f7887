// Package testutil holds the helpers the project's tests share: a
// goroutine-safe buffer, loopback addresses and servers, files, waiting with
// a deadline, scraping and reading /metrics, building and running the
// llm-prober binary, and finding the external tools some tests need.
//
// It is a normal package so that the tests of any package can import it; it
// imports no package of this module, so that none of them (collector
// included) gets an import cycle through it. Helpers for the simulator
// itself (starting one in-process, its ground truth) are in
// simulator/simtest.
//
// Every helper that can fail takes a testing.TB, marks itself a helper,
// cleans up with t.Cleanup and says in its failure what it waited for.
package testutil

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: a log sink that
// goroutines (or a child process's output) write while the test reads it.
// The zero value is ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is the number of bytes written so far.
func (b *SyncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// Count is how often substr occurs in what was written so far.
func (b *SyncBuffer) Count(substr string) int { return strings.Count(b.String(), substr) }
