// Recording rules (prometheusRules), named level:metric:operations.
//
// A rule's `comment::` (hidden: Prometheus never sees it) is written above
// it as a YAML comment in the generated alerts/llm-prober-rules.yml.
local promql = import '../lib/promql.libsonnet';

{
  local c = $._config,
  local n = promql.number,
  local ps = c.proberSelector,
  local by = 'job, target, probe, model, slo',

  // Every window of the burn-rate alerts (long and short, the recent and
  // the severity windows), shortest first; the long windows and the
  // recent one also record their request counts (the evidence guard and
  // "no request lately").
  local conditions = std.flattenArrays([a.conditions for a in std.objectValues(c.sloBurnRateAlerts)]),
  local windows = promql.sortDurations(std.flattenArrays([[x.long, x.short] for x in conditions]) + [c.sloRecentWindow, c.sloSevereWindow]),
  local countWindows = promql.sortDurations([x.long for x in conditions] + [c.sloRecentWindow]),

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
                multiwindow, multi-burn-rate alerts use. Skipped probes (a request
                of the probe or target still held by the server) count as bad:
                a user arriving then would have waited.
              |||,
            } else {}
          )
          for w in windows
        ] + [
          {
            record: 'target_probe:llm_probe_slo_requests:increase' + w,
            expr: 'sum by (%s) (increase(%s[%s]))' % [by, sloRequests([]), w],
          } + (
            if w == countWindows[0] then {
              comment:: |||
                Requests judged in each burn-rate alert's long window (the
                evidence guard: docs/runbook.md, "Sizing a probe's rate") and in
                the recent window (whether the probe ran lately).
              |||,
            } else {}
          )
          for w in countWindows
        ] + [
          {
            record: 'target_probe:llm_probe_slo_error_budget:ratio',
            expr: '1 - max by (%s) (%s)' % [by, promql.series('llm_probe_slo_objective_ratio', [ps])],
            comment:: |||
              The error budget of each SLO: 1 − objective. max() folds replicas of
              the prober that probe the same target.
            |||,
          },
        ],
      },
      {
        name: 'llm-prober-slo-budget.rules',
        interval: c.sloBudgetInterval,
        rules: [
          {
            record: 'target_probe:llm_probe_slo_error_budget_remaining:ratio' + c.sloBudgetWindow,
            expr: |||
              1 - (
                  sum by (%(by)s) (rate(%(bad)s[%(w)s]))
                / sum by (%(by)s) (rate(%(all)s[%(w)s]))
              )
              / on (%(by)s) target_probe:llm_probe_slo_error_budget:ratio
            ||| % { by: by, w: c.sloBudgetWindow, bad: sloRequests(['result="bad"']), all: sloRequests([]) },
            comment:: |||
              Share of each SLO's error budget left over the last %s: 1 untouched,
              0 spent, below 0 overspent (the overview dashboard's first row).
              Over what Prometheus retains when that is shorter.
            ||| % promql.durationText(c.sloBudgetWindow),
          },
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
            local metric = h[1],
            record: 'target:%s:mean5m' % metric,
            expr: promql.eitherForm(
              'sum by (job, target) (histogram_sum(rate(%(s)s[5m])))\n/\nsum by (job, target) (histogram_count(rate(%(s)s[5m])))'
              % { s: promql.series(metric, [ps]) },
              'sum by (job, target) (rate(%(s)s[5m]))\n/\nsum by (job, target) (rate(%(c)s[5m]))'
              % { s: promql.series(metric + '_sum', [ps]), c: promql.series(metric + '_count', [ps]) },
            ) + '\n',
          } + (
            if h[0] == 'client' then {
              comment:: |||
                Mean TTFT per target over 5 minutes, as the prober measures it
                (every probe of the target) and as the server reports it
                (llm_server_time_to_first_token_seconds, all the server's clients),
                from each histogram's sum and count: the mean, unlike a quantile,
                is exact whatever the buckets, and the two differ by what lies
                outside the server's clock. Native form first, classic where
                Prometheus stores no native histogram; the server's histogram is
                always classic, converted to native only by
                convert_classic_histograms_to_nhcb.
              |||,
            } else {}
          )
          for h in [['client', 'llm_probe_time_to_first_token_seconds'], ['server', 'llm_server_time_to_first_token_seconds']]
        ] + [
          {
            record: 'target:llm_ttft_gap_seconds:mean5m',
            expr: |||
              target:llm_probe_time_to_first_token_seconds:mean5m
              - on (job, target)
              target:llm_server_time_to_first_token_seconds:mean5m
            |||,
            comment:: |||
              Client TTFT − server TTFT per target: mean TTFT the prober measured
              minus the mean the server reports of itself, over 5 minutes. What
              the server's clock leaves out: the network and proxies, TLS and
              HTTP handling, tokenization before the request is queued, the
              streaming of the first chunk back. Only targets whose server exports
              a TTFT histogram (vLLM, SGLang, Triton with histogram_latencies or
              the vLLM backend) have it. The server's mean covers all its
              clients, so a busy shared server's gap moves with their mix too.
            |||,
          },
        ] + [
          {
            local q = n(std.round(c.fleetOutlierQuantile * 100)),
            local f = promql.histogramQuantileForms(n(c.fleetOutlierQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.fleetOutlierWindow),
            record: 'module_target_probe:llm_probe_time_to_first_token_seconds:p%s_%s' % [q, c.fleetOutlierWindow],
            expr: |||
              (
              %s
              )
              * on (job, target) group_left (module)
              group by (job, target, module) (%s)
            ||| % [promql.eitherFormNested(f.native, f.classic), promql.series('llm_prober_discovered_target_info', [ps])],
            comment:: |||
              TTFT p%s of every probe of the targets fleet discovery made, with
              the module that made them (llm_prober_discovered_target_info):
              the endpoints of one module are replicas of one service, compared
              by LLMProbeFleetOutlier.
            ||| % q,
          },
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
