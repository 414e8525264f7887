// Package engine is the life of every configured probe: it turns a probe of
// the configuration into requests (workload), sends each through the
// target's driver within the probe's timeout, and hands the result on. The
// daemon (Engine: schedules, reload, sinks), the one-shot probe command and
// bench all send through Probe.Send, so how a probe is sent is written once.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/workload"
)

// Workload draws the next request of a probe; workload.Generator is the
// real one, tests give their own.
type Workload interface {
	Draw(model string) workload.Draw
}

// Probe is one configured probe ready to send.
type Probe struct {
	// Target, Name and Model label the probe's results.
	Target, Name, Model string
	// Protocol and Endpoint say where its requests go, for messages; the
	// endpoint may carry credentials in a query (display.Endpoint cleans
	// it for pages).
	Protocol, Endpoint string
	// Stream asks for streamed answers (the only ones with TTFT and ITL).
	Stream bool
	// Timeout bounds one request from start to its final event.
	Timeout  time.Duration
	Driver   probe.Driver
	Workload Workload
	// Assert checks each answer's text; a failure makes the result
	// wrong_answer. Without assertions the text is never kept.
	Assert probe.Assertions
	// Cancel, when set, cuts each stream and measures the server freeing
	// the slot (cancel.go); nil for other probes.
	Cancel *Cancel
	// closeRunning releases a reader of server metrics of the probe's own
	// (Open); nil otherwise.
	closeRunning func()
	// Session and SharedPrefix make each scheduled run a sequence of
	// requests (sequence.go); nil for a probe of one request per run.
	Session      *config.Session
	SharedPrefix *config.SharedPrefix
}

// Sent is one request of a probe and what came of it.
type Sent struct {
	// Draw is what the workload asked for, Request included, and, for
	// synthetic prompts, the input length it aimed at.
	Draw   workload.Draw
	Result *probe.Result
}

// Request is the request that was sent.
func (s Sent) Request() *probe.Request { return s.Draw.Request }

// Send draws the probe's next request and sends it within the probe's
// timeout (and ctx). The Result is never nil.
func (p *Probe) Send(ctx context.Context) Sent {
	return p.SendAt(ctx, nil, time.Time{})
}

// SendAt is Send for a request prepared ahead of its release: the request
// is drawn and built, and its connection made, now; it is written once
// release is closed, which the caller closes at at (a burst's planned
// time: schedule.Ticket.Release). The probe's timeout counts from at, not
// from now. A nil release is Send. A cancellation probe's SendAt returns
// once the server freed the cut request's slot, or its release timeout
// passed (outside the probe's timeout).
func (p *Probe) SendAt(ctx context.Context, release <-chan struct{}, at time.Time) Sent {
	draw := p.Workload.Draw(p.Model)
	draw.Request.CaptureAnswer = len(p.Assert) > 0
	return p.send(ctx, draw, release, at)
}

// send sends a drawn request as SendAt does.
func (p *Probe) send(ctx context.Context, draw workload.Draw, release <-chan struct{}, at time.Time) Sent {
	draw.Request.Stream = p.Stream
	outer := ctx
	var before reading
	if p.Cancel != nil && p.Stream {
		p.Cancel.arm(ctx, p.Target, draw.Request, &before)
	}
	var cancel context.CancelFunc
	if release == nil {
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
	} else {
		ctx, cancel = context.WithDeadline(probe.WithRelease(ctx, release), later(at, time.Now()).Add(p.Timeout))
	}
	defer cancel()
	res := p.Driver.Probe(ctx, draw.Request)
	p.Assert.Check(res)
	if res.Cancel != nil && p.Cancel != nil {
		// The driver has closed the stream.
		p.Cancel.measure(outer, p.Target, res, &before, time.Now())
	}
	return Sent{Draw: draw, Result: res}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// newProbe is a configured probe of t over driver d; a cancellation
// probe reads the server's running requests through running.
func newProbe(t *config.Target, pc *config.Probe, w *config.Workload, d probe.Driver, running RunningReader) *Probe {
	return &Probe{
		Target:       t.Name,
		Name:         pc.Name,
		Model:        pc.ModelFor(t),
		Protocol:     t.Protocol,
		Endpoint:     t.Endpoint(),
		Stream:       pc.Streaming(),
		Timeout:      time.Duration(pc.Timeout),
		Driver:       d,
		Workload:     workload.New(w),
		Assert:       pc.Assertions(),
		Cancel:       newCancel(pc, running),
		Session:      pc.Session,
		SharedPrefix: pc.SharedPrefix,
	}
}

// Open builds probe pc of target t (both of cfg) with a driver of its own,
// for the one-shot commands: probe and bench. Close it when done.
func Open(cfg *config.Config, t *config.Target, pc *config.Probe, logger *slog.Logger) (*Probe, error) {
	d, err := probe.NewDriver(t.Protocol, t.DriverOptions(), logger.With("target", t.Name))
	if err != nil {
		return nil, fmt.Errorf("target %s (%s): %w", t.Name, t.Endpoint(), err)
	}
	var running *collector.ServerMetrics
	if pc.Cancel != nil {
		running = collector.NewServerMetrics(logger)
		for _, st := range cfg.ServerTargets() {
			if st.Name == t.Name {
				running.SetTargets([]collector.ServerTarget{st})
			}
		}
	}
	p := newProbe(t, pc, cfg.Workloads[pc.Workload], d, running)
	if running != nil {
		p.closeRunning = running.Close
	}
	return p, nil
}

// Close releases the driver's idle connections.
func (p *Probe) Close() {
	p.Driver.Close()
	if p.closeRunning != nil {
		p.closeRunning()
	}
}

// Loaded is a probe opened from a configuration file, with the
// configuration it came from.
type Loaded struct {
	*Probe
	Config       *config.Config
	TargetConfig *config.Target
	ProbeConfig  *config.Probe
}

// Load reads configFile and opens the named probe of the named target (its
// first when probeName is empty): the one-shot commands, probe and bench,
// send what the daemon would. Close it when done.
func Load(configFile, targetName, probeName string, logger *slog.Logger) (*Loaded, error) {
	cfg, err := config.Load(configFile)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	t, pc, err := cfg.Lookup(targetName, probeName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configFile, err)
	}
	p, err := Open(cfg, t, pc, logger)
	if err != nil {
		return nil, err
	}
	return &Loaded{Probe: p, Config: cfg, TargetConfig: t, ProbeConfig: pc}, nil
}
