package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// endpointYAML is a one-target config whose line 4 is the endpoint.
func endpointYAML(protocol, key, value string) string {
	return fmt.Sprintf(`targets:
  - name: t
    protocol: %s
    %s: %s
    model: m
    probes: [{name: p, schedule: {every: 15s}}]
`, protocol, key, value)
}

// TestEndpointFromProtocolTable: for every protocol of the table, the
// endpoint it takes loads and the other one is rejected at its key with
// the fix in the message; without either the message says which is
// missing.
func TestEndpointFromProtocolTable(t *testing.T) {
	for _, p := range probe.Protocols() {
		t.Run(p.Name, func(t *testing.T) {
			url, address := "http://inference.internal:9000", "inference.internal:9000"
			var right, wrong, wrongValue, wantWrong, wantMissing string
			switch p.Endpoint {
			case probe.EndpointURL:
				right, wrong, wrongValue = "url: "+url, "address", address
				wantWrong = fmt.Sprintf("x.yml:4:5: targets[0].address: protocol %s talks HTTP; set url: http://%s instead of address", p.Name, address)
				wantMissing = "x.yml:2:5: targets[0]: missing url; set url: http://host:port of the server"
			case probe.EndpointAddress:
				right, wrong, wrongValue = "address: "+address, "url", url
				wantWrong = fmt.Sprintf("x.yml:4:5: targets[0].url: protocol %s talks gRPC; set address: host:port (e.g. localhost:%d) instead of url", p.Name, p.DefaultPort)
				wantMissing = fmt.Sprintf("x.yml:2:5: targets[0]: missing address; set address: host:port of %s's gRPC port (e.g. localhost:%d)", p.Server, p.DefaultPort)
			default:
				t.Fatalf("endpoint %q", p.Endpoint)
			}
			key, value, _ := strings.Cut(right, ": ")
			if _, err := Parse([]byte(endpointYAML(p.Name, key, value)), "x.yml", ".", noEnv); err != nil {
				t.Errorf("%s with %s: %v", p.Name, right, err)
			}
			_, err := Parse([]byte(endpointYAML(p.Name, wrong, wrongValue)), "x.yml", ".", noEnv)
			if err == nil || err.Error() != wantWrong {
				t.Errorf("%s with %s:\n got %v\nwant %s", p.Name, wrong, err, wantWrong)
			}
			missing := strings.Replace(endpointYAML(p.Name, "x", "y"), "    x: y\n", "", 1)
			_, err = Parse([]byte(missing), "x.yml", ".", noEnv)
			if err == nil || err.Error() != wantMissing {
				t.Errorf("%s without an endpoint:\n got %v\nwant %s", p.Name, err, wantMissing)
			}
		})
	}
}

// TestAddressSuggestion: the url suggested for an address keeps the host,
// and falls back on the protocol's default port.
func TestAddressSuggestion(t *testing.T) {
	for addr, want := range map[string]string{
		"localhost:8080":  "http://localhost:8080",
		"tgi.internal":    "http://tgi.internal:8080",
		"http://tgi:80/x": "http://localhost:8080",
		"'[::1]:3000'":    "http://[::1]:3000",
		"'tgi.internal:'": "http://localhost:8080",
	} {
		_, err := Parse([]byte(endpointYAML(probe.ProtocolTGI, "address", addr)), "x.yml", ".", noEnv)
		if err == nil || !strings.Contains(err.Error(), "set url: "+want+" instead of address") {
			t.Errorf("address %s: %v, want the suggestion %s", addr, err, want)
		}
	}
}

// exampleConfigs loads every examples/*.yml.
func exampleConfigs(t *testing.T) map[string]*Config {
	t.Helper()
	files, err := filepath.Glob("../examples/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	out := map[string]*Config{}
	for _, f := range files {
		cfg, err := Load(f)
		if err != nil {
			t.Errorf("example %s: %v", f, err)
			continue
		}
		out[f] = cfg
	}
	return out
}

// TestExamplesCoverProtocols: every example loads (so uses only protocols
// and kinds of the tables), each of its targets builds a driver from
// DriverOptions, and every protocol of the table has an example.
func TestExamplesCoverProtocols(t *testing.T) {
	used := map[string]bool{}
	for f, cfg := range exampleConfigs(t) {
		for _, tg := range cfg.Targets {
			used[tg.Protocol] = true
			opts := tg.DriverOptions()
			if opts.StreamIdleTimeout <= 0 || opts.MaxResponseBytes <= 0 {
				t.Errorf("%s: target %s: DriverOptions without the configured limits: %+v", f, tg.Name, opts)
			}
			d, err := probe.NewDriver(tg.Protocol, opts, nil)
			if err != nil {
				t.Errorf("%s: target %s: %v", f, tg.Name, err)
				continue
			}
			d.Close()
		}
	}
	for _, p := range probe.SupportedProtocols() {
		if !used[p] {
			t.Errorf("no example in examples/ uses protocol %s; add one", p)
		}
	}
}

// TestDocsNameEveryValue: the reference docs name every protocol, server
// kind and outcome value the tables hold.
func TestDocsNameEveryValue(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	configuration, metrics := read("configuration.md"), read("metrics.md")
	named := func(doc, file, what, value string) {
		if !strings.Contains(doc, "`"+value+"`") {
			t.Errorf("docs/%s does not name %s `%s`", file, what, value)
		}
	}
	for _, p := range probe.SupportedProtocols() {
		named(configuration, "configuration.md", "protocol", p)
		named(metrics, "metrics.md", "protocol", p)
	}
	for _, k := range collector.ServerKinds() {
		named(configuration, "configuration.md", "server kind", k)
		if k != collector.KindAuto { // a label value, never auto
			named(metrics, "metrics.md", "server kind", k)
		}
	}
	for _, o := range probe.Outcomes() {
		named(metrics, "metrics.md", "outcome", string(o))
		named(configuration, "configuration.md", "outcome", string(o))
	}
	// metrics.md says which protocol can produce which outcome, as the
	// table does: one row per protocol, a ✓ per outcome it can produce.
	for _, p := range probe.Protocols() {
		row := ""
		for _, line := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(line, "| `"+p.Name+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/metrics.md has no outcome row for protocol %s", p.Name)
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|"), "|")[1:]
		var got []probe.Outcome
		for i, o := range probe.Outcomes() {
			if i < len(cells) && strings.TrimSpace(cells[i]) == "✓" {
				got = append(got, o)
			}
		}
		if !slices.Equal(got, p.Outcomes) || len(cells) != len(probe.Outcomes()) {
			t.Errorf("docs/metrics.md row of %s marks %v, the protocol table has %v", p.Name, got, p.Outcomes)
		}
	}
}

func TestJoinAnd(t *testing.T) {
	for want, words := range map[string][]string{"": nil, "a": {"a"}, "a and b": {"a", "b"}, "a, b and c": {"a", "b", "c"}} {
		if got := joinAnd(words); got != want {
			t.Errorf("joinAnd(%q) = %q, want %q", words, got, want)
		}
	}
}
