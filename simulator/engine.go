package simulator

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// errQueueFull is returned when the waiting queue is at max_queue.
var errQueueFull = errors.New("simulated server overloaded: waiting queue is full")

// engine is the protocol-independent model of an inference engine doing
// continuous batching: at most maxRunning sequences decode together, the
// rest wait in a FIFO queue, and every running sequence holds KV-cache
// tokens (prompt + generated so far).
type engine struct {
	lat   LatencyConfig
	sched SchedulerConfig

	mu      sync.Mutex
	running int
	kvHeld  int64
	queue   []*ticket
}

func newEngine(lat LatencyConfig, sched SchedulerConfig) *engine {
	return &engine{lat: lat, sched: sched}
}

// ticket is one sequence's place in the engine.
type ticket struct {
	e        *engine
	prompt   int64
	held     int64
	admitted chan struct{}
	// state, enqueued and queued are guarded by e.mu; queued is read
	// after admitted is closed.
	state    ticketState
	enqueued time.Time     // when it joined the queue (zero: admitted at once)
	queued   time.Duration // how long it waited in the queue
}

type ticketState int

const (
	ticketQueued ticketState = iota
	ticketRunning
	ticketReleased
)

// enqueue places a sequence in the engine: running at once when a slot and
// KV space are free and nobody waits, queued otherwise, or rejected when
// the queue is full.
func (e *engine) enqueue(promptTokens int) (*ticket, error) {
	t := &ticket{e: e, prompt: int64(promptTokens), admitted: make(chan struct{})}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 && e.canAdmitLocked(t) {
		e.admitLocked(t)
		return t, nil
	}
	if len(e.queue) >= e.sched.MaxQueue {
		return nil, errQueueFull
	}
	t.enqueued = time.Now()
	e.queue = append(e.queue, t)
	return t, nil
}

// canAdmitLocked keeps head-of-line order and lets a lone sequence in even
// when its prompt exceeds the KV capacity, so nothing waits forever.
func (e *engine) canAdmitLocked(t *ticket) bool {
	if e.running >= e.sched.MaxRunning {
		return false
	}
	return e.running == 0 || e.kvHeld+t.prompt <= int64(e.sched.KVCacheCapacityTokens)
}

func (e *engine) admitLocked(t *ticket) {
	t.state = ticketRunning
	t.held = t.prompt
	e.running++
	e.kvHeld += t.held
	close(t.admitted)
}

func (e *engine) admitWaitingLocked() {
	for len(e.queue) > 0 && e.canAdmitLocked(e.queue[0]) {
		t := e.queue[0]
		e.queue[0] = nil
		e.queue = e.queue[1:]
		t.queued = time.Since(t.enqueued)
		e.admitLocked(t)
	}
}

// wait blocks until the ticket runs. On cancellation the ticket leaves the
// queue (or its slot is given back) and ctx's error is returned.
func (t *ticket) wait(ctx context.Context) error {
	select {
	case <-t.admitted:
		return nil
	case <-ctx.Done():
		t.release()
		return ctx.Err()
	}
}

// addTokens accounts generated tokens in the KV cache.
func (t *ticket) addTokens(n int) {
	t.e.mu.Lock()
	if t.state == ticketRunning {
		t.held += int64(n)
		t.e.kvHeld += int64(n)
	}
	t.e.mu.Unlock()
}

// release frees the slot (or queue place); safe to call more than once.
func (t *ticket) release() {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	switch t.state {
	case ticketQueued:
		for i, q := range e.queue {
			if q == t {
				e.queue = append(e.queue[:i], e.queue[i+1:]...)
				break
			}
		}
		// Our leaving may unblock the head of the queue.
		e.admitWaitingLocked()
	case ticketRunning:
		e.running--
		e.kvHeld -= t.held
		e.admitWaitingLocked()
	}
	t.state = ticketReleased
}

// engineState is a consistent snapshot for /metrics.
type engineState struct {
	running, waiting int
	kvUsage          float64
}

func (e *engine) state() engineState {
	e.mu.Lock()
	defer e.mu.Unlock()
	u := float64(e.kvHeld) / float64(e.sched.KVCacheCapacityTokens)
	// Real engines preempt instead of overflowing; the gauge stays a ratio.
	u = min(u, 1)
	return engineState{running: e.running, waiting: len(e.queue), kvUsage: u}
}

// prefillTime is the time from admission to the first token.
func (e *engine) prefillTime(promptTokens int, rng *rand.Rand) time.Duration {
	d := e.lat.TTFTBase + time.Duration(promptTokens)*e.lat.PrefillPerToken
	return jitter(d, e.lat.Jitter, rng)
}

// decodeTime is the time to decode one token now: continuous batching
// makes every step slower as the batch grows.
func (e *engine) decodeTime(rng *rand.Rand) time.Duration {
	e.mu.Lock()
	running := e.running
	e.mu.Unlock()
	d := e.lat.DecodeBase + time.Duration(max(running-1, 0))*e.lat.DecodePerRunning
	return jitter(d, e.lat.Jitter, rng)
}

// jitter scales d by a factor uniform in [1-j, 1+j]; it always draws once
// so the random sequence does not depend on j.
func jitter(d time.Duration, j float64, rng *rand.Rand) time.Duration {
	f := 1 + j*(2*rng.Float64()-1)
	return time.Duration(float64(d) * f)
}
