package schedule

import (
	"slices"
	"sync"
	"time"
)

// Clock is the scheduler's source of time. Production uses the real clock;
// tests use a FakeClock so an hour of arrivals runs in milliseconds and
// nothing depends on how loaded the test machine is.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now. A d ≤ 0 fires
	// at once.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the scheduler uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// FakeClock is a Clock that moves only when told to. It is safe for
// concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// changed is closed (and replaced) whenever a timer is added, so
	// WaitForTimers can block without polling.
	changed chan struct{}
}

// NewFakeClock returns a fake clock reading now.
func NewFakeClock(now time.Time) *FakeClock {
	return &FakeClock{now: now, changed: make(chan struct{})}
}

type fakeTimer struct {
	c     *FakeClock
	when  time.Time
	ch    chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	t.fired = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(x *fakeTimer) bool { return x == t })
	return true
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing when the clock is advanced past d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

// Advance moves the clock forward by d, firing every timer due by then.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

// Step advances the clock to the earliest pending timer and fires it (and
// any due at the same instant). It returns false when no timer is pending.
func (c *FakeClock) Step() bool {
	earliest, ok := c.NextTimer()
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if earliest.After(c.now) {
		c.now = earliest
	}
	c.fireLocked()
	return true
}

func (c *FakeClock) fireLocked() {
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.when.After(c.now) {
			return false
		}
		t.fired = true
		t.ch <- t.when
		return true
	})
}

// NextTimer returns when the earliest pending timer fires.
func (c *FakeClock) NextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	earliest := c.timers[0].when
	for _, t := range c.timers[1:] {
		if t.when.Before(earliest) {
			earliest = t.when
		}
	}
	return earliest, true
}

// Timers returns how many timers are pending.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending, or until the
// real-time limit passes (then it returns false). Tests use it to know that
// the goroutines under test have gone to sleep before moving the clock.
func (c *FakeClock) WaitForTimers(n int, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		have, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}
