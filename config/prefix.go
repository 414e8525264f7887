package config

import (
	"slices"

	"github.com/llm-prober/llm-prober/probe"
)

// Session makes each of a probe's scheduled runs a conversation of Turns
// requests: turn i resends the conversation so far, turn i−1's answer as
// an assistant message, and a new user message drawn from the workload
// (docs/configuration.md#session).
type Session struct {
	Turns int `yaml:"turns"`
	// PreviousResponseID (openai_responses only) sends turn i as its new
	// user message alone, chained to turn i−1 by previous_response_id,
	// so the server keeps the conversation (it must store responses).
	PreviousResponseID bool `yaml:"previous_response_id"`
}

// SharedPrefix makes each of a probe's scheduled runs a group of Requests
// requests that share a fresh random system prompt of about Tokens tokens:
// the first finds the server's prefix cache cold, the others warm
// (docs/configuration.md#shared_prefix).
type SharedPrefix struct {
	Tokens   int `yaml:"tokens"`
	Requests int `yaml:"requests"`
}

// Bounds of the two modes: a run is one scheduled ticket, so it must stay
// short next to common schedule intervals.
const (
	minSessionTurns, maxSessionTurns     = 2, 16
	minPrefixRequests, maxPrefixRequests = 2, 16
	minPrefixTokens, maxPrefixTokens     = 16, 131072
)

// sessionProtocols keep the answer's text and take a conversation.
var sessionProtocols = []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAIResponses, probe.ProtocolOllama}

// prefixProtocols take a system prompt or a prompt to prefix and stream.
var prefixProtocols = []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions, probe.ProtocolOpenAIResponses, probe.ProtocolTGI, probe.ProtocolOllama}

// Sequence reports whether the probe sends several requests per run
// (session or shared_prefix).
func (p *Probe) Sequence() bool { return p.Session != nil || p.SharedPrefix != nil }

// SequenceMode is "session" or "shared_prefix" for those probes, "" for
// the others: the prefix series carry it as their mode label, because a
// session's warm turns add new tokens and a shared prefix's do not, so
// their warm/cold ratios mean different things.
func (p *Probe) SequenceMode() string {
	switch {
	case p.Session != nil:
		return "session"
	case p.SharedPrefix != nil:
		return "shared_prefix"
	}
	return ""
}

// validateSequence checks session and shared_prefix of p (at path, the
// probe's) for a target of protocol.
func (p *Probe) validateSequence(d *decoder, path, protocol string) {
	if s := p.Session; s != nil {
		sp := path + ".session"
		if p.SharedPrefix != nil {
			d.at(sp, "session and shared_prefix are different probes; set one of them")
		}
		if !slices.Contains(sessionProtocols, protocol) {
			d.at(sp, "a session resends each answer, which the prober keeps for %s only, not %s", joinAnd(sessionProtocols), protocol)
		}
		if s.PreviousResponseID && protocol != probe.ProtocolOpenAIResponses {
			d.at(sp+".previous_response_id", "chaining turns by previous_response_id is the Responses API's, not %s; use protocol %s or remove it", protocol, probe.ProtocolOpenAIResponses)
		}
		if s.Turns < minSessionTurns || s.Turns > maxSessionTurns {
			d.at(sp+".turns", "want %d to %d turns, got %d", minSessionTurns, maxSessionTurns, s.Turns)
		}
		if !p.Streaming() {
			d.at(sp, "a session compares time to first token of its turns, which only streamed answers have; remove stream: false")
		}
	}
	if s := p.SharedPrefix; s != nil {
		sp := path + ".shared_prefix"
		if !slices.Contains(prefixProtocols, protocol) {
			d.at(sp, "shared_prefix needs a text prompt, which %s take, not %s", joinAnd(prefixProtocols), protocol)
		}
		if s.Tokens < minPrefixTokens || s.Tokens > maxPrefixTokens {
			d.at(sp+".tokens", "want %d to %d tokens, got %d", minPrefixTokens, maxPrefixTokens, s.Tokens)
		}
		if s.Requests < minPrefixRequests || s.Requests > maxPrefixRequests {
			d.at(sp+".requests", "want %d to %d requests (the first is cold, the others warm), got %d", minPrefixRequests, maxPrefixRequests, s.Requests)
		}
		if !p.Streaming() {
			d.at(sp, "shared_prefix compares time to first token, which only streamed answers have; remove stream: false")
		}
	}
}
