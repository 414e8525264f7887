package collector

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llm-prober/llm-prober/probe"
)

// A model server's label value is held to the rule configured and
// discovered model names follow (probe.MaxModelNameBytes): a 1 MiB
// model_name is cut, counted, and never re-exported verbatim (issue 27,
// item 10).
func TestServerMetricsLongModelLabel(t *testing.T) {
	// Two names alike in their first 256 bytes become one series after the
	// cut, aggregated as two series of one model are, not a duplicate.
	long := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a rune
	other := long + "x"
	body := `vllm:num_requests_running{engine="0",model_name="` + long + `"} 1
vllm:num_requests_running{engine="0",model_name="` + other + `"} 2
vllm:num_requests_waiting{engine="0",model_name="short"} 3
`
	ts := textServer(t, "text/plain; version=0.0.4", func() string { return body })
	c, _, reg := newTestServerMetrics(t)
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: KindVLLM, Timeout: 10 * time.Second}})
	got := gatherValues(t, reg)
	if got[`llm_server_up{target="t"}`] != 1 {
		t.Fatalf("up = %v", got[`llm_server_up{target="t"}`])
	}
	cut := strings.Repeat("é", probe.MaxModelNameBytes/2)
	for k, v := range got {
		if len(k) > 1024 {
			t.Errorf("series of %d bytes exported", len(k))
		}
		if strings.HasPrefix(k, "llm_server_requests_running{") {
			if !strings.Contains(k, `model="`+cut+`"`) || v != 3 {
				t.Errorf("%.300s = %v, want the cut name with 1+2", k, v)
			}
		}
	}
	if v := got[`llm_server_label_values_truncated{target="t"}`]; v != 1 {
		t.Errorf("llm_server_label_values_truncated = %v, want 1", v)
	}
	if v := got[`llm_server_requests_waiting{model="short",server="vllm",target="t"}`]; v != 3 {
		t.Errorf("short name: %v", v)
	}
}

func TestBoundLabelValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		cut      bool
	}{
		{"m", "m", false},
		{strings.Repeat("a", 256), strings.Repeat("a", 256), false},
		{strings.Repeat("a", 257), strings.Repeat("a", 256), true},
		// A rune is never split: 255 bytes of a, then a two-byte rune.
		{strings.Repeat("a", 255) + "éé", strings.Repeat("a", 255), true},
		{"bad\xffutf8", "bad\uFFFDutf8", false},
	} {
		got, cut := boundLabelValue(tc.in)
		if got != tc.want || cut != tc.cut || !utf8.ValidString(got) {
			t.Errorf("boundLabelValue(%.20q…) = %.20q…, %v; want %.20q…, %v", tc.in, got, cut, tc.want, tc.cut)
		}
	}
}
