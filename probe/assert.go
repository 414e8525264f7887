package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Assertions are a probe's checks on the answer's text: a server that is
// fast and wrong (a broken chat template, a bad quantisation, a deploy of
// the wrong weights) fails them. They are checked only on answers that
// arrived whole (success); a failure turns the outcome into
// OutcomeWrongAnswer.

// Assertion kinds, the keys of a probe's assert entries.
const (
	AssertContains   = "contains"
	AssertRegex      = "regex"
	AssertEquals     = "equals"
	AssertJSONSchema = "json_schema"
)

// AssertionKinds lists the kinds in the order docs give them.
func AssertionKinds() []string {
	return []string{AssertContains, AssertRegex, AssertEquals, AssertJSONSchema}
}

// Assertion is one compiled check.
type Assertion struct {
	// Name labels the check in llm_probe_assertion_failures_total.
	Name string
	// Kind is one of AssertionKinds.
	Kind string
	// Expected is what the check wants, as configured (for pages).
	Expected string
	check    func(answer string, truncated bool) error
}

// NewAssertion compiles one check. The error says what is wrong with
// expected (an invalid regex or schema), for config validation to place.
func NewAssertion(name, kind, expected string) (Assertion, error) {
	a := Assertion{Name: name, Kind: kind, Expected: expected}
	switch kind {
	case AssertContains:
		if expected == "" {
			return a, errors.New("contains needs a non-empty string")
		}
		a.check = func(answer string, _ bool) error {
			if !strings.Contains(answer, expected) {
				return fmt.Errorf("answer does not contain %q", expected)
			}
			return nil
		}
	case AssertRegex:
		re, err := regexp.Compile(expected)
		if err != nil {
			return a, fmt.Errorf("invalid regex: %w", err)
		}
		a.check = func(answer string, _ bool) error {
			if !re.MatchString(answer) {
				return fmt.Errorf("answer does not match /%s/", expected)
			}
			return nil
		}
	case AssertEquals:
		want := strings.TrimSpace(expected)
		a.check = func(answer string, truncated bool) error {
			if truncated {
				return fmt.Errorf("answer is longer than %d bytes, so not equal to the expected text", MaxAnswerBytes)
			}
			if strings.TrimSpace(answer) != want {
				return errors.New("answer differs from the expected text")
			}
			return nil
		}
	case AssertJSONSchema:
		sch, err := compileSchema(expected)
		if err != nil {
			return a, err
		}
		a.check = func(answer string, truncated bool) error {
			if truncated {
				return fmt.Errorf("answer is longer than %d bytes; not judged against the schema", MaxAnswerBytes)
			}
			return checkSchema(sch, answer)
		}
	default:
		return a, fmt.Errorf("unknown assertion %q; want one of %s", kind, strings.Join(AssertionKinds(), ", "))
	}
	return a, nil
}

// compileSchema compiles a JSON Schema given as JSON text. Only the
// document itself is loaded: a $ref to anything outside it is an error
// rather than a fetch at every reload.
func compileSchema(text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("json_schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const url = "llm-prober:assert.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("invalid json_schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("invalid json_schema: %s", oneLine(err.Error()))
	}
	return sch, nil
}

// noLoader refuses external references.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %s is not loaded; put the definition in the schema", url)
}

func checkSchema(sch *jsonschema.Schema, answer string) error {
	text := strings.TrimSpace(answer)
	// Models often fence JSON in Markdown; the fence is not the answer.
	if t, ok := strings.CutPrefix(text, "```json"); ok {
		text = strings.TrimSpace(strings.TrimSuffix(t, "```"))
	} else if t, ok := strings.CutPrefix(text, "```"); ok {
		text = strings.TrimSpace(strings.TrimSuffix(t, "```"))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("answer is not JSON: %v", err)
	}
	if dec.More() {
		return errors.New("answer has text after the JSON value")
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("answer does not match the schema: %s", oneLine(err.Error()))
	}
	return nil
}

// oneLine keeps an error message to one bounded line for logs and pages.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		cut := 300
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// AssertionFailure is one failed check of an answer.
type AssertionFailure struct {
	Name, Kind, Expected string
	Err                  error
}

// Assertions are a probe's checks, in configured order.
type Assertions []Assertion

// Names are the checks' names, for the metrics' assertion label.
func (as Assertions) Names() []string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	return names
}

// Check judges r's answer when r succeeded: every failing check is
// recorded in r.AssertionFailures, and the first makes r a wrong answer.
// A result that failed otherwise is left alone: there is no whole answer
// to judge.
func (as Assertions) Check(r *Result) {
	if len(as) == 0 || r.Outcome != OutcomeSuccess {
		return
	}
	for _, a := range as {
		if err := a.check(r.Answer, r.AnswerTruncated); err != nil {
			r.AssertionFailures = append(r.AssertionFailures, AssertionFailure{Name: a.Name, Kind: a.Kind, Expected: a.Expected, Err: err})
		}
	}
	if len(r.AssertionFailures) > 0 {
		f := r.AssertionFailures[0]
		r.Outcome = OutcomeWrongAnswer
		r.Err = fmt.Errorf("assertion %s (%s) failed: %w", f.Name, f.Kind, f.Err)
		if n := len(r.AssertionFailures); n > 1 {
			r.Err = fmt.Errorf("%w (and %d more)", r.Err, n-1)
		}
	}
}
