package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustCron(t testing.TB, expr string) *Cron {
	t.Helper()
	c, err := ParseCron(expr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCronNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ expr, from, want string }{
		{"* * * * *", "2025-03-01 10:00", "2025-03-01 10:01"},
		{"0 * * * *", "2025-03-01 10:00", "2025-03-01 11:00"},
		{"*/15 9-17 * * *", "2025-03-01 17:50", "2025-03-02 09:00"},
		{"30 2 * * mon-fri", "2025-03-01 00:00", "2025-03-03 02:30"}, // Saturday → Monday
		{"0 0 1 jan,jul *", "2025-03-01 00:00", "2025-07-01 00:00"},
		{"0 0 29 2 *", "2025-03-01 00:00", "2028-02-29 00:00"},
		{"0 12 13 * fri", "2025-03-01 00:00", "2025-03-07 12:00"}, // either day field
		{"5/20 * * * *", "2025-03-01 10:06", "2025-03-01 10:25"},
		{"0 0 * * 7", "2025-03-01 00:00", "2025-03-02 00:00"}, // 7 is Sunday
	} {
		got := mustCron(t, tc.expr).Next(at(tc.from).Add(17 * time.Second))
		if want := at(tc.want); !got.Equal(want) {
			t.Errorf("%q after %s: got %s, want %s", tc.expr, tc.from, got, want)
		}
	}
	if n := mustCron(t, "0 0 30 2 *").Next(at("2025-01-01 00:00")); !n.IsZero() {
		t.Errorf("30 February matched at %s", n)
	}
}

func TestCronErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"* * * *":          "has 4 fields",
		"60 * * * *":       `minute field: invalid value "60"; want 0 to 59`,
		"* * * foo *":      `month field: invalid value "foo"; want 1 to 12 or a name such as jan`,
		"5-1 * * * *":      `range "5-1" runs backwards`,
		"*/0 * * * *":      `invalid step "0"`,
		"1,,2 * * * *":     "empty list item",
		"* * * * mon-sat/": `invalid step ""`,
	} {
		_, err := ParseCron(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want …%s…", expr, err, want)
		}
	}
}

func TestWindow(t *testing.T) {
	w := Window{mustCron(t, "* 9-16 * * mon-fri")}
	fri := time.Date(2025, 3, 7, 16, 59, 30, 0, time.UTC)
	if !w.Active(fri) || w.Active(fri.Add(time.Minute)) {
		t.Error("Friday 16:59 should be active, 17:00 not")
	}
	if end := w.End(fri); !end.Equal(time.Date(2025, 3, 7, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("end %s", end)
	}
	if next := w.NextActive(fri.Add(time.Minute)); !next.Equal(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("next active %s, want Monday 09:00", next)
	}
	if !(Window{}).Active(fri) {
		t.Error("an empty window is always active")
	}
}

// FuzzCron checks, for any expression that parses, that Next returns a
// later matching minute with no matching minute skipped in between.
func FuzzCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/7 3-5 * * *", "0 0 29 2 *", "1,2,3 * 1-7 * mon", "59 23 31 12 sun", "0 0 30 2 *"} {
		f.Add(s, int64(1741000000))
	}
	zones := []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800)}
	if berlin, err := time.LoadLocation("Europe/Berlin"); err == nil {
		zones = append(zones, berlin)
	}
	f.Fuzz(func(t *testing.T, expr string, unix int64) {
		c, err := ParseCron(expr)
		if err != nil {
			return
		}
		if _, err := ParseCron(c.String()); err != nil {
			t.Fatalf("String() %q does not parse: %v", c.String(), err)
		}
		// Keep to years time.Date handles without overflow.
		unix = unix % (200 * 365 * 86400)
		for _, loc := range zones {
			from := time.Unix(unix, 0).In(loc)
			next := c.Next(from)
			if next.IsZero() {
				continue
			}
			if !next.After(from) || next.Second() != 0 || !c.Matches(next) {
				t.Fatalf("%q after %s: got %s (matches %t)", expr, from, next, c.Matches(next))
			}
			// No earlier matching minute (checked over the first two days).
			for m := from.Truncate(time.Minute).Add(time.Minute); m.Before(next) && m.Sub(from) < 48*time.Hour; m = m.Add(time.Minute) {
				if c.Matches(m) {
					t.Fatalf("%q after %s: skipped %s, returned %s", expr, from, m, next)
				}
			}
		}
	})
}
