// Package discovery finds targets at run time from Prometheus' file_sd and
// http_sd formats and from Kubernetes EndpointSlices (kubernetes.go), and
// turns them into targets of the configuration, each probed with a
// module's template, for engine.Apply to reconcile exactly as it does on
// reload.
//
// Prometheus' own discovery package is not used: its managers register
// their metrics and mechanisms in package-level registries at init, and
// the two file formats needed here are a JSON or YAML list of target
// groups, small enough to parse (and fuzz) directly. Kubernetes is
// watched with client-go (kubernetes.go says why not Prometheus'
// discovery/kubernetes).
package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Group is Prometheus' target group: endpoints sharing labels.
type Group struct {
	Targets []string          `json:"targets" yaml:"targets"`
	Labels  map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// Limits on what one source may bring: a broken or hostile file or server
// must not make the prober start unbounded probes or hold unbounded memory.
const (
	MaxSourceBytes   = 8 << 20
	MaxSourceTargets = 10_000
	maxEndpointLen   = 2048
)

// ParseGroups decodes a list of target groups: JSON, or YAML when
// isYAML (file_sd's .yml and .yaml files). Every endpoint is checked for
// length and printable UTF-8; empty strings are refused.
func ParseGroups(b []byte, isYAML bool) ([]Group, error) {
	if len(b) > MaxSourceBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a source may have", len(b), MaxSourceBytes)
	}
	var groups []Group
	if isYAML {
		if err := yaml.Unmarshal(b, &groups); err != nil {
			return nil, fmt.Errorf("invalid YAML target groups: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&groups); err != nil {
			return nil, fmt.Errorf("invalid JSON target groups (want [{\"targets\": [...], \"labels\": {...}}]): %w", err)
		}
	}
	n := 0
	for i, g := range groups {
		for j, t := range g.Targets {
			n++
			if n > MaxSourceTargets {
				return nil, fmt.Errorf("more than %d targets", MaxSourceTargets)
			}
			if err := checkEndpoint(t); err != nil {
				return nil, fmt.Errorf("group %d target %d: %w", i, j, err)
			}
		}
		if s := g.Labels["__scheme__"]; s != "" && s != "http" && s != "https" {
			return nil, fmt.Errorf("group %d: __scheme__ %q is neither http nor https", i, s)
		}
	}
	return groups, nil
}

func checkEndpoint(t string) error {
	switch {
	case t == "":
		return errors.New("empty target")
	case len(t) > maxEndpointLen:
		return fmt.Errorf("target of %d bytes, more than %d", len(t), maxEndpointLen)
	case !utf8.ValidString(t) || strings.ContainsFunc(t, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return fmt.Errorf("target %q has spaces or control characters", t)
	}
	return nil
}

// Endpoints is the groups' targets, each with its group's __scheme__ when
// it has none of its own, in order and without duplicates.
func Endpoints(groups []Group) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range groups {
		for _, t := range g.Targets {
			if s := g.Labels["__scheme__"]; s != "" && !strings.Contains(t, "://") {
				t = s + "://" + t
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}
