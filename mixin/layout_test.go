package mixin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLayoutCollapsedRows: the panels after a collapsed row go inside it,
// placed as they will be when it opens; the closed row takes one line, so
// the next row follows right under it; ids stay unique across both levels.
func TestLayoutCollapsedRows(t *testing.T) {
	out, err := EvaluateSnippet(`
		local g = import 'lib/grafana.libsonnet';
		local p(title, w, h) = g.timeseries(title, 'd', 's', [g.q('up', '')]) + g.size(w, h);
		g.layout([
			g.row('open'),
			p('a', 12, 8), p('b', 12, 8), p('c', 24, 4),
			g.collapsedRow('closed'),
			p('d', 12, 8), p('e', 12, 8), p('f', 12, 6),
			g.collapsedRow('closed too'),
			p('g', 24, 8),
			g.row('open again') + g.withRepeat('target'),
			p('h', 24, 8),
		])`)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Repeat  string `json:"repeat"`
		GridPos struct{ X, Y, W, H int }
		Panels  []panel `json:"panels"`
	}
	var ps []panel
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		s := []string{p.Title + " " + pos(p.ID, p.GridPos.X, p.GridPos.Y)}
		for _, c := range p.Panels {
			s = append(s, c.Title+" "+pos(c.ID, c.GridPos.X, c.GridPos.Y))
		}
		got = append(got, strings.Join(s, " / "))
	}
	want := []string{
		"open #1 0,0",
		"a #2 0,1", "b #3 12,1", "c #4 0,9",
		"closed #5 0,13 / d #6 0,14 / e #7 12,14 / f #8 0,22",
		"closed too #9 0,14 / g #10 0,15",
		"open again #11 0,15",
		"h #12 0,16",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ps[len(ps)-2].Repeat != "target" {
		t.Errorf("repeated row: repeat %q, want target", ps[len(ps)-2].Repeat)
	}
}

func pos(id, x, y int) string { return fmt.Sprintf("#%d %d,%d", id, x, y) }

// TestHistogramHeatmap: the classic form of a heatmap query keeps only the
// bucket boundaries every selected series has, so that summing probes
// whose layouts add their own SLO thresholds never makes the cumulative
// counts fall back.
func TestHistogramHeatmap(t *testing.T) {
	out, err := EvaluateSnippet(`(import 'lib/promql.libsonnet').histogramHeatmap('h', ['a="b"'], '1m')`)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := `sum(rate(h{a="b"}[1m]))
or
sum by (le) (
    rate(h_bucket{a="b"}[1m])
  and on (le)
    (count by (le) (h_bucket{a="b"}) == scalar(count(count without (le) (h_bucket{a="b"}))))
)`
	if got != want {
		t.Errorf("histogramHeatmap =\n%s\nwant\n%s", got, want)
	}
}
