package probe

import (
	"errors"
	"strings"
	"testing"
)

func TestNewAssertionErrors(t *testing.T) {
	for _, tc := range []struct{ kind, expected, want string }{
		{AssertRegex, "(unclosed", "invalid regex: error parsing regexp: missing closing ): `(unclosed`"},
		{AssertJSONSchema, "{not json", "json_schema is not valid JSON"},
		{AssertJSONSchema, `{"type": "nonsense"}`, "invalid json_schema"},
		{AssertJSONSchema, `{"$ref": "https://example.com/s.json"}`, "invalid json_schema"},
		{AssertContains, "", "contains needs a non-empty string"},
		{"startswith", "x", `unknown assertion "startswith"`},
	} {
		_, err := NewAssertion("a", tc.kind, tc.expected)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.kind, tc.expected, err, tc.want)
		}
	}
}

func TestAssertionsCheck(t *testing.T) {
	schema := `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":10}}}`
	as := Assertions{}
	for _, a := range []struct{ name, kind, exp string }{{"c", AssertContains, "4"}, {"e", AssertEquals, " 4 "}, {"s", AssertJSONSchema, schema}} {
		c, err := NewAssertion(a.name, a.kind, a.exp)
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, c)
	}
	for answer, failed := range map[string]string{
		"4":                        "s",
		"```json\n{\"n\": 4}\n```": "e",
		`{"n": 40}`:                "e s",
		`{"n": 4} and more`:        "e s",
		"":                         "c e s",
	} {
		r := &Result{Outcome: OutcomeSuccess, Answer: answer}
		as.Check(r)
		var names []string
		for _, f := range r.AssertionFailures {
			names = append(names, f.Name)
		}
		if strings.Join(names, " ") != failed || (failed != "") != (r.Outcome == OutcomeWrongAnswer) {
			t.Errorf("answer %q: failed %v (outcome %s), want %q", answer, names, r.Outcome, failed)
		}
	}
	// A failed request has no whole answer to judge.
	r := &Result{Outcome: OutcomeTimeout, Err: errors.New("deadline")}
	as.Check(r)
	if r.Outcome != OutcomeTimeout || r.AssertionFailures != nil {
		t.Errorf("timeout became %s %v", r.Outcome, r.AssertionFailures)
	}
	// A truncated answer is never equal, nor judged against a schema.
	r = &Result{Outcome: OutcomeSuccess, Answer: "4", AnswerTruncated: true}
	as.Check(r)
	if len(r.AssertionFailures) != 2 || !strings.Contains(r.AssertionFailures[0].Err.Error(), "longer than") {
		t.Errorf("truncated: %+v", r.AssertionFailures)
	}
}

func TestAnswerTextBounded(t *testing.T) {
	var a answerText
	a.add(strings.Repeat("é", MaxAnswerBytes)) // 2 bytes each: cut on a rune boundary
	a.add("more")
	if !a.truncated || len(a.b) != MaxAnswerBytes || !strings.HasSuffix(string(a.b), "é") {
		t.Fatalf("len %d truncated %t", len(a.b), a.truncated)
	}
}

// FuzzAnswerText: any chunk the decoder accepted yields bounded, valid
// text and no panic.
func FuzzAnswerText(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Paris"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"},{"text":null}]}}]}`,
		`{"choices":[{"index":1,"text":"other"},{"index":0,"text":"x\u00e9"}]}`,
		`{"choices":[{"message":{"content":"{\"a\":1}"}}]}`,
		`{"choices":null}`, `[]`, `{"choices":[{"delta":{"content":7}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c oaiChunk
		if c.decode(data) != nil {
			return
		}
		var a answerText
		for range 3 {
			a.addOpenAI(data)
		}
		if len(a.b) > MaxAnswerBytes {
			t.Fatalf("kept %d bytes", len(a.b))
		}
		r := &Result{answer: &a}
		noteReasoningTokens(r, data)
		if r.Reasoning.HasTokens && r.Reasoning.Tokens < 0 {
			t.Fatalf("negative reasoning tokens")
		}
		noteCachedTokens(r, data)
		if r.HasCachedInputTokens && r.CachedInputTokens < 0 {
			t.Fatalf("negative cached tokens")
		}
	})
}
