// Package backtest replays the shipped alert and recording rules
// (alerts/llm-prober-rules.yml) over the series a simulated prober emits
// and reports, per scenario and probe rate, when the alerts page, ticket
// and resolve (issue 26). make alert-backtest runs the full matrix and
// writes its tables into docs/alerting.md; make test runs a bounded subset
// and asserts the targets (Targets: a table of scenario and
// bound, so a miss says which and by how much).
//
// # In-process, not promtool
//
// The rules are loaded by Prometheus' rules.Manager (LoadGroups) and
// evaluated by rules.Group.Eval with Prometheus' PromQL engine over a TSDB
// in a temporary directory, the way promtool test rules does, recording
// groups first and then alert groups, each at its own interval (30s where
// it sets none). promtool itself was not used because
//
//   - it reports pass or fail at the evaluation times a test names, while
//     the backtest needs every alert instance's pending/firing transitions
//     at every evaluation, read here from AlertingRule after each one;
//   - its input is every sample written out in YAML: 30 days of 15 s
//     scrapes are 172,800 samples per series, about 45 series per probe;
//     here series are generated as the simulation runs;
//   - it evaluates the whole file at every step, and a 30-day run with
//     1-day and 3-day windows would take hours; see Performance.
//
// # The model
//
// Each probe has a constant schedule (one arrival every 10s to 5m, random
// phase) and at most one request in flight: an arrival while one is in
// flight is skipped with reason concurrency_limit, which is bad for every
// SLO and extends the failure streak (issue 26's exporter design). A sent
// request's outcome and latencies come from Server (TTFT and TPOT
// lognormal with a heavy tail, transient errors) and the scenario's faults;
// it is counted when it ends, judged against the SLO exactly as
// collector's countSLOs does. The prober is scraped every 15 s (random
// phase) and exports per probe what the collector exports: requests by
// outcome (the openai chat protocol's outcomes), SLO good/bad counters and
// objectives, scheduled and skipped counters, requests in flight, the
// streak gauges (consecutive failures, failing-since timestamp), the
// planned interval, the classic TTFT histogram (collector's buckets plus
// the threshold), and the last-run gauges once the probe has run; plus
// up. In the fleet scenarios (Scenario.Siblings) the case's target is one
// of several endpoints a module discovered, each its own target, and the
// prober exports discovery's llm_prober_discovered_target_info{target,
// module} for each, which LLMProbeFleetOutlier's recording rule joins on
// to compare an endpoint with its siblings. A removed probe's series and
// a vanished prober's series (up too) get Prometheus' staleness markers at
// the next scrape; a restarting prober fails scrapes for 30 s (up 0, its
// series stale) and comes back with every counter and gauge at zero.
//
// # Performance
//
// A 6-hour rate window at 15 s scrapes reads 1,440 samples per series per
// evaluation, a 3-day one 17,280, and promtool's order re-reads them every
// 30 seconds. What keeps runs short, none of it changing what an alert
// sees:
//
//   - Chunked evaluation (rangeCache): within a chunk of evaluation times
//     (2h), each rule is evaluated at all of them before the next rule, and
//     its expression is answered from one range query over the chunk, whose
//     engine slides each window instead of re-reading it. PromQL defines a
//     range query as the instant queries at its steps; TestChunkedEqualsExact
//     checks that whole runs give the same alert episodes, to the
//     evaluation, as promtool's order with instant queries. A rule that
//     reads what it or a later rule writes (LLMTargetDown holds through its
//     own ALERTS series; Prometheus gives it the previous evaluation's
//     value) is evaluated evaluation by evaluation, with instant queries,
//     together with the rules up to the one it reads (Rules.feedbackSpans).
//   - The head is compacted into blocks after every chunk, as Prometheus
//     compacts it every two hours: a head querier lists every chunk of a
//     series for any query, and a head holding weeks would make each
//     5-minute lookup slower by the day.
//   - Only the rules an alert depends on are evaluated (Rules.AlertClosure:
//     recording rules followed by metric name); the 30-day noise runs keep
//     only the page alerts and their dependencies (Rules.PageClosure), as
//     false pages are what they measure (tickets with -noise-tickets);
//     the healthy fleet, and the subset's fleet cells, only
//     LLMProbeFleetOutlier and its recording rule (Scenario.Alerts,
//     Cell.Alerts).
//   - A raw series is written only in the time ranges some rule can read
//     it (its range plus offset, or the lookback), so a rule comparing with
//     a week ago costs a week-old window, not a week of samples. Rules
//     start evaluating at least an hour (or their longest for: plus
//     keep_firing_for:, or range over a recorded series) before time 0 over
//     a history as long as the longest window.
//   - All rates and objectives of a scenario run as separate probes (their
//     own target label) of one prober, in one storage and one evaluation
//     pass; seeds are separate worlds, run in parallel.
//
// On the shared 2-core development machine the subset takes about 80
// seconds (30 days of noise at two rates is 75 of them), and the full
// matrix, 3 seeds of every case, about 7.5 minutes on both cores.
//
// # What it does not model
//
// Alertmanager: pages and tickets are alert instances that went firing,
// before grouping and inhibition. Native histograms, schedules other than
// constant, concurrency above one, and servers' own metrics are not
// simulated; rules reading them see nothing.
package backtest
