package config

import (
	"strings"
	"testing"
)

// TestHistogramMixWarning: one form, inherited or repeated, is quiet;
// targets and modules in different forms get a warning naming them.
func TestHistogramMixWarning(t *testing.T) {
	target := func(name, form string) string {
		s := "  - name: " + name + "\n    protocol: openai_chat\n    url: http://127.0.0.1:8000\n    model: m\n"
		if form != "" {
			s += "    histograms: " + form + "\n"
		}
		return s + "    probes: [{name: p, schedule: {every: 15s}}]\n"
	}
	for _, tc := range []struct{ text, want string }{
		{"targets:\n" + target("a", "") + target("b", ""), ""},
		{"histograms: native\ntargets:\n" + target("a", "") + target("b", "native"), ""},
		{"targets:\n" + target("a", "") + target("b", "native"),
			"probe histograms in 2 forms (both: target a; native: target b): Prometheus 2.x with --enable-feature=native-histograms stores a metric family in the form of its first series"},
		{"histograms: classic\ntargets:\n" + target("a", "") + "modules:\n  chat: {protocol: openai_chat, model: m, allowed_targets: x, histograms: native}\n",
			"(classic: target a; native: module chat)"},
	} {
		cfg, err := Parse([]byte(tc.text), "f.yml", t.TempDir(), func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		got := cfg.HistogramMixWarning()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s\ngot  %q\nwant %q", tc.text, got, tc.want)
		}
	}
}
