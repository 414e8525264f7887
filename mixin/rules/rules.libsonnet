// Recording rules (prometheusRules), named level:metric:operations.
//
// A rule's `comment::` (hidden: Prometheus never sees it) is written above
// it as a YAML comment in the generated alerts/llm-prober-rules.yml.
local promql = import '../lib/promql.libsonnet';

{
  local c = $._config,
  local ps = c.proberSelector,
  local by = 'job, target, probe, model, slo',

  // Every window of the burn-rate alerts, shortest first, and the short
  // windows with the minimum request count each must hold.
  local conditions = std.flattenArrays([a.conditions for a in std.objectValues(c.sloBurnRateAlerts)]),
  local windows = promql.sortDurations(std.flattenArrays([[x.long, x.short] for x in conditions])),
  local shortWindows = promql.sortDurations([x.short for x in conditions]),
  local minRequests(w) =
    local ns = std.uniq(std.sort([x.minRequests for x in conditions if x.short == w]));
    assert std.length(ns) == 1 : 'sloBurnRateAlerts: short window %s has different minRequests %s' % [w, ns];
    ns[0],

  local sloRequests(matchers) = promql.series('llm_probe_slo_requests_total', [ps] + matchers),

  prometheusRules+:: {
    groups+: [
      {
        name: 'llm-prober-slo.rules',
        interval: c.sloRulesInterval,
        rules: [
          {
            record: 'target_probe:llm_probe_slo_errors:ratio_rate' + w,
            expr: |||
              sum by (%(by)s) (rate(%(bad)s[%(w)s]))
              / sum by (%(by)s) (rate(%(all)s[%(w)s]))
            ||| % { by: by, w: w, bad: sloRequests(['result="bad"']), all: sloRequests([]) },
          } + (
            if w == windows[0] then {
              comment:: |||
                Error ratio of each SLO (ttft, tpot, goodput) over the windows the
                multiwindow, multi-burn-rate alerts use.
              |||,
            } else {}
          )
          for w in windows
        ] + [
          {
            record: 'target_probe:llm_probe_slo_requests:increase' + w,
            expr: 'sum by (%s) (increase(%s[%s]))' % [by, sloRequests([]), w],
          } + (
            if w == shortWindows[0] then {
              comment:: |||
                Requests judged in each burn-rate alert's short window, for the
                minimum-traffic guard below.
              |||,
            } else {}
          )
          for w in shortWindows
        ] + [
          {
            record: 'target_probe:llm_probe_slo_error_budget:ratio',
            expr: '1 - max by (%s) (%s)' % [by, promql.series('llm_probe_slo_objective_ratio', [ps])],
            comment:: |||
              The error budget of each SLO: 1 − objective. max() folds replicas of
              the prober that probe the same target.
            |||,
          },
        ] + [
          {
            record: 'llm_probe:slo_min_requests:' + w,
            expr: 'vector(%d)' % minRequests(w),
          } + (
            if w == shortWindows[0] then {
              comment:: |||
                Minimum requests a burn-rate alert's short window must hold before
                the alert may fire. Probes are low-rate: with 20 probes in 5 minutes
                one failure is already a 5% error ratio, i.e. 5x the budget of a 99%
                SLO. Raise these (minRequests in the mixin's sloBurnRateAlerts) to
                demand more evidence, lower them for slow probes
                (see docs/runbook.md, "Sizing a probe's rate").
              |||,
            } else {}
          )
          for w in shortWindows
        ],
      },
      {
        name: 'llm-prober-ttft.rules',
        rules: [
          {
            record: 'target_probe:llm_probe_time_to_first_token_seconds:p95_5m',
            expr: promql.histogramQuantile('0.95', 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', '5m') + '\n',
            comment:: |||
              TTFT as the prober measures it and as the server reports it, side
              by side: the serving-stack dashboard's "TTFT: the prober's and the
              server's own" panel over a fixed 5-minute window. The difference is
              the network, proxies and the client. Histograms are read native
              first, classic buckets where Prometheus stores no native histogram
              (the same two forms the dashboards use; docs/deployment.md,
              "Histogram modes").
            |||,
          },
        ] + [
          {
            local f = promql.histogramQuantileForms('0.95', 'vllm:' + m, [c.vllmSelector], 'model_name', '5m'),
            record: 'model:vllm_%s:p95_5m' % m,
            expr: |||
              label_replace(
              %s,
                "model", "$1", "model_name", "(.*)"
              )
            ||| % promql.eitherFormNested(f.native, f.classic),
          } + (
            if m == 'time_to_first_token_seconds' then {
              comment:: |||
                vLLM's own TTFT and queue time, from Prometheus scraping vLLM's
                /metrics directly (not through the prober), per served model name.
                model_name is copied to model, the probes' label, so that these
                join the prober's on (model). label_replace comes last: Prometheus
                2.x drops native histogram samples passing through it.
              |||,
            } else {}
          )
          for m in ['time_to_first_token_seconds', 'request_queue_time_seconds']
        ] + [
          {
            record: 'target_phase:llm_server_phase_seconds:mean5m',
            expr: |||
              sum by (%(by)s) (rate(%(seconds)s[5m]))
              / sum by (%(by)s) (rate(%(requests)s[5m]))
            ||| % {
              by: 'job, target, server, model, phase',
              seconds: promql.series('llm_server_phase_seconds_total', [ps]),
              requests: promql.series('llm_server_phase_requests_total', [ps]),
            },
            comment:: |||
              Servers that export only totals, Triton's queue and compute duration
              counters among them, normalised by the prober (docs/metrics.md,
              section 2): mean seconds per request in each server-side phase
              (queue, compute, e2e, ...). Counters, so the same in every
              histogram mode.
            |||,
          },
        ],
      },
    ],
  },
}
