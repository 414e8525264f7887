package simulator

import (
	"context"
	"sync"
	"time"
)

// modelResidency simulates a model loaded on demand, as Ollama's scheduler
// does (server/sched.go): the first request loads the model, requests
// that arrive during the load wait for the same load, and a model idle for
// keep_alive (OLLAMA_KEEP_ALIVE, 5m by default) is unloaded, so the next
// request pays the load again. Ollama reports the wait as load_duration
// (server/routes.go: checkpointLoaded - checkpointStart).
//
// With no load delay configured the model is always resident, and only
// the model_load fault makes a request wait.
type modelResidency struct {
	delay, keepAlive time.Duration

	mu        sync.Mutex
	loaded    bool
	loading   chan struct{} // closed when the load in progress ends
	active    int           // requests holding the model
	idleSince time.Time
}

func newModelResidency(c FaultConfig) *modelResidency {
	return &modelResidency{delay: c.ModelLoadDelay, keepAlive: c.ModelKeepAlive}
}

// acquire makes the model resident for one request and returns how long
// the request waited for a load (0 when the model was resident), and the function that gives the model back
// when the request is over (nil on error). forced, when positive, is a
// load this request pays on its own (the model_load fault), as if the
// model had been unloaded just before it. An error is ctx's: the request
// left while waiting.
func (m *modelResidency) acquire(ctx context.Context, forced time.Duration) (time.Duration, func(), error) {
	start := time.Now()
	var waited time.Duration // 0 unless a load was waited for
	if forced > 0 {
		if !sleepUntil(ctx, start.Add(forced)) {
			return time.Since(start), nil, ctx.Err()
		}
		waited = time.Since(start)
	}
	if m.delay <= 0 {
		return waited, func() {}, nil
	}
	m.mu.Lock()
	m.active++
	now := time.Now()
	if m.loaded && m.active == 1 && m.keepAlive >= 0 && now.Sub(m.idleSince) >= m.keepAlive {
		m.loaded = false // expired while idle
	}
	var wait chan struct{}
	if !m.loaded {
		if m.loading == nil {
			ch := make(chan struct{})
			m.loading = ch
			time.AfterFunc(m.delay, func() {
				m.mu.Lock()
				m.loaded = true
				m.loading = nil
				m.mu.Unlock()
				close(ch)
			})
		}
		wait = m.loading
	}
	m.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
			waited = time.Since(start)
		case <-ctx.Done():
			m.release()
			return time.Since(start), nil, ctx.Err()
		}
	}
	return waited, m.release, nil
}

// release gives the model back; the last request out starts the idle
// clock (keep_alive 0 unloads at once).
func (m *modelResidency) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active--
	if m.active == 0 {
		m.idleSince = time.Now()
	}
}
