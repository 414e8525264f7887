package backtest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Severities of the rules' severity label.
const (
	SeverityPage   = "page"
	SeverityTicket = "ticket"
)

// CaseResult is what the alerts did for one case: its target's alerts and
// the prober's own (alerts without a target label).
type CaseResult struct {
	Case
	// Paged and FirstPage: a page alert went firing at FirstPage after
	// time 0; likewise tickets.
	Paged, Ticketed        bool
	FirstPage, FirstTicket time.Duration
	// Pages and Tickets: distinct alert instances that went firing after
	// time 0; PageFirings and TicketFirings count every firing episode.
	Pages, PageFirings, Tickets, TicketFirings int
	// PagedBy and TicketedBy name the alerts, "name xN" for N instances.
	PagedBy, TicketedBy string
	// Resolve: the longest an alert of the case stayed firing after the
	// recovery or removal (Measured: there was one firing then or after).
	// Unresolved: still firing when the run ended, Resolve - RunEnd.
	Measured, Unresolved bool
	Resolve              time.Duration
	// LastToResolve names the alerts that resolved last (or never).
	LastToResolve string
	// Repaged: a page alert went firing again after the recovery or
	// removal, first at RepagedAfter.
	Repaged      bool
	RepagedAfter time.Duration
	// RunEnd is the run's length after time 0.
	RunEnd time.Duration
	// PerMonth scales firings of a healthy run to 30 days.
	PagesPerMonth, TicketsPerMonth float64
	// Episodes of the case, for logs.
	Episodes []Episode
	// SiblingEpisodes are the alert episodes of the case's siblings
	// (Case.Siblings): what fired on the healthy endpoints of its fleet.
	SiblingEpisodes []Episode
}

func evaluateCase(sc Scenario, c Case, r *RunResult) CaseResult {
	res := CaseResult{Case: c, RunEnd: sc.End}
	pageInst := map[string]bool{}
	ticketInst := map[string]bool{}
	pageNames := map[string]map[string]bool{}
	ticketNames := map[string]map[string]bool{}
	ref := sc.Recover
	if sc.Remove > 0 {
		ref = sc.Remove
	}
	last := map[string]map[string]bool{}
	for _, e := range r.Episodes {
		if e.Target != "" && e.Target != c.Target {
			if slices.Contains(c.Siblings, e.Target) {
				res.SiblingEpisodes = append(res.SiblingEpisodes, e)
			}
			continue
		}
		res.Episodes = append(res.Episodes, e)
		// Resolution: anything firing at or after the reference time.
		if ref > 0 && (e.Open || e.Resolved > ref) {
			res.Measured = true
			d := e.Resolved - ref
			if d > res.Resolve {
				res.Resolve = d
				clear(last)
			}
			if d == res.Resolve {
				addName(last, e.Alert, e.Labels.String())
			}
			if e.Open {
				res.Unresolved = true
			}
		}
		if ref > 0 && e.Severity == SeverityPage && e.Fired > ref && (!res.Repaged || e.Fired-ref < res.RepagedAfter) {
			res.Repaged, res.RepagedAfter = true, e.Fired-ref
		}
		if e.Fired < 0 {
			continue
		}
		key := e.Labels.String()
		switch e.Severity {
		case SeverityPage:
			if !res.Paged || e.Fired < res.FirstPage {
				res.Paged, res.FirstPage = true, e.Fired
			}
			pageInst[key] = true
			res.PageFirings++
			addName(pageNames, e.Alert, key)
		case SeverityTicket:
			if !res.Ticketed || e.Fired < res.FirstTicket {
				res.Ticketed, res.FirstTicket = true, e.Fired
			}
			ticketInst[key] = true
			res.TicketFirings++
			addName(ticketNames, e.Alert, key)
		}
	}
	res.Pages, res.Tickets = len(pageInst), len(ticketInst)
	res.PagedBy, res.TicketedBy = names(pageNames), names(ticketNames)
	res.LastToResolve = names(last)
	if sc.Healthy {
		month := 30 * 24 * time.Hour
		res.PagesPerMonth = float64(res.PageFirings) * float64(month) / float64(sc.End)
		res.TicketsPerMonth = float64(res.TicketFirings) * float64(month) / float64(sc.End)
	}
	return res
}

func addName(m map[string]map[string]bool, alert, key string) {
	if m[alert] == nil {
		m[alert] = map[string]bool{}
	}
	m[alert][key] = true
}

func names(m map[string]map[string]bool) string {
	var out []string
	for n, inst := range m {
		if len(inst) > 1 {
			out = append(out, fmt.Sprintf("%s x%d", n, len(inst)))
		} else {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
