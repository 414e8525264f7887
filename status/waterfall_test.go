package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// newConnRecord is a streamed success over a new TLS connection: dns 2,
// connect 8, tls 20, write 0.1, first byte 30 ms; TTFT 100, end-to-end
// 400 ms.
func newConnRecord() Record {
	return Record{Start: now, RequestID: "abc", Outcome: probe.OutcomeSuccess, Streamed: true, TTFT: 100 * ms, EndToEnd: 400 * ms,
		Phases: probe.Phases{DNS: 2 * ms, HasDNS: true, Connect: 8 * ms, HasConnect: true, TLS: 20 * ms, HasTLS: true,
			Write: 100 * time.Microsecond, HasWrite: true, FirstByte: 30 * ms, HasFirstByte: true}}
}

func rowsByName(v *waterfallView) map[string]wfRow {
	m := map[string]wfRow{}
	for _, r := range v.Rows {
		m[r.Name] = r
	}
	return m
}

func TestWaterfallNewConnection(t *testing.T) {
	r := newConnRecord()
	v := waterfall(&r, now)
	// 400 ms on an axis of 0..400 in steps of 100: 528 px for 400 ms.
	if len(v.Ticks) != 5 || v.Ticks[0].X != wfX0 || v.Ticks[4].X != wfX1 || v.Ticks[4].Label != "400 ms" || v.Ticks[1].Label != "100" {
		t.Fatalf("ticks %+v", v.Ticks)
	}
	px := func(d time.Duration) int { return wfX0 + int(float64(d)/float64(400*ms)*(wfX1-wfX0)+0.5) }
	rows := rowsByName(v)
	names := []string{}
	for _, r := range v.Rows {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "dns,connect,tls,write,first byte,TTFT,end-to-end" {
		t.Fatalf("rows %s", got)
	}
	// The phases one after the other from the start.
	at := time.Duration(0)
	for _, c := range []struct {
		name string
		d    time.Duration
		val  string
	}{{"dns", 2 * ms, "2.00 ms"}, {"connect", 8 * ms, "8.00 ms"}, {"tls", 20 * ms, "20.00 ms"}, {"write", 100 * time.Microsecond, "0.100 ms"}, {"first byte", 30 * ms, "30.00 ms"}} {
		row := rows[c.name]
		wantW := max(px(at+c.d)-px(at), 1) // every phase that took time is seen
		if row.X != px(at) || row.W != wantW || row.Value != c.val || row.Missing {
			t.Errorf("%s: x %d w %d %q; want x %d w %d %q", c.name, row.X, row.W, row.Value, px(at), wantW, c.val)
		}
		if row.ValueX != row.X+row.W+5 {
			t.Errorf("%s: value at %d, not right of its bar", c.name, row.ValueX)
		}
		at += c.d
	}
	// TTFT and end-to-end from the start; the stream after the first
	// token in its own colour; the first token marked across the rows.
	ttft, e2e := rows["TTFT"], rows["end-to-end"]
	if ttft.X != wfX0 || ttft.W != px(100*ms)-wfX0 || ttft.Value != "100.0 ms" || !v.HasTTFT || v.TTFTX != px(100*ms) {
		t.Errorf("TTFT row %+v, mark at %d", ttft, v.TTFTX)
	}
	if e2e.X != wfX0 || e2e.W != px(100*ms)-wfX0 || e2e.SX != px(100*ms) || e2e.SX+e2e.SW != wfX1 || e2e.Class != "e2e" || e2e.Value != "400.0 ms" {
		t.Errorf("end-to-end row %+v", e2e)
	}
	// Rows stacked, each inside the SVG, the axis below them.
	for i, r := range v.Rows {
		if r.Y != wfTop+i*wfRowH+(wfRowH-wfBarH)/2 || r.Y+wfBarH > v.AxisY {
			t.Errorf("row %s at y %d", r.Name, r.Y)
		}
	}
	if v.H <= v.TickY || len(v.Notes) != 0 {
		t.Errorf("height %d, ticks at %d, notes %v", v.H, v.TickY, v.Notes)
	}
	want := "Phases of request abc (success), from its start: dns 2.00 ms; connect 8.00 ms; tls 20.00 ms; write 0.100 ms; first byte 30.00 ms; TTFT 100.0 ms; end-to-end 400.0 ms."
	if v.Desc != want {
		t.Errorf("title %q\nwant  %q", v.Desc, want)
	}
}

func TestWaterfallReusedConnection(t *testing.T) {
	r := newConnRecord()
	r.Phases = probe.Phases{Write: 50 * time.Microsecond, HasWrite: true, FirstByte: 20 * ms, HasFirstByte: true, ConnectionReused: true}
	v := waterfall(&r, now)
	rows := rowsByName(v)
	for _, name := range []string{"dns", "connect", "tls"} {
		if row := rows[name]; row.W != 0 || !row.Missing || row.Value != "– (reused connection)" || row.X != wfX0 {
			t.Errorf("%s on a reused connection: %+v", name, row)
		}
	}
	// Write starts at the start.
	if w := rows["write"]; w.X != wfX0 || w.W != 1 {
		t.Errorf("write %+v", w)
	}
	if len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "Reused a pooled connection") {
		t.Errorf("notes %v", v.Notes)
	}
}

func TestWaterfallRetried(t *testing.T) {
	r := newConnRecord()
	r.Retry = "eof"
	v := waterfall(&r, now)
	if len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "(eof)") || !strings.Contains(v.Notes[0], "second attempt's") {
		t.Errorf("notes %v", v.Notes)
	}
	// The retry's own phases, as for any new connection.
	if rows := rowsByName(v); rows["dns"].Missing || rows["connect"].W == 0 {
		t.Errorf("retried rows %+v", v.Rows)
	}
}

func TestWaterfallFailuresAndUnstreamed(t *testing.T) {
	// Refused: a DNS lookup, then nothing until the failure.
	r := Record{Start: now, RequestID: "x", Outcome: probe.OutcomeConnectError, Streamed: true, EndToEnd: 3 * ms,
		Phases: probe.Phases{DNS: time.Millisecond, HasDNS: true}}
	v := waterfall(&r, now)
	rows := rowsByName(v)
	if e := rows["end-to-end"]; e.Class != "fail" || e.W != wfX1-wfX0 || e.SW != 0 || e.Value != "3.00 ms" {
		t.Errorf("failed end-to-end %+v", e)
	}
	if tt := rows["TTFT"]; !tt.Missing || tt.Value != "– (no token)" || v.HasTTFT {
		t.Errorf("TTFT of a failure without a token %+v", tt)
	}
	for _, name := range []string{"connect", "tls", "write", "first byte"} {
		if row := rows[name]; !row.Missing || row.Value != "–" || row.X != rows["dns"].X+rows["dns"].W {
			t.Errorf("%s after the failure: %+v", name, row)
		}
	}
	if v.Ticks[len(v.Ticks)-1].Label != "3.0 ms" || v.Ticks[1].Label != "0.5" {
		t.Errorf("ticks %+v", v.Ticks)
	}
	// A failure after the first token: not split, the token still marked.
	r = newConnRecord()
	r.Outcome = probe.OutcomeHTTP5xx
	v = waterfall(&r, now)
	if e := rowsByName(v)["end-to-end"]; e.Class != "fail" || e.SW != 0 || !v.HasTTFT {
		t.Errorf("mid-stream failure %+v", e)
	}
	// Not streamed.
	r = newConnRecord()
	r.Streamed, r.TTFT = false, 0
	v = waterfall(&r, now)
	if tt := rowsByName(v)["TTFT"]; tt.Value != "– (not streamed)" || v.HasTTFT || rowsByName(v)["end-to-end"].SW != 0 {
		t.Errorf("not streamed %+v", v.Rows)
	}
	// Nothing measured at all: an axis still, nothing drawn.
	r = Record{Start: now, Outcome: probe.OutcomeConnectError}
	v = waterfall(&r, now)
	for _, row := range v.Rows {
		if row.W != 0 || row.SW != 0 {
			t.Errorf("bar drawn for nothing: %+v", row)
		}
	}
	if len(v.Ticks) < 2 {
		t.Errorf("ticks %+v", v.Ticks)
	}
}

func TestAxisStep(t *testing.T) {
	for _, c := range []struct {
		span       time.Duration
		step, end  time.Duration
		unit, last string
	}{
		{0, 200 * time.Microsecond, time.Millisecond, "ms", "1.0 ms"},
		{time.Millisecond, 200 * time.Microsecond, time.Millisecond, "ms", "1.0 ms"},
		{3 * time.Millisecond, 500 * time.Microsecond, 3 * time.Millisecond, "ms", "3.0 ms"},
		{1319 * time.Millisecond, 200 * time.Millisecond, 1400 * time.Millisecond, "ms", "1400 ms"},
		{7 * time.Second, time.Second, 7 * time.Second, "s", "7 s"},
		{25 * time.Second, 5 * time.Second, 25 * time.Second, "s", "25 s"},
		{10 * time.Minute, 100 * time.Second, 600 * time.Second, "s", "600 s"},
	} {
		step, end, unit := axisStep(c.span)
		if step != c.step || end != c.end || unit != c.unit || end/step > wfMaxTks {
			t.Errorf("axisStep(%v) = %v, %v, %s; want %v, %v, %s", c.span, step, end, unit, c.step, c.end, c.unit)
		}
		if got := tickLabel(end, step, unit) + " " + unit; got != c.last {
			t.Errorf("last tick of %v: %q, want %q", c.span, got, c.last)
		}
	}
}

// TestWaterfallTemplate renders the chart and checks it is built from the
// view's numbers, one bar per phase that took time.
func TestWaterfallTemplate(t *testing.T) {
	hd := newHandler(t, nil, nil, nil, nil)
	r := newConnRecord()
	r.RequestID = `<script>"x"</script>`
	v := waterfall(&r, now)
	var b strings.Builder
	if err := hd.probe.ExecuteTemplate(&b, "waterfall", v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	svg := parseSVG(t, out)
	if svg.attr("viewBox") != fmt.Sprintf("0 0 %d %d", wfW, v.H) || svg.attr("role") != "img" {
		t.Errorf("svg %v", svg.Attrs)
	}
	if n := len(svg.find("rect", "")); n != 8 { // 5 phases, TTFT, end-to-end in two parts
		t.Errorf("%d bars, want 8", n)
	}
	if len(svg.find("path", "mark")) != 1 || len(svg.find("path", "grid")) != len(v.Ticks) {
		t.Error("want one first-token mark and a grid line per tick")
	}
	if strings.Contains(out, "<script>") || svg.find("title", "")[0].Text != v.Desc {
		t.Errorf("title not escaped or not the description:\n%s", out)
	}
	for _, row := range svg.find("text", "value") {
		if strings.TrimSpace(row.Text) == "" {
			t.Error("a row without its value")
		}
	}
}
