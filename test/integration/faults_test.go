package integration

import (
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

func fastSimulator() simulator.Config {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = 2 * time.Millisecond
	return cfg
}

// faultySimulator is fastSimulator injecting every fault at random, a few
// percent each; its stalls (2s) outlast a 300ms stream idle timeout.
func faultySimulator() simulator.Config {
	cfg := fastSimulator()
	cfg.Faults.ErrorRate = 0.08
	cfg.Faults.ResetRate = 0.08
	cfg.Faults.MalformedRate = 0.08
	cfg.Faults.TruncateRate = 0.08
	cfg.Faults.ErrorEventRate = 0.08
	cfg.Faults.StallRate = 0.05
	cfg.Faults.StallDuration = 2 * time.Second
	return cfg
}

// probeThroughFaults sends n probes one after another and counts their
// outcomes; recovered says whether a success came after a failure.
func probeThroughFaults(n int, send func() *probe.Result) (counts map[probe.Outcome]int, recovered bool) {
	counts = map[probe.Outcome]int{}
	failed := false
	for range n {
		res := send()
		counts[res.Outcome]++
		if res.Outcome != probe.OutcomeSuccess {
			failed = true
		} else if failed {
			recovered = true
		}
	}
	return counts, recovered
}

// TestEveryFaultHasItsOutcome injects each simulator fault into one request
// and checks the outcome class the prober gives it, then checks the same
// driver (and its pooled connections) still probes successfully.
func TestEveryFaultHasItsOutcome(t *testing.T) {
	s := startSimulator(t, fastSimulator())
	cases := []struct {
		fault   string
		want    probe.Outcome
		timeout time.Duration
	}{
		{"error=503", probe.OutcomeHTTP5xx, 0},
		{"error=500", probe.OutcomeHTTP5xx, 0},
		{"error=429", probe.OutcomeHTTP4xx, 0},
		{"error=400", probe.OutcomeHTTP4xx, 0},
		{"reset:after=3", probe.OutcomeIncomplete, 0},
		{"truncate:after=4", probe.OutcomeIncomplete, 0},
		{"malformed:after=2", probe.OutcomeProtocolError, 0},
		{"error_event:after=2", probe.OutcomeHTTP5xx, 0},
		{"error_event:after=2,status=400", probe.OutcomeHTTP4xx, 0},
		{"stall:after=2,for=3s", probe.OutcomeStreamStalled, 0},
		// The stall detector also covers the wait for the first token...
		{"slow_first_token:delay=2s", probe.OutcomeStreamStalled, 0},
		// ...while a probe deadline shorter than the idle timeout is a timeout.
		{"slow_first_token:delay=3s", probe.OutcomeTimeout, 300 * time.Millisecond},
		{"slow_first_token:delay=100ms", probe.OutcomeSuccess, 0},
	}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			for _, protocol := range []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions} {
				d := newDriver(t, protocol, probe.TargetOptions{
					Name: "sim", URL: s.url, Model: "sim-llm",
					Headers:           map[string]string{simulator.HeaderFault: c.fault},
					StreamIdleTimeout: 500 * time.Millisecond,
				})
				timeout := c.timeout
				if timeout == 0 {
					timeout = 10 * time.Second
				}
				res := probeOnce(d, 12, timeout)
				if res.Outcome != c.want {
					t.Errorf("%s %s: outcome %s (%v), want %s", protocol, c.fault, res.Outcome, res.Err, c.want)
				}
				if c.want != probe.OutcomeSuccess && res.Err == nil {
					t.Errorf("%s %s: failure without an error message", protocol, c.fault)
				}
			}
		})
	}
}

// TestKeepsProbingThroughFaults sends many probes through one driver while
// the simulator injects every fault at random, and checks that successes
// keep coming between failures: no fault poisons the pooled transport.
func TestKeepsProbingThroughFaults(t *testing.T) {
	s := startSimulator(t, faultySimulator())
	d := newDriver(t, probe.ProtocolOpenAIChat, probe.TargetOptions{
		Name: "sim", URL: s.url, Model: "sim-llm", StreamIdleTimeout: 300 * time.Millisecond,
	})
	counts, successAfterFailure := probeThroughFaults(120, func() *probe.Result { return probeOnce(d, 8, 10*time.Second) })
	t.Logf("outcomes over 120 probes: %v", counts)
	if counts[probe.OutcomeSuccess] < 40 || !successAfterFailure {
		t.Errorf("probing did not recover from faults: %v", counts)
	}
	for _, o := range []probe.Outcome{probe.OutcomeHTTP5xx, probe.OutcomeIncomplete, probe.OutcomeProtocolError} {
		if counts[o] == 0 {
			t.Errorf("no %s among %v: fault injection or classification is off", o, counts)
		}
	}
}
