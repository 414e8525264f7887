package probe

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReportAnswerLines(t *testing.T) {
	var b strings.Builder
	r := &Result{Outcome: OutcomeWrongAnswer, Streamed: true, TTFT: 10 * time.Millisecond, TraceID: "0af7651916cd43dd8448eb211c80319c",
		Chunks:    []Chunk{{At: 10 * time.Millisecond, Tokens: 1}, {At: 900 * time.Millisecond, Tokens: 1}},
		Reasoning: Reasoning{Seen: true, FirstReasoning: 10 * time.Millisecond, FirstAnswer: 900 * time.Millisecond, Tokens: 1, HasTokens: true},
		RateLimit: &RateLimit{Requests: RateLimitWindow{Limit: 60, Remaining: 3, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true},
			Malformed: []string{"x-ratelimit-reset-tokens"}},
		Answer:            "Lyon",
		AssertionFailures: []AssertionFailure{{Name: "capital", Kind: AssertContains, Expected: "Paris", Err: errors.New(`answer does not contain "Paris"`)}},
	}
	if err := WriteReport(&b, "t", "p", r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"trace id           0af7651916cd43dd8448eb211c80319c",
		"first reasoning 10.00 ms", "first answer       900.0 ms", "reasoning tokens   1 (server)", "second token       900.0 ms",
		"rate limit requests  3 of 60 left, resets in 1s", "malformed headers", `answer             "Lyon"`,
		`failed capital   contains "Paris": answer does not contain "Paris"`,
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
