package config

import (
	"time"

	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/probe"
)

// Cancel makes a probe a cancellation probe (docs/configuration.md,
// "cancel"): each request's stream is cut after AfterTokens output tokens,
// and the target's llm_server_requests_running, read from its
// server_metrics, tells how long the server took to free the slot.
type Cancel struct {
	AfterTokens int `yaml:"after_tokens"`
	// ReleaseTimeout is how long after the cut the slot may take to be
	// freed before the cancellation counts as leaked.
	ReleaseTimeout model.Duration `yaml:"release_timeout"`
	// PollInterval is how often the server's metrics are read meanwhile:
	// the resolution of the release time.
	PollInterval model.Duration `yaml:"poll_interval"`
}

// Defaults and bounds of cancel:.
const (
	DefaultCancelReleaseTimeout = 30 * time.Second
	DefaultCancelPollInterval   = 250 * time.Millisecond
	minCancelPollInterval       = 10 * time.Millisecond
	maxCancelReleaseTimeout     = 10 * time.Minute
	maxCancelAfterTokens        = 1 << 20
)

func (c *Cancel) applyDefaults() {
	if c == nil {
		return
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = model.Duration(DefaultCancelReleaseTimeout)
	}
	if c.PollInterval == 0 {
		c.PollInterval = model.Duration(DefaultCancelPollInterval)
	}
}

// validateCancel checks p's cancel: (at path, the probe's) on target t
// with workload w (nil when unknown, reported elsewhere).
func (p *Probe) validateCancel(d *decoder, path string, t *Target, w *Workload) {
	c := p.Cancel
	if c == nil {
		return
	}
	path += ".cancel"
	if c.AfterTokens < 1 || c.AfterTokens > maxCancelAfterTokens {
		d.at(path+".after_tokens", "want 1 to %d output tokens to read before cutting the stream, got %d", maxCancelAfterTokens, c.AfterTokens)
	}
	if rt := time.Duration(c.ReleaseTimeout); rt <= 0 || rt > maxCancelReleaseTimeout {
		d.at(path+".release_timeout", "want a duration in (0, %s], got %s", model.Duration(maxCancelReleaseTimeout), c.ReleaseTimeout)
	}
	if pi := time.Duration(c.PollInterval); pi < minCancelPollInterval || pi > time.Duration(c.ReleaseTimeout) {
		d.at(path+".poll_interval", "want a duration from %s to release_timeout (%s), got %s", model.Duration(minCancelPollInterval), c.ReleaseTimeout, c.PollInterval)
	}
	if proto, ok := probe.LookupProtocol(t.Protocol); ok && !proto.Streams {
		d.at(path, "a cancellation probe cuts a streamed answer, and protocol %s does not stream", t.Protocol)
	} else if !p.Streaming() {
		d.at(path, "a cancellation probe cuts a streamed answer; remove stream: false")
	}
	if len(p.Assert) > 0 {
		d.at(path, "a cancellation probe reads only the start of the answer; it cannot also have assert:")
	}
	if p.Session != nil || p.SharedPrefix != nil {
		d.at(path, "a cancellation probe sends one request per run, and session or shared_prefix several; make them two probes")
	}
	if t.ServerMetrics == nil {
		d.at(path, "a cancellation probe reads the server's running requests from its metrics; give target %q server_metrics", t.Name)
	}
	if w != nil && c.AfterTokens > 0 {
		m := w.MaxTokens
		if most := m.Cap; (most > 0 && most < c.AfterTokens) || (m.Range == 0 && m.Mean > 0 && m.Mean < c.AfterTokens) {
			if most == 0 {
				most = m.Mean
			}
			d.at(path+".after_tokens", "workload %q asks for at most %d tokens, fewer than after_tokens %d: no stream would be cut", p.Workload, most, c.AfterTokens)
		}
	}
}
