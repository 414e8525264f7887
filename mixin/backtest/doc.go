// Package backtest replays the shipped alert and recording rules
// (alerts/llm-prober-rules.yml) over series a simulated prober emits, with
// Prometheus' own rule manager, PromQL engine and TSDB, and reports when
// each scenario pages, tickets and resolves.
package backtest
