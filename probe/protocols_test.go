package probe_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestProtocolTable checks the table against itself and the package's other
// lists: the constants, SupportedProtocols and Outcomes.
func TestProtocolTable(t *testing.T) {
	table := probe.Protocols()
	var names []string
	produced := map[probe.Outcome]bool{}
	for _, p := range table {
		if slices.Contains(names, p.Name) {
			t.Errorf("protocol %s appears twice", p.Name)
		}
		names = append(names, p.Name)
		if p.Endpoint != probe.EndpointURL && p.Endpoint != probe.EndpointAddress {
			t.Errorf("%s: endpoint %q", p.Name, p.Endpoint)
		}
		if p.DefaultPort < 1 || p.DefaultPort > 65535 || p.Server == "" {
			t.Errorf("%s: default port %d, server %q", p.Name, p.DefaultPort, p.Server)
		}
		if p.Settings != "" && !slices.Contains([]string{probe.SettingsTriton, probe.SettingsOllama, probe.SettingsEmbedding, probe.SettingsRerank}, p.Settings) {
			t.Errorf("%s: settings %q", p.Name, p.Settings)
		}
		if !p.Streams {
			// Nothing is wrong with a protocol that cannot stream, but
			// config validation then rejects stream: true, which no
			// example or test has seen yet.
			t.Logf("%s does not stream", p.Name)
		}
		for _, o := range p.Outcomes {
			if !slices.Contains(probe.Outcomes(), o) {
				t.Errorf("%s: outcome %q is not in probe.Outcomes()", p.Name, o)
			}
			produced[o] = true
		}
		// Only gRPC has gRPC statuses; only HTTP has HTTP statuses.
		grpc := p.Endpoint == probe.EndpointAddress
		if slices.Contains(p.Outcomes, probe.OutcomeGRPCError) != grpc ||
			slices.Contains(p.Outcomes, probe.OutcomeHTTP5xx) == grpc {
			t.Errorf("%s (%s): outcomes %v", p.Name, p.Endpoint.Transport(), p.Outcomes)
		}
	}
	// wrong_answer comes from a probe's assertions, whatever its protocol
	// (the probe's series add it; collector.ProbeSeries.Asserts).
	produced[probe.OutcomeWrongAnswer] = true
	for _, o := range probe.Outcomes() {
		if !produced[o] {
			t.Errorf("no protocol produces outcome %q", o)
		}
	}
	if got := probe.SupportedProtocols(); !slices.Equal(got, names) {
		t.Errorf("SupportedProtocols() = %v, table has %v", got, names)
	}
	for _, c := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions, probe.ProtocolTGI,
		probe.ProtocolOllama, probe.ProtocolTritonGenerate, probe.ProtocolTritonGRPC, probe.ProtocolOpenAIEmbeddings,
		probe.ProtocolOllamaEmbed, probe.ProtocolTEIEmbed, probe.ProtocolOpenAIRerank, probe.ProtocolTEIRerank} {
		if _, ok := probe.LookupProtocol(c); !ok {
			t.Errorf("constant %q is not in the table", c)
		}
	}
	if _, ok := probe.LookupProtocol("grpc"); ok {
		t.Error("LookupProtocol found an unknown protocol")
	}
	// The table handed out is a copy.
	table[0].Outcomes[0] = "mutated"
	if probe.Protocols()[0].Outcomes[0] == "mutated" {
		t.Error("Protocols() shares its slices with the table")
	}
}

// TestNewDriverEndpoint: each driver takes the endpoint its row names and
// refuses to be built from the other one alone.
func TestNewDriverEndpoint(t *testing.T) {
	for _, p := range probe.Protocols() {
		right, wrong := probe.TargetOptions{Name: "t", Model: "m"}, probe.TargetOptions{Name: "t", Model: "m"}
		if p.Endpoint == probe.EndpointURL {
			right.URL, wrong.Address = "http://127.0.0.1:1", "127.0.0.1:1"
		} else {
			right.Address, wrong.URL = "127.0.0.1:1", "http://127.0.0.1:1"
		}
		d, err := probe.NewDriver(p.Name, right, nil)
		if err != nil {
			t.Errorf("%s with its %s: %v", p.Name, p.Endpoint, err)
		} else {
			d.Close()
		}
		if d, err := probe.NewDriver(p.Name, wrong, nil); err == nil {
			d.Close()
			t.Errorf("%s built without its %s", p.Name, p.Endpoint)
		}
	}
}

// simTarget points a driver of protocol p at sim: its HTTP URL, or its
// gRPC address for the protocols that take one.
func simTarget(p probe.Protocol, sim *simtest.Sim, model string) probe.TargetOptions {
	opts := probe.TargetOptions{Name: "sim", Model: model}
	if p.Endpoint == probe.EndpointURL {
		opts.URL = sim.URL
	} else {
		opts.Address = sim.GRPCAddr
	}
	return opts
}

// TestSimulatorServesEveryProtocol: the simulator speaks every protocol of
// the table, streamed and not, so every driver is tested against it and a
// new protocol without a simulated server fails here.
func TestSimulatorServesEveryProtocol(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = time.Millisecond
	cfg.Latency.PrefillPerToken = 0
	sim := simtest.StartWithGRPC(t, cfg)
	for _, p := range probe.Protocols() {
		d, err := probe.NewDriver(p.Name, simTarget(p, sim, cfg.ServedModelNames[0]), nil)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		for _, stream := range []bool{true, false} {
			if stream && !p.Streams {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res := d.Probe(ctx, &probe.Request{
				ID:        "protocols-" + p.Name,
				Messages:  []probe.Message{{Role: "user", Content: "Say something about lighthouses."}},
				MaxTokens: 8,
				Stream:    stream,
			})
			cancel()
			if res.Outcome != probe.OutcomeSuccess || (stream && res.OutputTokens < 1) {
				t.Errorf("%s stream=%t: outcome %s (%v), %d output tokens", p.Name, stream, res.Outcome, res.Err, res.OutputTokens)
			}
			if !slices.Contains(p.Outcomes, res.Outcome) {
				t.Errorf("%s: outcome %s is not among the table's %v", p.Name, res.Outcome, p.Outcomes)
			}
		}
		d.Close()
	}
}

func TestNewDriverUnknownProtocol(t *testing.T) {
	_, err := probe.NewDriver("grpc", probe.TargetOptions{URL: "http://x"}, nil)
	if err == nil || !strings.Contains(err.Error(), strings.Join(probe.SupportedProtocols(), ", ")) {
		t.Errorf("unknown protocol error = %v", err)
	}
}
