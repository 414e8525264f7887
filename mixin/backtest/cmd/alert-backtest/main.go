// Command alert-backtest runs the alert backtest's full matrix (package
// mixin/backtest) against the shipped rules and rewrites the generated
// region of docs/alerting.md with its tables: `make alert-backtest`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/mixin/backtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "alert-backtest:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		rulesPath = flag.String("rules", "", "rules file (default: "+backtest.RulesFile+" of the repository around the working directory)")
		docs      = flag.String("docs", "", "page whose generated region to rewrite (default: docs/alerting.md next to the rules); - prints to stdout only")
		seeds     = flag.Int("seeds", 3, "runs of each case with other random phases and latencies")
		parallel  = flag.Int("parallel", 0, "worlds simulated at once (default GOMAXPROCS)")
		only      = flag.String("scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(scenarioNames(), ",")+")")
		tickets   = flag.Bool("noise-tickets", false, "evaluate ticket alerts too in the 30-day noise runs (slower: their 1-3 day windows)")
		subset    = flag.Bool("subset", false, "run the subset that make test asserts instead of the full matrix")
		strict    = flag.Bool("strict", false, "exit 1 when a target is missed")
		episodes  = flag.String("episodes", "", "write every case's alert episodes to this file")
	)
	flag.Parse()
	path := *rulesPath
	if path == "" {
		p, err := backtest.FindRulesFile()
		if err != nil {
			return err
		}
		path = p
	}
	rs, err := backtest.LoadRules(path)
	if err != nil {
		return err
	}
	cells := backtest.FullMatrix(*seeds)
	if *subset {
		cells = backtest.SubsetMatrix()
	}
	if *only != "" {
		want := strings.Split(*only, ",")
		for _, n := range want {
			if _, ok := backtest.ScenarioByName(n); !ok {
				return fmt.Errorf("no scenario %q (have %s)", n, strings.Join(scenarioNames(), ", "))
			}
		}
		cells = slices.DeleteFunc(cells, func(c backtest.Cell) bool { return !slices.Contains(want, c.Scenario.Name) })
	}
	for i := range cells {
		cells[i].Tickets = *tickets
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv := backtest.DefaultServer()
	rep, err := backtest.Run(ctx, cells, backtest.Options{
		Rules: rs, Server: srv, Parallel: *parallel,
		Log: func(s string) { fmt.Fprintln(os.Stderr, s) },
	})
	if err != nil {
		return err
	}
	if *episodes != "" {
		var b strings.Builder
		for _, r := range rep.Results {
			fmt.Fprintf(&b, "%s\n", r.Case)
			for _, e := range r.Episodes {
				fmt.Fprintf(&b, "  %s %s\n", e, e.Labels)
			}
		}
		if err := os.WriteFile(*episodes, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	md := rep.Markdown(srv, path)
	misses := 0
	for _, v := range backtest.Check(rep.Results) {
		if !v.Met {
			misses++
			fmt.Fprintf(os.Stderr, "missed: %s: %s: %s\n", v.Case.Case, v.Target, v.Got)
		}
	}
	fmt.Fprintf(os.Stderr, "%d cases, %d targets missed, %v\n", len(rep.Results), misses, rep.Elapsed.Round(time.Second))
	out := *docs
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Dir(path)), "docs", "alerting.md")
	}
	if out == "-" {
		fmt.Print(md)
	} else {
		if err := backtest.WriteRegion(out, md); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", out)
	}
	if *strict && misses > 0 {
		return fmt.Errorf("%d targets missed", misses)
	}
	return nil
}

func scenarioNames() []string {
	var out []string
	for _, s := range backtest.Scenarios() {
		out = append(out, s.Name)
	}
	return out
}
