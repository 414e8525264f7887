package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/llm-prober/llm-prober/simulator"
)

// These test the harness's arithmetic only; the harness itself runs with
// make bench, never in make test.

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (summary{2, 1, 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s != (summary{2.5, 1, 4}) {
		t.Errorf("even: %+v", s)
	}
	if s := summarize(nil); !math.IsNaN(s.median) {
		t.Errorf("empty: %+v", s)
	}
}

func TestFirstContent(t *testing.T) {
	for in, want := range map[string]bool{
		`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`: false,
		`data: {"choices":[{"delta":{"content":"Hello"}}]}`:               true,
		`{"content":"","x":1} {"content":"a"}`:                            true,
		`"content":"`:                                                     false,
	} {
		if got := firstContent([]byte(in)); got != want {
			t.Errorf("firstContent(%s) = %t", in, got)
		}
	}
}

func TestOverheadFromRecord(t *testing.T) {
	var st overheadStats
	rec := simulator.RequestRecord{Done: true, ReceivedUnixNano: 1_000_000, FirstTokenWriteUnixNano: 21_000_000, FirstTokenUnixNano: 21_050_000}
	st.fill([]truthAnswer{
		{q: truthQuery{id: "a", ttft: 20100 * time.Microsecond}, rec: rec},
		{q: truthQuery{id: "b", ttft: time.Millisecond}, rec: simulator.RequestRecord{Done: false}},
	})
	if st.compared != 1 || st.missing != 1 {
		t.Fatalf("compared %d missing %d", st.compared, st.missing)
	}
	if got := st.overhead[0]; math.Abs(got-100e-6) > 1e-12 {
		t.Errorf("overhead %v, want 100µs (20.1ms TTFT, 20ms server reference)", got)
	}
	if got := st.flushBased[0]; math.Abs(got-50e-6) > 1e-12 {
		t.Errorf("flush-based overhead %v, want 50µs", got)
	}
}

func TestGroupSpreads(t *testing.T) {
	reqs := []burstReq{{1, "a"}, {1, "b"}, {1, "c"}, {2, "d"}, {2, "e"}}
	got := groupSpreads(reqs, map[string]int64{"a": 50, "b": 10, "c": 30, "d": 5})
	if len(got) != 1 || got[0] != 40 {
		t.Errorf("spreads %v, want [40ns] (the second burst lacks a record)", got)
	}
}

func TestSample(t *testing.T) {
	if got := sample([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 5); len(got) != 5 || got[1] != 2 || got[4] != 8 {
		t.Errorf("sample: %v", got)
	}
	if got := sample([]int{1, 2}, 5); len(got) != 2 {
		t.Errorf("sample of fewer: %v", got)
	}
}

func TestContentGaps(t *testing.T) {
	chunks := []simulator.ChunkRecord{
		{UnixNano: 100, Kind: "role"},
		{UnixNano: 1000, Kind: "content", Content: true},
		{UnixNano: 1600, Kind: "content", Content: true},
		{UnixNano: 1700, Kind: "usage"},
		{UnixNano: 2700, Kind: "content", Content: true},
	}
	got := contentGaps(chunks)
	if len(got) != 2 || got[0] != 600 || got[1] != 1100 {
		t.Errorf("gaps %v, want [600ns 1.1µs] (content chunks only)", got)
	}
}

func TestIDRing(t *testing.T) {
	var r idRing
	for i := range gapSample + 3 {
		r.add(strconv.Itoa(i))
	}
	if len(r.ids) != gapSample || !slices.Contains(r.ids, strconv.Itoa(gapSample+2)) || slices.Contains(r.ids, "2") {
		t.Errorf("ring %v: want the last %d ids", r.ids, gapSample)
	}
}

func TestCountProbeSeries(t *testing.T) {
	lp := func(v string) []*dto.LabelPair {
		return []*dto.LabelPair{{Name: proto.String("probe"), Value: proto.String(v)}}
	}
	buckets := []*dto.Bucket{{UpperBound: proto.Float64(0.1)}, {UpperBound: proto.Float64(1)}}
	fams := []*dto.MetricFamily{
		{Name: proto.String("llm_probe_requests_total"), Metric: []*dto.Metric{
			{Label: lp("p"), Counter: &dto.Counter{Value: proto.Float64(4)}},
			{Label: lp("other"), Counter: &dto.Counter{Value: proto.Float64(9)}},
		}},
		// classic only: 2 buckets + the +Inf one + _sum + _count
		{Name: proto.String("classic"), Metric: []*dto.Metric{{Label: lp("p"), Histogram: &dto.Histogram{Bucket: buckets}}}},
		// native only: one series
		{Name: proto.String("native"), Metric: []*dto.Metric{{Label: lp("p"), Histogram: &dto.Histogram{Schema: proto.Int32(3), ZeroThreshold: proto.Float64(0)}}}},
		// both: 5 + 1
		{Name: proto.String("both"), Metric: []*dto.Metric{{Label: lp("p"), Histogram: &dto.Histogram{Bucket: buckets, Schema: proto.Int32(3)}}}},
		{Name: proto.String("unlabelled"), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(1)}}}},
	}
	req, by, classic, native, other := countProbeSeries(fams, "p")
	if req != 4 || by["classic"] != 5 || by["native"] != 1 || by["both"] != 6 || by["unlabelled"] != 0 {
		t.Errorf("requests %v, by %v", req, by)
	}
	if classic != 10 || native != 2 || other != 1 {
		t.Errorf("classic %d native %d other %d, want 10, 2, 1", classic, native, other)
	}
}

func TestScaleRuns(t *testing.T) {
	o := options{scaleProbes: "1000, 5000", scaleIdleEvery: time.Hour, scaleScrapeEvery: 15 * time.Second, scaleRequestEvery: "60s,5s"}
	runs, err := scaleRuns(o)
	if err != nil {
		t.Fatal(err)
	}
	want := []scaleRun{
		{probes: 1000, perTarget: 10, every: time.Hour, scrapeEvery: 15 * time.Second},
		{probes: 5000, perTarget: 10, every: time.Hour, scrapeEvery: 15 * time.Second},
		{probes: 1000, perTarget: 1, every: time.Minute},
		{probes: 1000, perTarget: 1, every: 5 * time.Second},
	}
	if len(runs) != len(want) {
		t.Fatalf("runs %+v, want %+v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Errorf("run %d: %+v, want %+v", i, runs[i], want[i])
		}
	}
	for _, bad := range []options{
		{scaleProbes: "0", scaleRequestEvery: "5s"},
		{scaleProbes: "many", scaleRequestEvery: "5s"},
		{scaleProbes: "10", scaleRequestEvery: "5"},
		{scaleProbes: "10", scaleRequestEvery: "-5s"},
	} {
		if _, err := scaleRuns(bad); err == nil || !strings.Contains(err.Error(), "-scale-") {
			t.Errorf("%q / %q: error %v, want one naming the flag", bad.scaleProbes, bad.scaleRequestEvery, err)
		}
	}
}
