package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/schedule"
)

// Schedule says when a probe is sent: exactly one of every, rate,
// concurrency, burst or stages, optionally limited to active windows.
type Schedule struct {
	// Every is a fixed interval; Jitter delays each send by a random
	// amount up to it, so many probers started together do not send in
	// lockstep.
	Every  model.Duration `yaml:"every,omitempty"`
	Jitter model.Duration `yaml:"jitter,omitempty"`
	// Rate is open-loop arrivals such as "2/s", "30/m" or "100/h", spaced
	// by Distribution: constant or poisson.
	Rate         Rate   `yaml:"rate,omitempty"`
	Distribution string `yaml:"distribution,omitempty"`
	// Burstiness shapes gamma gaps: 1 is Poisson, below 1 burstier,
	// above 1 more regular; set only with distribution: gamma.
	Burstiness *float64 `yaml:"burstiness,omitempty"`
	// Concurrency is a closed loop of that many workers.
	Concurrency int `yaml:"concurrency,omitempty"`
	// Burst sends that many requests together, every Period or at Cron.
	Burst  int            `yaml:"burst,omitempty"`
	Period model.Duration `yaml:"period,omitempty"`
	Cron   Cron           `yaml:"cron,omitempty"`
	// Stages run in turn; Repeat starts them over after the last.
	Stages []*Stage `yaml:"stages,omitempty"`
	Repeat *bool    `yaml:"repeat,omitempty"`
	// Active limits sending to the minutes these cron expressions match.
	Active CronList `yaml:"active,omitempty"`
	// MaxInFlight bounds this probe's requests in flight; open-loop
	// arrivals beyond it are skipped and counted.
	MaxInFlight int `yaml:"max_in_flight"`
}

// Stage is one step of a staged schedule.
type Stage struct {
	Rate        Rate           `yaml:"rate,omitempty"`
	Concurrency int            `yaml:"concurrency,omitempty"`
	Duration    model.Duration `yaml:"duration"`
}

// Rate is an arrival rate as written, "N/s", "N/m" or "N/h", parsed once
// when the config is loaded. It prints as written.
type Rate struct {
	text      string
	perSecond float64
	// err is the parse error, reported by validation at the key.
	err error
}

// NewRate parses text as a rate. An invalid rate is kept with its error,
// which validation reports; check-config never lets one through.
func NewRate(text string) Rate {
	r := Rate{text: text}
	r.perSecond, r.err = ParseRate(text)
	return r
}

// PerSecond is the rate in arrivals per second; 0 when unset or invalid.
func (r Rate) PerSecond() float64 { return r.perSecond }

// String is the rate as written.
func (r Rate) String() string { return r.text }

// IsZero reports whether no rate is set (omitempty honours it).
func (r Rate) IsZero() bool { return r.text == "" }

// UnmarshalYAML takes the rate as written and parses it.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	text, err := scalarString(n)
	if err != nil {
		return err
	}
	*r = NewRate(text)
	return nil
}

// MarshalYAML prints the rate as written.
func (r Rate) MarshalYAML() (any, error) { return r.text, nil }

// MarshalText is the rate as written, so JSON (reload fingerprints) sees
// the text too.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.text), nil }

// Cron is a cron expression as written, parsed once when the config is
// loaded. It prints as written.
type Cron struct {
	expr   string
	parsed *schedule.Cron
	// err is the parse error, reported by validation at the key.
	err error
}

// NewCron parses expr. An invalid expression is kept with its error, which
// validation reports; check-config never lets one through.
func NewCron(expr string) Cron {
	c := Cron{expr: expr}
	c.parsed, c.err = schedule.ParseCron(expr)
	if c.err != nil {
		c.parsed = nil
	}
	return c
}

// Schedule is the parsed expression; nil when unset or invalid.
func (c Cron) Schedule() *schedule.Cron { return c.parsed }

// String is the expression as written.
func (c Cron) String() string { return c.expr }

// IsZero reports whether no expression is set (omitempty honours it).
func (c Cron) IsZero() bool { return c.expr == "" }

// UnmarshalYAML takes the expression as written and parses it.
func (c *Cron) UnmarshalYAML(n *yaml.Node) error {
	expr, err := scalarString(n)
	if err != nil {
		return err
	}
	*c = NewCron(expr)
	return nil
}

// MarshalYAML prints the expression as written.
func (c Cron) MarshalYAML() (any, error) { return c.expr, nil }

// MarshalText is the expression as written, for JSON.
func (c Cron) MarshalText() ([]byte, error) { return []byte(c.expr), nil }

// scalarString is a scalar node's value, with the messages the decoder
// gives plain string fields.
func scalarString(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a single %s value, got %s", kindName(reflect.String), describe(n))
	}
	var s string
	if err := n.Decode(&s); err != nil {
		return "", fmt.Errorf("want a %s, got %q", kindName(reflect.String), n.Value)
	}
	return s, nil
}

// CronList is one cron expression or a list of them.
type CronList []Cron

// UnmarshalYAML accepts `active: "* 9-17 * * mon-fri"` as well as a list.
func (c *CronList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*c = CronList{NewCron(n.Value)}
		return nil
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return fmt.Errorf("want a cron expression or a list of them: %s", cleanYAMLError(err))
		}
		*c = make(CronList, len(list))
		for i, expr := range list {
			(*c)[i] = NewCron(expr)
		}
		return nil
	}
	return fmt.Errorf("want a cron expression or a list of them, got %s", describe(n))
}

// Strings are the expressions as written.
func (c CronList) Strings() []string {
	out := make([]string, len(c))
	for i, e := range c {
		out[i] = e.expr
	}
	return out
}

// Limits on schedule values: far beyond what a prober should send, low
// enough that a typo cannot make it flood a server or exhaust itself.
const (
	maxRatePerSecond = 10000
	maxConcurrency   = 4096
	maxInFlightLimit = 65536
	// maxDefaultInFlight caps the default max_in_flight of open-loop
	// rates, which is otherwise rate × timeout.
	maxDefaultInFlight = 1024
)

// ScheduleDistributions are the spacings of rate schedules.
func ScheduleDistributions() []string { return []string{"constant", "poisson", "gamma"} }

// ParseRate parses "N/s", "N/m" or "N/h" into arrivals per second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	var per float64
	switch strings.TrimSpace(unit) {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		ok = false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid rate %q; want a number per s, m or h, e.g. 2/s, 30/m, 100/h", s)
	}
	if v <= 0 || v/per > maxRatePerSecond {
		return 0, fmt.Errorf("rate %q out of range; want more than 0 and at most %d/s", s, maxRatePerSecond)
	}
	return v / per, nil
}

// kinds lists which of the exclusive schedule keys are set.
func (s *Schedule) kinds() []string {
	var k []string
	if s.Every != 0 {
		k = append(k, "every")
	}
	if !s.Rate.IsZero() {
		k = append(k, "rate")
	}
	if s.Concurrency != 0 {
		k = append(k, "concurrency")
	}
	if s.Burst != 0 {
		k = append(k, "burst")
	}
	if len(s.Stages) > 0 {
		k = append(k, "stages")
	}
	return k
}

// peakInFlight is what the schedule needs in flight at most for a probe
// with the given timeout: N for closed loops and bursts, rate × timeout for
// rates (every arrival may take the whole timeout), 1 for intervals.
func (s *Schedule) peakInFlight(timeout time.Duration) int {
	rateNeed := func(r Rate) int {
		if r.err != nil {
			return 1
		}
		return int(min(math.Ceil(r.perSecond*timeout.Seconds()), maxDefaultInFlight))
	}
	switch {
	case s.Concurrency > 0:
		return s.Concurrency
	case s.Burst > 0:
		return s.Burst
	case !s.Rate.IsZero():
		return max(rateNeed(s.Rate), 1)
	case len(s.Stages) > 0:
		n := 1
		for _, st := range s.Stages {
			switch {
			case st == nil:
			case st.Concurrency > 0:
				n = max(n, st.Concurrency)
			case !st.Rate.IsZero():
				n = max(n, rateNeed(st.Rate))
			}
		}
		return n
	}
	return 1
}

func (s *Schedule) applyDefaults(timeout time.Duration) {
	if s.Distribution == "" && (!s.Rate.IsZero() || len(s.Stages) > 0) {
		s.Distribution = "constant"
	}
	if s.Distribution == "gamma" && s.Burstiness == nil {
		s.Burstiness = new(1.0)
	}
	if s.Repeat == nil && len(s.Stages) > 0 {
		s.Repeat = new(false)
	}
	if s.MaxInFlight == 0 {
		s.MaxInFlight = s.peakInFlight(timeout)
	}
}

// minConcurrency is the largest closed loop the schedule runs.
func (s *Schedule) maxConcurrency() int {
	n := s.Concurrency
	for _, st := range s.Stages {
		if st != nil {
			n = max(n, st.Concurrency)
		}
	}
	return n
}

func (s *Schedule) validate(d *decoder, path string, targetMaxInFlight int) {
	kinds := s.kinds()
	switch len(kinds) {
	case 0:
		d.at(path, "missing schedule; set one of every, rate, concurrency, burst or stages, e.g. schedule: {every: 15s}")
	case 1:
	default:
		d.at(path+"."+kinds[1], "set only one of every, rate, concurrency, burst or stages; have %s", strings.Join(kinds, " and "))
	}
	positive(d, path+".every", s.Every)
	switch {
	case s.Jitter < 0:
		d.at(path+".jitter", "must not be negative")
	case s.Jitter > 0 && s.Every == 0:
		d.at(path+".jitter", "jitter applies to every: only")
	case s.Jitter > s.Every:
		d.at(path+".jitter", "jitter %s is longer than the interval %s", s.Jitter, s.Every)
	}
	if s.Rate.err != nil {
		d.at(path+".rate", "%s", s.Rate.err)
	}
	if s.Distribution != "" {
		if !slices.Contains(ScheduleDistributions(), s.Distribution) {
			d.at(path+".distribution", "unknown distribution %q; want one of %s", s.Distribution, strings.Join(ScheduleDistributions(), ", "))
		} else if s.Rate.IsZero() && len(s.Stages) == 0 {
			d.at(path+".distribution", "distribution applies to rate: and stages: only")
		}
	}
	if s.Burstiness != nil {
		switch b := *s.Burstiness; {
		case s.Distribution != "gamma":
			d.at(path+".burstiness", "burstiness shapes gamma gaps; set distribution: gamma with it")
		case !(b > 0) || math.IsInf(b, 0):
			d.at(path+".burstiness", "want a number > 0 (1 is Poisson, below 1 burstier, above 1 more regular), got %g", b)
		}
	}
	if s.Concurrency < 0 || s.Concurrency > maxConcurrency {
		d.at(path+".concurrency", "want 1 to %d, got %d", maxConcurrency, s.Concurrency)
	}
	s.validateBurst(d, path)
	s.validateStages(d, path)
	for i, c := range s.Active {
		if c.err != nil {
			d.at(path+".active", "%s", c.err)
			continue
		}
		if c.parsed.Next(time.Now()).IsZero() {
			d.at(path+".active", "active[%d] %q never matches", i, c.expr)
		}
	}
	switch mif := s.MaxInFlight; {
	case mif < 1 || mif > maxInFlightLimit:
		d.at(path+".max_in_flight", "want 1 to %d, got %d", maxInFlightLimit, mif)
	case s.maxConcurrency() > mif:
		d.at(path+".max_in_flight", "max_in_flight %d is below the concurrency %d; a closed loop needs a slot per worker", mif, s.maxConcurrency())
	case s.maxConcurrency() > targetMaxInFlight:
		d.at(path+".concurrency", "concurrency %d exceeds the target's max_in_flight %d; raise the target's max_in_flight", s.maxConcurrency(), targetMaxInFlight)
	}
}

func (s *Schedule) validateBurst(d *decoder, path string) {
	if s.Burst == 0 {
		if s.Period != 0 {
			d.at(path+".period", "period applies to burst: only")
		}
		if !s.Cron.IsZero() {
			d.at(path+".cron", "cron applies to burst: only")
		}
		return
	}
	if s.Burst < 1 || s.Burst > maxConcurrency {
		d.at(path+".burst", "want 1 to %d requests, got %d", maxConcurrency, s.Burst)
	}
	switch {
	case s.Period != 0 && !s.Cron.IsZero():
		d.at(path+".cron", "set either period or cron for a burst, not both")
	case s.Period == 0 && s.Cron.IsZero():
		d.at(path+".burst", "a burst needs a period (e.g. period: 5m) or cron times (e.g. cron: \"0 * * * *\")")
	case s.Period < 0:
		positive(d, path+".period", s.Period)
	case !s.Cron.IsZero():
		if s.Cron.err != nil {
			d.at(path+".cron", "%s", s.Cron.err)
		} else if s.Cron.parsed.Next(time.Now()).IsZero() {
			d.at(path+".cron", "cron %q never matches", s.Cron.expr)
		}
	}
}

func (s *Schedule) validateStages(d *decoder, path string) {
	if s.Repeat != nil && len(s.Stages) == 0 {
		d.at(path+".repeat", "repeat applies to stages: only")
	}
	for i, st := range s.Stages {
		sp := fmt.Sprintf("%s.stages[%d]", path, i)
		if st == nil {
			d.at(sp, "empty stage; want {rate or concurrency, duration}")
			continue
		}
		switch {
		case !st.Rate.IsZero() && st.Concurrency != 0:
			d.at(sp+".concurrency", "set either rate or concurrency in a stage, not both")
		case !st.Rate.IsZero():
			if st.Rate.err != nil {
				d.at(sp+".rate", "%s", st.Rate.err)
			}
		case st.Concurrency < 1 || st.Concurrency > maxConcurrency:
			if st.Concurrency == 0 {
				d.at(sp, "a stage needs a rate (e.g. rate: 2/s) or a concurrency")
			} else {
				d.at(sp+".concurrency", "want 1 to %d, got %d", maxConcurrency, st.Concurrency)
			}
		}
		if st.Duration <= 0 {
			d.at(sp+".duration", "a stage needs a positive duration, e.g. duration: 10m")
		}
	}
}

// gammaShape is the scheduler's Burstiness: zero unless gamma gaps.
func (s *Schedule) gammaShape() float64 {
	if s.Distribution != "gamma" || s.Burstiness == nil {
		return 0
	}
	return *s.Burstiness
}

// Spec converts a validated schedule into the scheduler's terms: a copy of
// what was parsed at load, with nothing left to fail.
func (s *Schedule) Spec() schedule.Spec {
	spec := schedule.Spec{
		Every:       time.Duration(s.Every),
		Jitter:      time.Duration(s.Jitter),
		Rate:        s.Rate.PerSecond(),
		Poisson:     s.Distribution == "poisson",
		Burstiness:  s.gammaShape(),
		Concurrency: s.Concurrency,
		Burst:       s.Burst,
		Period:      time.Duration(s.Period),
		Cron:        s.Cron.Schedule(),
		Repeat:      s.Repeat != nil && *s.Repeat,
		MaxInFlight: s.MaxInFlight,
	}
	for _, st := range s.Stages {
		spec.Stages = append(spec.Stages, schedule.Stage{Rate: st.Rate.PerSecond(), Concurrency: st.Concurrency, Duration: time.Duration(st.Duration)})
	}
	for _, c := range s.Active {
		spec.Active = append(spec.Active, c.Schedule())
	}
	return spec
}
