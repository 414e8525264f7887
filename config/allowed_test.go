package config

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// module is a module of fleetBase's shape whose allowed_targets is re.
func module(t testing.TB, re string) *Module {
	t.Helper()
	cfg, err := parseFleet(t, "modules:\n  chat: {protocol: openai_chat, model: m, allowed_targets: '"+re+"'}\n")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Modules["chat"]
}

// The pattern that the missing-key error suggests is pasted as is by
// people in a hurry: it must not let a /probe caller choose the host,
// port, path or query the module's API key is sent to.
func TestSuggestedAllowedTargetsIsSafe(t *testing.T) {
	_, err := parseFleet(t, "modules:\n  chat: {protocol: openai_chat, model: m}\n")
	if err == nil {
		t.Fatal("a module without allowed_targets loaded")
	}
	sug := regexp.MustCompile(`e\.g\. '([^']+)'`).FindStringSubmatch(err.Error())
	if sug == nil {
		t.Fatalf("no example pattern in %q", err)
	}
	m := module(t, sug[1])
	if _, err := m.Instantiate("x", "http://10.0.3.4:8000"); err != nil {
		t.Errorf("the suggestion %s refuses the address it is for: %v", sug[1], err)
	}
	for _, bad := range []string{
		"http://10.0.attacker.example:8000",
		"http://10.0.attacker.example:1234/anything?x=",
		"http://10.0.3.4:8000/anything",
		"http://10.0.3.4:8000?x=1",
		"http://10.0.3.4:9999",
		"http://10.0.3.4.nip.io:8000",
		"http://10.0.3.010:8000",
		"http://10.0.3:8000",
	} {
		if _, err := m.Instantiate("x", bad); err == nil {
			t.Errorf("the suggestion %s accepts %s", sug[1], bad)
		}
	}
}

// What the documentation shows must be as safe as the suggestion.
func TestDocumentedAllowedTargetsIsSafe(t *testing.T) {
	m := module(t, `http://10\.42\.[0-9.]+:8000`)
	if _, err := m.Instantiate("x", "10.42.7.9:8000"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"http://10.42.1:8000", "http://10.42.1.2.3:8000", "http://10.42.0.1:8000/x", "http://10.42.0.1:8001"} {
		if _, err := m.Instantiate("x", bad); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// Even a careless allowed_targets ('.*') cannot let a caller smuggle
// credentials, a query, a fragment or a DNS name posing as an address
// through: those are refused before the pattern is asked.
func TestInstantiateRefusesWhatNoPatternAllows(t *testing.T) {
	m := module(t, `.*`)
	for _, tc := range []struct{ endpoint, want string }{
		{"http://u:p@10.0.0.1:8000", "credentials"},
		{"http://10.0.0.1:8000@evil.example", "credentials"},
		{"http://10.0.0.1:8000/v1?api-version=1", "query"},
		{"http://10.0.0.1:8000/v1?", "query"},
		{"http://10.0.0.1:8000/#frag", "fragment"},
		{"http://10.0.evil.example:8000", "DNS name"},
		{"http://10.0.0.010:8000", "DNS name"},
		{"http://10.0.0.1.:8000", "DNS name"},
		{"http://10.0.0.1:8000/a/../b", `"." or ".."`},
		{"http://10.0.0.1:8000/a/%2e%2e/b", `"." or ".."`},
		{"ftp://10.0.0.1", "http or https"},
	} {
		_, err := m.Instantiate("x", tc.endpoint)
		var re *RefusedError
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.endpoint, err, tc.want)
		} else if !errors.As(err, &re) {
			t.Errorf("%s: %v is not a RefusedError", tc.endpoint, err)
		}
	}
	for _, ok := range []string{"http://vllm.ns.svc:8000", "https://api.example.com/v1", "HTTP://VLLM.NS.SVC:8000", "http://[fd00::1]:8000", "http://10.0.0.1:8000/"} {
		if _, err := m.Instantiate("x", ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	grpc := module(t, `.*`)
	grpc.Protocol = "triton_grpc"
	for _, bad := range []string{"10.0.evil.example:8001", "10.0.0.010:8001"} {
		if _, err := grpc.Instantiate("x", bad); err == nil || !strings.Contains(err.Error(), "DNS name") {
			t.Errorf("gRPC %s: %v, want refused as a DNS name posing as an address", bad, err)
		}
	}
}

// The pattern is matched against the URL as it will be requested: the
// host lowered, nothing but scheme, host, port and path.
func TestAllowedTargetsMatchesTheURLRequested(t *testing.T) {
	m := module(t, `http://vllm\.ns\.svc:8000`)
	tg, err := m.Instantiate("x", "http://VLLM.ns.svc:8000")
	if err != nil || tg.URL != "http://vllm.ns.svc:8000" {
		t.Errorf("%+v, %v; want the URL lowered and accepted", tg, err)
	}
}

// A refused endpoint is echoed (to a /probe caller, into a log) clipped,
// however long the caller made it.
func TestRefusalClipsTheEndpoint(t *testing.T) {
	m := module(t, `http://10\.0\.0\.1:8000`)
	long := "http://10.0.0.2:8000/" + strings.Repeat("a", 500_000)
	for _, ep := range []string{long, long + "?x=1", strings.Repeat("b", 500_000), "http://" + strings.Repeat("1.", 250_000) + "x:1"} {
		_, err := m.Instantiate("x", ep)
		if err == nil {
			t.Fatalf("accepted a %d-byte endpoint", len(ep))
		}
		if n := len(err.Error()); n > 1024 || !strings.Contains(err.Error(), "…") {
			t.Errorf("error of %d bytes for a %d-byte endpoint: %.200s", n, len(ep), err)
		}
	}
}

// FuzzInstantiate: whatever a caller sends as a target, an accepted one is
// a plain http(s) URL with no credentials, query, fragment or dot
// segments, whose host is an IP address or a name that does not start
// like one, and which the module's pattern matches as probed.
func FuzzInstantiate(f *testing.F) {
	for _, s := range []string{"10.0.0.1:8000", "http://10.0.attacker.example:1/x?y=", "http://u@h", "http://h/#f",
		"https://[::1]:1/v1", "http://1.2.3.4.nip.io", "http://h:1/%2e%2e/", "http://h:1/a/..", "HTTP://H:1"} {
		f.Add(s)
	}
	m := module(f, `.*`)
	strict := module(f, `https?://10\.0\.[0-9]+\.[0-9]+:8000`)
	f.Fuzz(func(t *testing.T, endpoint string) {
		for _, mod := range []*Module{m, strict} {
			tg, err := mod.Instantiate("x", endpoint)
			if err != nil {
				if len(err.Error()) > 2048 {
					t.Errorf("error of %d bytes", len(err.Error()))
				}
				continue
			}
			u, err := url.Parse(tg.URL)
			if err != nil {
				t.Fatalf("accepted %q as %q, which does not parse: %v", endpoint, tg.URL, err)
			}
			if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || (u.Scheme != "http" && u.Scheme != "https") {
				t.Errorf("accepted %q as %q", endpoint, tg.URL)
			}
			if host := u.Hostname(); net.ParseIP(host) == nil && startsNumeric(host) {
				t.Errorf("accepted %q: host %q poses as an address", endpoint, host)
			}
			if !mod.allowed.MatchString(tg.URL) {
				t.Errorf("accepted %q as %q, which the pattern does not match", endpoint, tg.URL)
			}
			if mod == strict && net.ParseIP(u.Hostname()) == nil {
				t.Errorf("the strict pattern accepted %q, host %q", endpoint, u.Hostname())
			}
		}
	})
}

func startsNumeric(host string) bool {
	label, _, _ := strings.Cut(host, ".")
	return label != "" && strings.Trim(label, "0123456789") == ""
}
