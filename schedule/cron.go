package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed five-field cron expression (minute hour day-of-month
// month day-of-week). It names minutes: bursts fire at the start of each
// matching minute, and active windows are the union of matching minutes.
// Times are interpreted in the location of the time passed in.
type Cron struct {
	expr                          string
	minute, hour, dom, month, dow uint64
	// As in Vixie cron, when both day fields are restricted a day matches
	// if either does; when one is "*", only the other one counts.
	domStar, dowStar bool
}

type cronField struct {
	name     string
	min, max int
	names    []string // names[i] is the value min+i, lower case
}

var (
	monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dowNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

func cronFields() [5]cronField {
	return [5]cronField{
		{name: "minute", min: 0, max: 59},
		{name: "hour", min: 0, max: 23},
		{name: "day of month", min: 1, max: 31},
		{name: "month", min: 1, max: 12, names: monthNames},
		// 7 is accepted for Sunday, as most crons do, and folded onto 0.
		{name: "day of week", min: 0, max: 7, names: dowNames},
	}
}

// ParseCron parses "m h dom mon dow". Each field is "*", a value, a range
// "a-b", a step "*/n" or "a-b/n" or "a/n", or a comma-separated list of
// those. Months and weekdays also take three-letter English names.
func ParseCron(expr string) (*Cron, error) {
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		return nil, fmt.Errorf("cron expression %q has %d fields; want 5: minute hour day-of-month month day-of-week", expr, len(parts))
	}
	c := &Cron{expr: strings.Join(parts, " ")}
	dst := [5]*uint64{&c.minute, &c.hour, &c.dom, &c.month, &c.dow}
	for i, f := range cronFields() {
		set, err := f.parse(parts[i])
		if err != nil {
			return nil, fmt.Errorf("cron expression %q: %s field: %w", expr, f.name, err)
		}
		*dst[i] = set
	}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar = strings.HasPrefix(parts[2], "*")
	c.dowStar = strings.HasPrefix(parts[4], "*")
	return c, nil
}

func (f cronField) parse(s string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return 0, fmt.Errorf("empty list item in %q", s)
		}
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > f.max {
				return 0, fmt.Errorf("invalid step %q; want 1 to %d", stepText, f.max)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, err
			}
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			v, err := f.value(rng)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func (f cronField) value(s string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < f.min || v > f.max {
		if f.names != nil {
			return 0, fmt.Errorf("invalid value %q; want %d to %d or a name such as %s", s, f.min, f.max, f.names[0])
		}
		return 0, fmt.Errorf("invalid value %q; want %d to %d", s, f.min, f.max)
	}
	return v, nil
}

func (c *Cron) String() string { return c.expr }

func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<t.Day()) != 0
	dow := c.dow&(1<<int(t.Weekday())) != 0
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// Matches reports whether the minute containing t matches.
func (c *Cron) Matches(t time.Time) bool {
	return c.month&(1<<int(t.Month())) != 0 && c.dayMatches(t) &&
		c.hour&(1<<t.Hour()) != 0 && c.minute&(1<<t.Minute()) != 0
}

// cronHorizon bounds the search for a next match. Any valid expression
// matches within four years (29 February); one that names an impossible day
// such as 30 February never does.
const cronHorizon = 5 * 366 * 24 * time.Hour

// Next returns the start of the first matching minute strictly after t, or
// the zero time when there is none (e.g. "0 0 30 2 *").
func (c *Cron) Next(t time.Time) time.Time {
	loc := t.Location()
	t = t.Truncate(time.Minute).Add(time.Minute)
	limit := t.Add(cronHorizon)
	for t.Before(limit) {
		switch {
		case c.month&(1<<int(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case c.hour&(1<<t.Hour()) == 0:
			t = nextHour(t)
		case c.minute&(1<<t.Minute()) == 0:
			next := t.Minute() + 1
			if rest := c.minute >> next; rest != 0 {
				t = t.Add(time.Duration(bits.TrailingZeros64(rest)+1) * time.Minute)
			} else {
				t = nextHour(t)
			}
		default:
			return t
		}
	}
	return time.Time{}
}

// nextHour steps a minute-aligned t to the next full hour by adding
// minutes, not via time.Date, so a DST change cannot send the search back
// to an hour it already left, and zones offset by half an hour stay right.
func nextHour(t time.Time) time.Time {
	return t.Add(time.Duration(60-t.Minute()) * time.Minute)
}

// Window is a set of active minutes: the union of the minutes matched by
// any of its expressions. An empty Window is always active.
type Window []*Cron

// Active reports whether t lies in an active minute.
func (w Window) Active(t time.Time) bool {
	if len(w) == 0 {
		return true
	}
	for _, c := range w {
		if c.Matches(t) {
			return true
		}
	}
	return false
}

// NextActive returns t when it is active, else the start of the next active
// minute, or the zero time when there is none.
func (w Window) NextActive(t time.Time) time.Time {
	if w.Active(t) {
		return t
	}
	var best time.Time
	for _, c := range w {
		if n := c.Next(t); !n.IsZero() && (best.IsZero() || n.Before(best)) {
			best = n
		}
	}
	return best
}

// windowScan bounds how far End looks ahead; a window still open then is
// treated as ending there, and the caller simply looks again.
const windowScan = 8 * 24 * time.Hour

// End returns the start of the first inactive minute after t (t active).
func (w Window) End(t time.Time) time.Time {
	if len(w) == 0 {
		return t.Add(windowScan)
	}
	m := t.Truncate(time.Minute)
	limit := m.Add(windowScan)
	for m = m.Add(time.Minute); m.Before(limit); m = m.Add(time.Minute) {
		if !w.Active(m) {
			return m
		}
	}
	return limit
}
