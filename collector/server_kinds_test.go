package collector

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestServerKindTable: every kind but auto has a normaliser (rules for the
// core gauges) and a way to be detected; every rule and detection prefix
// belongs to a kind of the table.
func TestServerKindTable(t *testing.T) {
	n := newNormaliser()
	kinds := ServerKinds()
	if kinds[0] != KindAuto {
		t.Errorf("kinds %v: want auto first", kinds)
	}
	for _, c := range []string{KindAuto, KindVLLM, KindTriton, KindTGI, KindSGLang, KindLlamaCPP, KindTRTLLM} {
		if !slices.Contains(kinds, c) {
			t.Errorf("constant %q is not in the table", c)
		}
	}
	seen := map[string]bool{}
	for _, k := range ServerKindTable() {
		if seen[k.Name] {
			t.Errorf("kind %s appears twice", k.Name)
		}
		seen[k.Name] = true
		if k.Name == KindAuto {
			if len(n.rules[k.Name]) > 0 || len(k.Detect) > 0 {
				t.Errorf("auto has rules or detection prefixes")
			}
			continue
		}
		outs := map[string]bool{}
		for _, r := range n.rules[k.Name] {
			outs[r.out] = true
		}
		for _, out := range []string{serverRequestsWaiting, serverRequestsRunning, serverPromptTokens, serverGenerationTokens} {
			if !outs[out] {
				t.Errorf("kind %s: no rule for %s", k.Name, out)
			}
		}
		if len(k.Detect) == 0 {
			t.Errorf("kind %s cannot be detected", k.Name)
		}
		for _, p := range k.Detect {
			if !slices.ContainsFunc(detectionPrefixes(), func(d detection) bool { return d.prefix == p && d.kind == k.Name }) {
				t.Errorf("kind %s: prefix %s not used for detection", k.Name, p)
			}
			// A kind's own metrics are detected as that kind.
			fams, err := parseExposition([]byte(p+"x 1\n"), false)
			if err != nil {
				t.Fatal(err)
			}
			if got := detectKind(fams); got != k.Name {
				t.Errorf("a %sx series is detected as %q, want %s", p, got, k.Name)
			}
		}
		// The kind's rules read metrics the kind can be detected by.
		for _, r := range n.rules[k.Name] {
			for _, s := range r.sources {
				if !slices.ContainsFunc(k.Detect, func(p string) bool { return strings.HasPrefix(s.metric, p) }) &&
					!(k.Name == KindTriton && strings.HasPrefix(s.metric, "vllm:")) {
					t.Errorf("kind %s: rule for %s reads %s, which detection would not attribute to it", k.Name, r.out, s.metric)
				}
			}
		}
	}
	for kind := range n.rules {
		if !seen[kind] {
			t.Errorf("rules for kind %q, which is not in the table", kind)
		}
	}
	// Triton's vLLM backend exposes both; it is Triton.
	fams, err := parseExposition([]byte("vllm:num_requests_running 1\nnv_inference_request_success 2\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := detectKind(fams); got != KindTriton {
		t.Errorf("Triton with the vLLM backend detected as %q", got)
	}
}

// TestServerMetricsNoTimeout: a target given without a timeout (config
// always sets one) is reported down, never fetched without a bound.
func TestServerMetricsNoTimeout(t *testing.T) {
	var asked atomic.Bool
	ts := textServer(t, "", func() string { asked.Store(true); return vllmText })
	c, logs, reg := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: KindVLLM}})
	if got := gatherValues(t, reg); got[`llm_server_up{target="t"}`] != 0 || asked.Load() {
		t.Errorf("target without a timeout: up %v, asked %t", got[`llm_server_up{target="t"}`], asked.Load())
	}
	if !strings.Contains(logs.String(), errNoTimeout.Error()) {
		t.Errorf("no log line:\n%s", logs)
	}
}
