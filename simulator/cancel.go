package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// What the server does with a running request's slot when its client
// goes away mid-answer (docs/simulator.md, "Slots of cancelled requests"):
// free it at once as vLLM does (the default), after a delay, or never (a
// leak, the bug a cancellation probe catches). The slot is what
// vllm:num_requests_running (and every other naming's running gauge)
// counts, so the prober's llm_server_requests_running shows it.

// Values of faults.disconnect_release and the X-Sim-Options key
// disconnect_release besides a duration.
const (
	DisconnectReleaseLeak = "leak"
	optDisconnectRelease  = "disconnect_release"
)

// slotRelease is what happens to a disconnected request's slot.
type slotRelease struct {
	set   bool // given (by config or header); unset means at once
	leak  bool
	delay time.Duration
}

// parseSlotRelease reads "leak" or a duration in [0, maxFaultDuration];
// "" is the default, at once.
func parseSlotRelease(v string) (slotRelease, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return slotRelease{}, nil
	case DisconnectReleaseLeak:
		return slotRelease{set: true, leak: true}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxFaultDuration {
		return slotRelease{}, fmt.Errorf("%s=%q: want leak or a duration in [0, %s]", optDisconnectRelease, v, maxFaultDuration)
	}
	return slotRelease{set: true, delay: d}, nil
}

// slots holds the slots of disconnected requests not yet given back:
// leaked ones until FreeLeakedSlots, delayed ones until their timer.
type slots struct {
	mu      sync.Mutex
	held    map[*ticket]*truthEntry
	pending map[*ticket]pendingSlot
}

// pendingSlot is a slot whose delayed release has not come yet.
type pendingSlot struct {
	timer *time.Timer
	entry *truthEntry
}

// releaseSlot gives back j's ticket once the request is over. A request
// whose client went away while it held a running slot follows its
// slotRelease; ground truth records when the disconnect was noticed and
// when the slot was freed.
func (s *Server) releaseSlot(j *job, outcome string) {
	t := j.ticket
	if !t.isRunning() {
		t.release() // a queue place, or nothing
		return
	}
	now := time.Now()
	if outcome != outcomeClientGone {
		t.release()
		j.entry.update(func(r *RequestRecord) { r.SlotReleasedUnixNano = time.Now().UnixNano() })
		return
	}
	policy := j.p.opts.disconnectRelease
	if !policy.set {
		policy, _ = parseSlotRelease(s.cfg.Faults.DisconnectRelease) // validated
	}
	j.entry.update(func(r *RequestRecord) { r.DisconnectUnixNano = now.UnixNano() })
	free := func() {
		t.release()
		j.entry.update(func(r *RequestRecord) {
			r.SlotReleasedUnixNano = time.Now().UnixNano()
			r.SlotLeaked = false
		})
	}
	switch {
	case policy.leak:
		s.slots.mu.Lock()
		if s.slots.held == nil {
			s.slots.held = map[*ticket]*truthEntry{}
		}
		s.slots.held[t] = j.entry
		s.slots.mu.Unlock()
		j.entry.update(func(r *RequestRecord) { r.SlotLeaked = true })
		s.logger.Debug("leaking the slot of a disconnected request", "request_id", j.p.id)
	case policy.delay > 0:
		s.slots.mu.Lock()
		if s.slots.pending == nil {
			s.slots.pending = map[*ticket]pendingSlot{}
		}
		s.slots.pending[t] = pendingSlot{entry: j.entry, timer: time.AfterFunc(policy.delay, func() {
			s.slots.mu.Lock()
			_, ok := s.slots.pending[t]
			delete(s.slots.pending, t)
			s.slots.mu.Unlock()
			if ok {
				free()
			}
		})}
		s.slots.mu.Unlock()
	default:
		free()
	}
}

// releaseOnPanic, deferred once a job holds its ticket, gives the slot
// back when serving the request panics: a bug must not look like a leak.
func (j *job) releaseOnPanic() {
	if r := recover(); r != nil {
		j.ticket.release()
		panic(r)
	}
}

// FreeLeakedSlots gives back every slot held for a disconnected request,
// leaked or waiting for its delayed release, and returns how many: tests
// reset the server with it (also POST /debug/slots/release).
func (s *Server) FreeLeakedSlots() int {
	s.slots.mu.Lock()
	held := s.slots.held
	pending := s.slots.pending
	s.slots.held, s.slots.pending = nil, nil
	s.slots.mu.Unlock()
	n := 0
	now := time.Now().UnixNano()
	for t, e := range held {
		t.release()
		e.update(func(r *RequestRecord) {
			r.SlotReleasedUnixNano = now
			r.SlotLeaked = false
		})
		n++
	}
	for t, p := range pending {
		p.timer.Stop()
		t.release()
		p.entry.update(func(r *RequestRecord) { r.SlotReleasedUnixNano = now })
		n++
	}
	return n
}

// HeldSlots is how many slots of disconnected requests are leaked or
// waiting for their delayed release.
func (s *Server) HeldSlots() int {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return len(s.slots.held) + len(s.slots.pending)
}

func (s *Server) handleFreeSlots(w http.ResponseWriter, _ *http.Request) {
	n := s.FreeLeakedSlots()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"released": n})
}

// isRunning reports whether the ticket holds a running slot.
func (t *ticket) isRunning() bool {
	t.e.mu.Lock()
	defer t.e.mu.Unlock()
	return t.state == ticketRunning
}
