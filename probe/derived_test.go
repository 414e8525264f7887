package probe

import (
	"slices"
	"testing"
	"time"
)

const ms1 = time.Millisecond

func chunks(pairs ...int) []Chunk {
	var out []Chunk
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Chunk{At: time.Duration(pairs[i]) * ms1, Tokens: pairs[i+1]})
	}
	return out
}

func itls(r *Result) []time.Duration {
	var out []time.Duration
	r.InterTokenLatencies(func(d time.Duration) { out = append(out, d) })
	return out
}

func TestTPOT(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want time.Duration
		ok   bool
	}{
		{"one-token answer is undefined", Result{TTFT: 100 * ms1, EndToEnd: 100 * ms1, OutputTokens: 1, Chunks: chunks(100, 1)}, 0, false},
		{"no first token", Result{EndToEnd: 50 * ms1, OutputTokens: 3}, 0, false},
		{"non-streamed", Result{EndToEnd: 500 * ms1, OutputTokens: 10}, 0, false},
		{"counted tokens", Result{TTFT: 100 * ms1, EndToEnd: 190 * ms1, OutputTokens: 10, OutputTokensSource: TokenSourceCounted}, 10 * ms1, true},
		// The server says 19 tokens although only 10 chunks arrived
		// (multi-token chunks): TPOT uses the server's count.
		{"usage tokens beat chunk count", Result{TTFT: 100 * ms1, EndToEnd: 190 * ms1, OutputTokens: 19, OutputTokensSource: TokenSourceServer, Chunks: chunks(100, 1, 190, 1)}, 5 * ms1, true},
		{"end before TTFT is rejected", Result{TTFT: 100 * ms1, EndToEnd: 90 * ms1, OutputTokens: 5}, 0, false},
		{"two tokens", Result{TTFT: 100 * ms1, EndToEnd: 130 * ms1, OutputTokens: 2}, 30 * ms1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.r.TPOT()
			if got != tt.want || ok != tt.ok {
				t.Errorf("TPOT = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestInterTokenLatencies(t *testing.T) {
	tests := []struct {
		name string
		c    []Chunk
		want []time.Duration
	}{
		{"no chunks", nil, nil},
		{"one-token answer has no gaps", chunks(100, 1), nil},
		{"one token per chunk", chunks(100, 1, 110, 1, 130, 1), []time.Duration{10 * ms1, 20 * ms1}},
		{"multi-token chunk splits its gap", chunks(100, 1, 130, 3), []time.Duration{10 * ms1, 10 * ms1, 10 * ms1}},
		{"multi-token first chunk adds no gap", chunks(100, 4, 120, 1), []time.Duration{20 * ms1}},
		{"stall stays one long gap", chunks(100, 1, 110, 1, 2110, 1, 2120, 1), []time.Duration{10 * ms1, 2000 * ms1, 10 * ms1}},
		// A zero-token chunk is skipped and the next gap is measured from
		// the last chunk that carried tokens, so no time disappears.
		{"zero-token chunk", chunks(100, 1, 150, 0, 200, 1), []time.Duration{100 * ms1}},
		{"zero-token first chunk is the reference", chunks(100, 0, 120, 2), []time.Duration{10 * ms1, 10 * ms1}},
		{"negative tokens ignored", chunks(100, 1, 110, -3, 120, 1), []time.Duration{20 * ms1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Chunks: tt.c}
			got := itls(r)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ITL = %v, want %v", got, tt.want)
			}
			// Invariant: the observations cover the span from the first
			// chunk to the last token-carrying one (up to rounding).
			var sum, span time.Duration
			for _, d := range got {
				sum += d
			}
			for i := len(tt.c) - 1; i > 0; i-- {
				if tt.c[i].Tokens > 0 {
					span = tt.c[i].At - tt.c[0].At
					break
				}
			}
			if d := span - sum; d < 0 || d > time.Duration(len(got)) {
				t.Errorf("ITL sum %v, span %v", sum, span)
			}
		})
	}
}

func TestOutputTokensPerSecond(t *testing.T) {
	r := &Result{OutputTokens: 50, EndToEnd: 2 * time.Second}
	if v, ok := r.OutputTokensPerSecond(); !ok || v != 25 {
		t.Errorf("= %v, %v", v, ok)
	}
	for _, r := range []*Result{{OutputTokens: 0, EndToEnd: time.Second}, {OutputTokens: 5}} {
		if _, ok := r.OutputTokensPerSecond(); ok {
			t.Errorf("%+v: want undefined", r)
		}
	}
}
