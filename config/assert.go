package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/llm-prober/llm-prober/probe"
)

// Assert is one check on a probe's answer (docs/configuration.md#assert):
// exactly one of contains, regex, equals or json_schema.
type Assert struct {
	// Name labels the check in llm_probe_assertion_failures_total; it
	// defaults to the kind, and must be unique within the probe.
	Name     string  `yaml:"name,omitempty"`
	Contains string  `yaml:"contains,omitempty"`
	Regex    string  `yaml:"regex,omitempty"`
	Equals   *string `yaml:"equals,omitempty"`
	// JSONSchema is a schema written as YAML, or as a string of JSON.
	JSONSchema any `yaml:"json_schema,omitempty"`
}

// assertProtocols are the protocols whose drivers keep the answer's text.
var assertProtocols = []string{probe.ProtocolOpenAIChat, probe.ProtocolOpenAICompletions, probe.ProtocolOpenAIResponses, probe.ProtocolTGI, probe.ProtocolOllama}

// Assertions are the probe's compiled checks; nil without assert:.
func (p *Probe) Assertions() probe.Assertions { return p.assertions }

// kindAndExpected is the one check a entry sets, its expected text, and
// how many it set.
func (a *Assert) kindAndExpected() (kind, expected string, set int, err error) {
	if a.Contains != "" {
		kind, expected, set = probe.AssertContains, a.Contains, set+1
	}
	if a.Regex != "" {
		kind, expected, set = probe.AssertRegex, a.Regex, set+1
	}
	if a.Equals != nil {
		kind, expected, set = probe.AssertEquals, *a.Equals, set+1
	}
	if a.JSONSchema != nil {
		kind, set = probe.AssertJSONSchema, set+1
		if s, ok := a.JSONSchema.(string); ok {
			expected = s
		} else {
			b, jerr := json.Marshal(a.JSONSchema)
			if jerr != nil {
				err = fmt.Errorf("json_schema cannot be turned into JSON: %v", jerr)
			}
			expected = string(b)
		}
	}
	return kind, expected, set, err
}

// validateAssert checks and compiles p's assertions (at path, the
// probe's) for a target of protocol.
func (p *Probe) validateAssert(d *decoder, path, protocol string) {
	if len(p.Assert) == 0 {
		return
	}
	if !slices.Contains(assertProtocols, protocol) {
		d.at(path+".assert", "assertions need the answer's text, which the prober keeps for %s only, not %s", strings.Join(assertProtocols, ", "), protocol)
		return
	}
	names := map[string]int{}
	p.assertions = nil
	for i, a := range p.Assert {
		ap := fmt.Sprintf("%s.assert[%d]", path, i)
		if a == nil {
			d.at(ap, "empty assertion; set one of %s", strings.Join(probe.AssertionKinds(), ", "))
			continue
		}
		kind, expected, set, err := a.kindAndExpected()
		switch {
		case set == 0:
			d.at(ap, "assertion sets no check; set one of %s", strings.Join(probe.AssertionKinds(), ", "))
			continue
		case set > 1:
			d.at(ap, "assertion sets %d checks; give each check its own list entry", set)
			continue
		case err != nil:
			d.at(ap+"."+kind, "%v", err)
			continue
		}
		name := a.Name
		if name == "" {
			name = kind
		}
		compiled, err := probe.NewAssertion(name, kind, expected)
		if err != nil {
			d.at(ap+"."+kind, "%v", err)
		}
		if !nameRE.MatchString(name) {
			d.at(ap+".name", "invalid assertion name %q; %s", name, nameRule)
			continue
		}
		if prev, dup := names[name]; dup {
			d.at(ap, "assertion name %q is also assert[%d]'s; set name: on one of them (names label llm_probe_assertion_failures_total)", name, prev)
			continue
		}
		names[name] = i
		if err == nil {
			p.assertions = append(p.assertions, compiled)
		}
	}
}
