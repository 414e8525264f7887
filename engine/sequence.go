package engine

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
	"github.com/llm-prober/llm-prober/workload"
)

// Cache says whether a request of a sequence found the server's prefix
// cache cold (the first of its run) or warm (every later one: the same
// system prompt, or the conversation so far, was just sent).
const (
	CacheCold = collector.PrefixCold
	CacheWarm = collector.PrefixWarm
)

// Step is one request of a sequence and whether it was the cold one.
type Step struct {
	Sent
	Cache string
}

// SequenceSink is a Sink that also takes each sequence a session or
// shared_prefix probe ran, once its last request is recorded.
type SequenceSink interface {
	Sink
	RecordSequence(target, probe string, steps []Step)
}

// Sequence reports whether each run of the probe sends several requests.
func (p *Probe) Sequence() bool { return p.Session != nil || p.SharedPrefix != nil }

// SequenceRun is one run of a session or shared_prefix probe: Next sends its
// requests one after the other, each after the previous one's answer.
type SequenceRun struct {
	p *Probe
	n int
	i int
	// conv is a session's conversation so far, the last answer included.
	conv []probe.Message
	// responseID is the last turn's ResponseID when the session chains
	// turns by previous_response_id.
	responseID string
	// prefix is a shared_prefix run's system prompt.
	prefix  string
	stopped bool
}

// NewSequence starts a run of a session or shared_prefix probe; for a
// shared_prefix probe it draws the run's own system prompt.
func (p *Probe) NewSequence() *SequenceRun {
	s := &SequenceRun{p: p}
	switch {
	case p.Session != nil:
		s.n = p.Session.Turns
	case p.SharedPrefix != nil:
		s.n = p.SharedPrefix.Requests
		rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		s.prefix = workload.RandomText(p.SharedPrefix.Tokens, rng)
	default:
		s.n = 1
	}
	return s
}

// Done reports whether the run has no request left: all were sent, a
// session's turn failed (the next turn needs its answer), or ctx ended.
func (s *SequenceRun) Done(ctx context.Context) bool {
	return s.i >= s.n || s.stopped || ctx.Err() != nil
}

// Next sends the run's next request; release and at are SendAt's, for the
// first request (a burst's release).
func (s *SequenceRun) Next(ctx context.Context, release <-chan struct{}, at time.Time) Step {
	p := s.p
	draw := p.Workload.Draw(p.Model)
	req := draw.Request
	req.CaptureAnswer = len(p.Assert) > 0
	switch {
	case p.Session != nil:
		// Each turn resends the conversation: earlier turns' messages and
		// answers, then this turn's user message (without the workload's
		// system prompt, which the first turn already carries).
		msgs := req.Messages
		if len(s.conv) > 0 && len(msgs) > 0 && msgs[0].Role == "system" {
			msgs = msgs[1:]
		}
		req.Messages = append(slices.Clip(s.conv), msgs...)
		if s.responseID != "" {
			// Chained (session.previous_response_id): the server
			// holds the conversation; only the new message goes.
			req.Messages = msgs
			req.Extra = maps.Clone(req.Extra)
			if req.Extra == nil {
				req.Extra = map[string]any{}
			}
			req.Extra["previous_response_id"] = s.responseID
		}
		req.Prompt, req.Bodies = "", nil
		req.CaptureAnswer = true
		draw.InputTokens = 0 // the conversation grows; no target length
	case s.prefix != "":
		system := s.prefix
		msgs := req.Messages
		if len(msgs) > 0 && msgs[0].Role == "system" {
			system += "\n" + msgs[0].Content
			msgs = msgs[1:]
		}
		req.Messages = append([]probe.Message{{Role: "system", Content: system}}, msgs...)
		if req.Prompt != "" {
			req.Prompt = s.prefix + "\n" + req.Prompt
		}
		req.Bodies = nil
		if draw.InputTokens > 0 {
			draw.InputTokens += p.SharedPrefix.Tokens
		}
	}
	if s.i > 0 {
		release = nil
	}
	sent := p.send(ctx, draw, release, at)
	step := Step{Sent: sent, Cache: CacheWarm}
	if s.i == 0 {
		step.Cache = CacheCold
	}
	s.i++
	if p.Session != nil {
		res := sent.Result
		if res.Outcome != probe.OutcomeSuccess || res.AnswerTruncated {
			s.stopped = true
		} else {
			if s.responseID != "" {
				// What was sent is this turn alone; the conversation
				// is the one kept here.
				s.conv = append(slices.Clip(s.conv), req.Messages...)
			} else {
				s.conv = slices.Clip(req.Messages)
			}
			s.conv = append(s.conv, probe.Message{Role: "assistant", Content: res.Answer})
			if p.Session.PreviousResponseID {
				// Without an id (the server named none) the next
				// turn resends the conversation instead.
				s.responseID = res.ResponseID
			}
		}
		if len(p.Assert) == 0 {
			// Kept for the next turn only, as a probe without assertions
			// never keeps answers.
			res.Answer = ""
		}
	}
	return step
}

// runSequence is a scheduled run of a session or shared_prefix probe:
// its requests one after another, each counted as scheduled and in
// flight on its own (scheduled = requests + skipped + in flight holds as
// for single requests) and recorded as soon as it finished; then the
// whole run goes to the SequenceSinks. The first request takes the
// ticket's release and its schedule lag. It reports whether every
// request succeeded.
func (e *Engine) runSequence(ctx context.Context, tk schedule.Ticket, p *Probe, lengths *lengthCheck, health *transitions, logger *slog.Logger) bool {
	run := p.NewSequence()
	var steps []Step
	ok := true
	for !run.Done(ctx) {
		e.metrics.Scheduled(p.Target, p.Name)
		e.metrics.InFlight(p.Target, p.Name, 1)
		step := run.Next(ctx, tk.Release(), tk.Planned)
		if len(steps) == 0 {
			tk.Sent(step.Result.Start)
			e.metrics.ObserveScheduleLag(p.Target, p.Name, max(step.Result.Start.Sub(tk.Planned), 0))
		}
		ok = e.record(p, step.Sent, lengths, health, logger) && ok
		e.metrics.InFlight(p.Target, p.Name, -1)
		steps = append(steps, step)
	}
	for _, s := range e.sinks {
		if ss, isSeq := s.(SequenceSink); isSeq {
			ss.RecordSequence(p.Target, p.Name, steps)
		}
	}
	return ok && len(steps) > 0
}
