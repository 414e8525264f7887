package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// probeOnce sends one probe now and prints its breakdown: the first thing
// to run when a number on a dashboard looks wrong. Exit 0 on success. A
// session or shared_prefix probe sends one run: each request's breakdown,
// then the warm/cold comparison.
func probeOnce(ctx context.Context, configFile, targetName, probeName string, logger *slog.Logger, stdout, stderr io.Writer) int {
	p, err := engine.Load(configFile, targetName, probeName, logger)
	if err != nil {
		// The error may name the target's URL, query string included.
		fmt.Fprintf(stderr, "llm-prober: %v\n", redact.Default().Error(err))
		return 1
	}
	defer p.Close()
	// The report quotes the server's answers: one last pass of the
	// configuration's policy over all of it.
	out := &redactingWriter{w: stdout, p: p.Config.Policy()}
	defer out.flush()
	stdout = out
	if p.Sequence() {
		return probeSequence(ctx, p.Probe, stdout, stderr)
	}
	res := p.Send(ctx).Result
	if err := probe.WriteReport(stdout, p.Target, p.Name, res); err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v\n", err)
		return 1
	}
	if res.Outcome != probe.OutcomeSuccess {
		return 1
	}
	return 0
}

// probeSequence is probeOnce for a session or shared_prefix probe.
func probeSequence(ctx context.Context, p *engine.Probe, stdout, stderr io.Writer) int {
	run := p.NewSequence()
	var steps []engine.Step
	code := 0
	for !run.Done(ctx) {
		st := run.Next(ctx, nil, time.Time{})
		steps = append(steps, st)
		fmt.Fprintf(stdout, "--- request %d (%s prefix cache)\n", len(steps), st.Cache)
		if err := probe.WriteReport(stdout, p.Target, p.Name, st.Result); err != nil {
			fmt.Fprintf(stderr, "llm-prober: %v\n", err)
			return 1
		}
		if st.Result.Outcome != probe.OutcomeSuccess {
			code = 1
		}
	}
	var cold, warm time.Duration
	var nWarm int
	for _, st := range steps {
		r := st.Result
		if r.Outcome != probe.OutcomeSuccess || r.TTFT <= 0 {
			continue
		}
		if st.Cache == engine.CacheCold {
			cold = r.TTFT
		} else {
			warm += r.TTFT
			nWarm++
		}
	}
	fmt.Fprintln(stdout, "---")
	if cold > 0 && nWarm > 0 {
		fmt.Fprintln(stdout, warmColdLine(p.Session != nil, cold, warm/time.Duration(nWarm)))
	} else {
		fmt.Fprintln(stdout, "no warm/cold comparison: a cold and a warm request must both succeed")
	}
	return code
}

// prefixNotHittingRatio is the warm/cold TTFT ratio above which the
// shipped LLMProbePrefixCacheNotHitting alert fires
// (alerts/llm-prober-rules.yml): the verdict printed here is the alert's.
const prefixNotHittingRatio = 0.8

// warmColdLine is the last line of a sequence probe's run: the TTFT of
// its cold request against the mean of its warm ones. Only a
// shared_prefix run gets a verdict: its requests are alike but for the
// cache, while a session's later turns carry more new tokens than turn 1
// (the whole conversation so far), so their ratio says little about the
// cache; the alert leaves sessions out for the same reason.
func warmColdLine(session bool, cold, warm time.Duration) string {
	ratio := warm.Seconds() / cold.Seconds()
	head := fmt.Sprintf("TTFT cold %s, warm mean %s: warm/cold %.3f", cold.Round(time.Microsecond), warm.Round(time.Microsecond), ratio)
	switch {
	case session:
		return head + " (a session: later turns carry more new tokens than turn 1, so this is no verdict on the prefix cache; use a shared_prefix probe for one)"
	case ratio > prefixNotHittingRatio:
		return head + fmt.Sprintf(" (above %.1f: the prefix cache does not help; LLMProbePrefixCacheNotHitting would fire)", prefixNotHittingRatio)
	default:
		return head + fmt.Sprintf(" (at most %.1f: the prefix cache helps)", prefixNotHittingRatio)
	}
}

// redactingWriter passes text through a redaction policy line by line:
// a secret is never split across two writes' worth of masking.
type redactingWriter struct {
	w   io.Writer
	p   *redact.Policy
	buf []byte
}

func (r *redactingWriter) Write(b []byte) (int, error) {
	r.buf = append(r.buf, b...)
	if i := bytes.LastIndexByte(r.buf, '\n'); i >= 0 {
		_, err := io.WriteString(r.w, r.p.String(string(r.buf[:i+1])))
		r.buf = append(r.buf[:0], r.buf[i+1:]...)
		if err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func (r *redactingWriter) flush() {
	if len(r.buf) > 0 {
		_, _ = io.WriteString(r.w, r.p.String(string(r.buf)))
		r.buf = r.buf[:0]
	}
}
