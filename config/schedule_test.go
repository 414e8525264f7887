package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/schedule"
)

// TestScheduleParsedAtLoad: rates and cron expressions are parsed when the
// config is loaded, Spec copies them, and they print as written.
func TestScheduleParsedAtLoad(t *testing.T) {
	cfg, err := Load("testdata/good/schedules.yml")
	if err != nil {
		t.Fatal(err)
	}
	probes := map[string]*Probe{}
	for _, p := range cfg.Targets[0].Probes {
		probes[p.Name] = p
	}
	if r := probes["poisson"].Schedule.Rate; r.String() != "30/m" || r.PerSecond() != 0.5 {
		t.Errorf("rate 30/m: %q, %v/s", r, r.PerSecond())
	}
	spec := probes["poisson"].Schedule.Spec()
	if spec.Rate != 0.5 || !spec.Poisson || spec.MaxInFlight != 8 {
		t.Errorf("poisson spec: %+v", spec)
	}
	if g := probes["gamma"].Schedule.Spec(); g.Rate != 2 || g.Burstiness != 0.5 || g.Poisson {
		t.Errorf("gamma spec: %+v", g)
	}
	c := probes["cron-burst"].Schedule.Cron
	if c.String() != "0 * * * *" || c.Schedule() == nil || probes["cron-burst"].Schedule.Spec().Cron != c.Schedule() {
		t.Errorf("cron: %q %v", c, c.Schedule())
	}
	staged := probes["staged"].Schedule.Spec()
	if len(staged.Stages) != 2 || staged.Stages[0] != (schedule.Stage{Rate: 1, Duration: 5 * time.Minute}) ||
		staged.Stages[1] != (schedule.Stage{Concurrency: 8, Duration: 5 * time.Minute}) || !staged.Repeat {
		t.Errorf("stages: %+v", staged)
	}
	office := probes["office"].Schedule
	if got := office.Active.Strings(); len(got) != 1 || got[0] != "* 9-16 * * mon-fri" {
		t.Errorf("active: %q", got)
	}
	if a := office.Spec().Active; len(a) != 1 || a[0] != office.Active[0].Schedule() || a[0] == nil {
		t.Errorf("active spec: %v", a)
	}
	// Spec parses nothing: the same *schedule.Cron every time.
	first, second := office.Spec(), office.Spec()
	if first.Active[0] != second.Active[0] {
		t.Error("Spec parsed the active window again")
	}

	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rate: 2/s", "rate: 30/m", "cron: 0 * * * *", "rate: 1/s", "- '* 9-16 * * mon-fri'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("printed config lacks %q:\n%s", want, out)
		}
	}
	// Reload fingerprints hash the probe as JSON: the text must be in it.
	j, err := json.Marshal(probes["cron-burst"])
	if err != nil || !strings.Contains(string(j), `"Cron":"0 * * * *"`) || !strings.Contains(string(j), `"Rate":""`) {
		t.Errorf("JSON: %s %v", j, err)
	}
	j, _ = json.Marshal(probes["office"])
	if !strings.Contains(string(j), `"Active":["* 9-16 * * mon-fri"]`) {
		t.Errorf("JSON: %s", j)
	}
}

// TestRateAndCronNotScalars: the messages and positions of plain string
// fields, as before rates and crons were typed.
func TestRateAndCronNotScalars(t *testing.T) {
	src := `targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    probes:
      - {name: p, schedule: {rate: [2/s]}}
      - {name: q, schedule: {burst: 2, cron: {minute: 0}}}
`
	_, err := Parse([]byte(src), "x.yml", ".", noEnv)
	want := "x.yml:7:36: targets[0].probes[0].schedule.rate: want a single string value, got a list\n" +
		"x.yml:8:46: targets[0].probes[1].schedule.cron: want a single string value, got a mapping"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestNewRateAndCron(t *testing.T) {
	if r := NewRate("100/h"); r.err != nil || r.PerSecond() != 100.0/3600 || r.IsZero() {
		t.Errorf("100/h: %+v", r)
	}
	if r := NewRate("fast"); r.err == nil || r.PerSecond() != 0 || r.String() != "fast" {
		t.Errorf("fast: %+v", r)
	}
	if c := NewCron("61 * * * *"); c.err == nil || c.Schedule() != nil || c.String() != "61 * * * *" {
		t.Errorf("bad cron: %+v", c)
	}
	if !(Rate{}).IsZero() || !(Cron{}).IsZero() {
		t.Error("zero values are not zero")
	}
}
