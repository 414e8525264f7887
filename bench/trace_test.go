package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

func TestParseTraceErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "t.jsonl: the trace is empty"},
		{"\n\n", "t.jsonl: the trace is empty"},
		{`{"timestamp": 5, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": 4, "input_length": 1, "output_length": 1}`,
			"t.jsonl:2: timestamp 4 is before the previous line's 5; a trace must be in time order"},
		{`{"timestamp": 0, "input_length": 1, "output_length": 0}`, "t.jsonl:1: output_length 0: want 1 to"},
		{`{"timestamp": -1, "input_length": 1, "output_length": 1}`, "t.jsonl:1: timestamp -1: want milliseconds"},
		{`{"timestamp": 0, "input_length": -3, "output_length": 1}`, "t.jsonl:1: input_length -3"},
		{`{"timestamp": 0, "input_len": 3, "output_length": 1}`, `t.jsonl:1: json: unknown field "input_len"`},
		{`{"timestamp": 0, "input_length": 3, "output_length": 1} {}`, "t.jsonl:1: more than one JSON value"},
		{`not json`, "t.jsonl:1: invalid character"},
	} {
		_, err := ParseTrace(strings.NewReader(tc.in), "t.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseTrace: any input is a trace in time order with sane lengths,
// or an error naming the file; never a panic.
func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, 2]}` + "\n" + `{"timestamp": 27482, "input_length": 6955, "output_length": 52}`))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"timestamp": 1e308, "input_length": 1, "output_length": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTrace(strings.NewReader(string(b)), "f.jsonl")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.jsonl") {
				t.Fatalf("error without the file's name: %v", err)
			}
			return
		}
		offs := tr.Offsets(3)
		for i := 1; i < len(offs); i++ {
			if offs[i] < offs[i-1] {
				t.Fatalf("offsets out of order at %d", i)
			}
		}
		for _, r := range tr.Records {
			if r.OutputLength < 1 || r.InputLength < 0 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// Shared hash ids give shared prompt prefixes, block by block; the rest
// of each prompt is its own.
func TestTracePromptsSharePrefixes(t *testing.T) {
	tr := &Trace{BlockTokens: 4, Records: []TraceRecord{
		{InputLength: 10, OutputLength: 1, HashIDs: []int64{7, 8, 9}},
		{InputLength: 10, OutputLength: 1, HashIDs: []int64{7, 8, 3}},
		{InputLength: 6, OutputLength: 1},
	}}
	words := func(i int) []string {
		return strings.Fields(traceWorkload{rec: tr.Records[i], block: tr.BlockTokens, seq: i}.prompt())
	}
	a, b, c := words(0), words(1), words(2)
	if len(a) != 10 || len(b) != 10 || len(c) != 6 {
		t.Fatalf("lengths %d %d %d, want 10 10 6", len(a), len(b), len(c))
	}
	if strings.Join(a[:8], " ") != strings.Join(b[:8], " ") {
		t.Errorf("the shared blocks 7, 8 differ:\n%v\n%v", a[:8], b[:8])
	}
	if strings.Join(a[8:], " ") == strings.Join(b[8:], " ") {
		t.Errorf("blocks 9 and 3 are the same text")
	}
}

// A trace replayed at twice its speed against the simulator: every
// record is sent once, at its timestamp halved (planned times are the
// trace's, exactly), with the record's prompt and output lengths.
func TestTraceReplay(t *testing.T) {
	var b strings.Builder
	var want []TraceRecord
	ts := 0.0
	for i := range 24 {
		ts += float64((i*37)%11) * 9 // irregular gaps, some zero
		rec := TraceRecord{Timestamp: ts, InputLength: 5 + i%7, OutputLength: 2 + i%5}
		want = append(want, rec)
		fmt.Fprintf(&b, `{"timestamp": %g, "input_length": %d, "output_length": %d}`+"\n", rec.Timestamp, rec.InputLength, rec.OutputLength)
	}
	tr, err := ParseTrace(strings.NewReader(b.String()), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	url := startSimulator(t, time.Millisecond)
	o, stdout, _ := simOptions(t, url, 4, Settings{Mode: ModeTrace, Trace: tr, Levels: []float64{2}})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	st := rep.Steps[0]
	if st.Requests != len(want) || st.Successes != len(want) {
		t.Fatalf("%d requests (%d successes), want %d\n%s", st.Requests, st.Successes, len(want), stdout)
	}
	seen := map[int]bool{}
	// Offsets count from record 0's planned time; records are in order
	// of actual start, which a starved machine may shuffle.
	var first time.Time
	for _, r := range st.records {
		if r.seq == 0 {
			first = r.planned
		}
	}
	for _, r := range st.records {
		if r.seq < 0 || r.seq >= len(want) || seen[r.seq] {
			t.Fatalf("record %d sent twice or out of range", r.seq)
		}
		seen[r.seq] = true
		rec := want[r.seq]
		if r.outcome != probe.OutcomeSuccess || r.outputTokens != rec.OutputLength || r.inputTokens != rec.InputLength {
			t.Errorf("record %d: %s, %d in / %d out tokens, want %d / %d", r.seq, r.outcome, r.inputTokens, r.outputTokens, rec.InputLength, rec.OutputLength)
		}
		if got, wantAt := r.planned.Sub(first), time.Duration(rec.Timestamp/2*float64(time.Millisecond)); got != wantAt {
			t.Errorf("record %d planned at +%s, want +%s", r.seq, got, wantAt)
		}
	}
}
