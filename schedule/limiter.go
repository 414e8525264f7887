package schedule

import "sync"

// Limiter bounds the requests in flight to one target across all its
// probes, so a burst on one probe cannot take every connection, goroutine
// and file descriptor the prober has. A nil *Limiter admits everything.
type Limiter struct {
	mu       sync.Mutex
	max, n   int
	released chan struct{}
}

// NewLimiter admits at most max concurrent holders; max ≤ 0 is no bound.
func NewLimiter(max int) *Limiter {
	if max <= 0 {
		return nil
	}
	return &Limiter{max: max, released: make(chan struct{})}
}

// TryAcquire takes a slot if one is free. It never waits: open-loop
// arrivals that find the target full are skipped, not queued.
func (l *Limiter) TryAcquire() bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.max {
		return false
	}
	l.n++
	return true
}

// Release returns a slot taken by TryAcquire.
func (l *Limiter) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	close(l.released)
	l.released = make(chan struct{})
}

// Released returns a channel closed at the next Release, for closed-loop
// workers that wait for the target rather than skip.
func (l *Limiter) Released() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// InFlight returns how many slots are taken.
func (l *Limiter) InFlight() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
