// LLM prober / Overview: what users of the probed servers feel.
local g = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local common = import 'common.libsonnet';

{
  local c = $._config,
  local ps = common.probeMatchers(c),
  local byProbe = 'target, probe',
  local probeLegend = '{{target}}/{{probe}}',
  local series(metric, extra=[]) = promql.series(metric, common.probeMatchers(c, extra)),

  // The windows the recording rules record error ratios for.
  local recorded = std.set(std.flattenArrays([
    std.flattenArrays([[x.long, x.short] for x in a.conditions])
    for a in std.objectValues(c.sloBurnRateAlerts)
  ])),

  // burnRate is the error ratio of an SLO over window divided by its error
  // budget, from the recording rules.
  local burnRate(window) =
    assert std.member(recorded, window) : 'dashboardBurnRatePanels: window %s is not recorded (not in sloBurnRateAlerts)' % window;
    g.q(
      '%s\n/ on (job, target, probe, model, slo)\n%s'
      % [series('target_probe:llm_probe_slo_errors:ratio_rate' + window), series('target_probe:llm_probe_slo_error_budget:ratio')],
      '{{target}}/{{probe}} {{slo}} ' + window,
    ),

  // One burn-rate panel per dashboardBurnRatePanels entry, with threshold
  // lines at its alert's factors.
  local burnRatePanels = [
    local p = c.dashboardBurnRatePanels[i];
    local a = c.sloBurnRateAlerts[p.alert];
    local needs = '%s alert needs %s.' % [
      if a.page then 'page' else 'ticket',
      std.join(', or ', ['%s over %s and %s' % [promql.number(x.factor), x.long, x.short] for x in a.conditions]),
    ];
    g.timeseries(
      'Error budget burn rate, %s windows (%s)' % [p.title, std.join(', ', p.windows)],
      if i == 0
      then 'Error ratio divided by the error budget (1 − objective), from the recording rules. 1 spends the budget exactly in 30 days; the ' + needs
      else 'As the %s windows; the %s' % [c.dashboardBurnRatePanels[0].title, needs],
      'suffix:x',
      [burnRate(w) for w in p.windows],
    ) + g.withThresholdLines(std.sort([x.factor for x in a.conditions])) + g.size(12, 8)
    for i in std.range(0, std.length(c.dashboardBurnRatePanels) - 1)
  ],

  // ---- The "Now" row: is it healthy now? --------------------------------

  // A probe is stale when its last run started more than
  // probeNotRunningIntervals planned intervals ago (and at least
  // probeNotRunningMinSeconds, which covers the scrape interval): the
  // condition of LLMProbeNotRunning, so STALE here and that alert agree.
  // Probes without a planned interval (closed-loop and active-window
  // schedules, or a prober that predates the gauge) are never stale here:
  // the comparison has nothing to match, and their last result shows as
  // it is. A prober that is gone takes its series with it and shows in
  // "Prober up".
  local stale =
    '(time() - %(last)s > on (job, instance, target, probe, model) clamp_min(%(k)d * %(planned)s, %(min)d))' % {
      last: series('llm_probe_last_run_timestamp_seconds'),
      planned: series('llm_probe_planned_interval_seconds'),
      k: c.probeNotRunningIntervals,
      min: c.probeNotRunningMinSeconds,
    },

  // The mixin's own alerts, by name: the firing-alerts panel shows those
  // and no other team's.
  local alertNames = std.set(std.flattenArrays([
    [r.alert for r in grp.rules if std.objectHas(r, 'alert')]
    for grp in $.prometheusAlerts.groups
  ])),
  local firingAlerts = promql.series('ALERTS', [
    'alertstate="firing"',
    'alertname=~"%s"' % std.join('|', alertNames),
    common.mJob,
  ]),

  // The recording rule of the error budget left over sloBudgetWindow.
  local budgetRemaining = 'target_probe:llm_probe_slo_error_budget_remaining:ratio' + c.sloBudgetWindow,

  // SLO attainment over the dashboard's range, and the objective, per
  // target, probe and SLO.
  local attainment =
    'sum by (target, probe, slo) (increase(%s[$__range]))\n/\nsum by (target, probe, slo) (increase(%s[$__range]))'
    % [series('llm_probe_slo_requests_total', ['result="good"']), series('llm_probe_slo_requests_total')],
  local objective = 'max by (target, probe, slo) (%s)' % series('llm_probe_slo_objective_ratio'),

  grafanaDashboards+:: {
    'llm-prober-overview.json': g.dashboard(
      c,
      'overview',
      'Overview',
      'What users of the probed LLM servers feel. First whether it is healthy now: each probe\'s last result and staleness, prober and server up, firing alerts, the 30-day error budget left. Then SLO attainment and error-budget burn, TTFT / TPOT / ITL / latency percentiles and the TTFT distribution per target, throughput and outcomes; the feature rows below (answers, prefix cache, cancellation, connection phases, schedule, prober) open on demand.',
      common.probeVariables(c),
      [
        g.row('Now'),
        g.stat(
          'Probe OK now',
          "Each probe's last result (llm_probe_success): OK, FAIL, or STALE when its last run started more than %d planned intervals ago (llm_probe_planned_interval_seconds; at least %d s): the probe stopped running, as LLMProbeNotRunning says. A probe with several models shows its worst. Absent until a probe has run once." % [c.probeNotRunningIntervals, c.probeNotRunningMinSeconds],
          'none',
          [['orange', null], ['red', 0], ['green', 1]],
          [g.instant(
            |||
              min by (target, probe) (
                  %(success)s
                unless
                  %(stale)s
                or
                  %(stale)s * 0 - 1
              )
            ||| % { success: series('llm_probe_success'), stale: stale },
            probeLegend,
          )],
        ) + g.withValueMapping({ '-1': ['STALE', 'orange'], '0': ['FAIL', 'red'], '1': ['OK', 'green'] })
        + g.withNoValue('no probe has run') + g.size(10, 6),
        g.stat(
          'Prober up',
          'Whether Prometheus scrapes each prober instance (up{%s}). Nothing here: no prober is scraped at all (LLMProberAbsent).' % c.proberJobSelector,
          'none',
          common.okSteps,
          [g.instant(promql.series('up', [c.proberJobSelector, common.mJob]), '{{instance}}')],
        ) + common.okMapping('DOWN', 'UP') + g.withNoValue('no prober scraped') + g.size(3, 6),
        g.stat(
          'Server up',
          "Whether the prober could fetch and read each server's own /metrics on its last try (llm_server_up). Only targets with server_metrics configured; whether the server answers requests is \"Probe OK now\".",
          'none',
          common.okSteps,
          [g.instant('min by (target) (%s)' % promql.series('llm_server_up', [c.proberSelector, common.mJob, common.mTarget]), '{{target}}')],
        ) + common.okMapping('DOWN', 'UP') + g.withNoValue('no server metrics') + g.size(4, 6),
        g.stat(
          'Alerts firing',
          "This mixin's alerts firing now (ALERTS), by name and severity; the number is how many instances of it fire (targets, probes, GPUs). Paging alerts (severity %s) red, the others orange. An alert without a job label (one that fires because no prober is scraped at all) shows only with job set to All." % c.pageSeverity,
          'none',
          [['orange', null]],
          [g.instant('count by (alertname, severity) (\n%s\n)' % firingAlerts, '{{alertname}} ({{severity}})')],
        ) + g.withColorByName('.*\\(%s\\)$' % c.pageSeverity, 'red')
        + g.withNoValue('none') + g.size(7, 6),
        g.stat(
          'Error budget remaining (%s)' % promql.durationText(c.sloBudgetWindow),
          "Share of each SLO's error budget (1 − objective) over the last %s not yet spent, from the recording rule %s: 100%% untouched, 0 spent, negative overspent (red). Orange below 25%% left. A model-discovering probe shows its worst model. Recorded every %s, over what Prometheus retains when that is shorter." % [promql.durationText(c.sloBudgetWindow), budgetRemaining, c.sloBudgetInterval],
          'percentunit',
          [['red', null], ['orange', 0], ['green', 0.25]],
          [g.instant('min by (target, probe, slo) (%s)' % series(budgetRemaining), '{{target}}/{{probe}} {{slo}}')],
        ) + g.withDecimals(1) + g.withNoValue('no SLOs declared') + g.size(24, 5),

        g.row('SLOs'),
        g.table(
          'SLO attainment over the dashboard range',
          'Share of requests that were good for each declared SLO (ttft, tpot, goodput) over the selected time range, from llm_probe_slo_requests_total (failed requests count as bad), beside the objective the probe declares (llm_probe_slo_objective_ratio). Margin is attainment − objective in percentage points: red below 0, where the SLO was missed over this range whatever the objective. Three decimals, so 98.990% under a 99% objective does not round to 99.0%.',
          ['target', 'probe', 'slo'],
          [
            ['A', 'Attainment', 'percentunit', 3],
            ['B', 'Objective', 'percentunit', 3],
            ['C', 'Margin', 'suffix: pp', 3],
          ],
          [
            g.tableQuery(attainment),
            g.tableQuery(objective),
            g.tableQuery('100 * (\n%s\n-\n%s\n)' % [attainment, objective]),
          ],
        ) + g.withColumnColor('Margin', [['red', null], ['green', 0]]) + g.size(12, 8),
      ] + burnRatePanels + [
        g.timeseries(
          'SLO judgements by result',
          'Requests judged good or bad per SLO, per second.',
          'reqps',
          [g.q('sum by (target, probe, slo, result) (rate(%s[$__rate_interval]))' % series('llm_probe_slo_requests_total'), '{{target}}/{{probe}} {{slo}} {{result}}')],
        ) + g.withStack + g.size(12, 8),

        g.row('Latency of $target (successful streamed requests)') + g.withRepeat('target'),
        g.timeseries(
          'Time to first token',
          'From just before the request is written to the first chunk carrying output (docs/metrics.md). Percentiles per probe, from the native histogram where Prometheus stores one, else from the classic buckets (each probe\'s include its SLO threshold).',
          's',
          common.quantiles('llm_probe_time_to_first_token_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.heatmap(
          'Time to first token, distribution',
          "Every TTFT the target's selected probes measured, per bucket and second: a second mode or a tail the percentiles smooth over shows here. From the native histogram where Prometheus stores one (fine buckets), else from the classic buckets every selected probe shares.",
          's',
          [g.heatmapQuery(promql.histogramHeatmap('llm_probe_time_to_first_token_seconds', ps, '$__rate_interval'))],
        ) + g.size(12, 9),
        g.timeseries(
          'Time per output token',
          '(end-to-end − TTFT) / (output tokens − 1), per request. Percentiles from the native histogram; where Prometheus stores classic series only, the mean (this histogram has no classic buckets: docs/metrics.md, \"Series per probe\").',
          's',
          common.quantilesOrMean('llm_probe_time_per_output_token_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Inter-token latency',
          'Each gap between output chunks divided by the tokens of the later chunk, one observation per token: stalls stay visible. Percentiles from the native histogram; where Prometheus stores classic series only, the mean (this histogram has no classic buckets: docs/metrics.md, \"Series per probe\").',
          's',
          common.quantilesOrMean('llm_probe_inter_token_latency_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Request duration (end to end)',
          'From request start to the last byte of the final event, successful requests. Percentiles from the native histogram; where Prometheus stores classic series only, the mean (this histogram has no classic buckets: docs/metrics.md, \"Series per probe\").',
          's',
          common.quantilesOrMean('llm_probe_request_duration_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Tokens per second per request',
          'Output tokens / end-to-end latency of each successful request, as a client experiences it; the low percentile is the slow tail. Percentiles from the native histogram; where Prometheus stores classic series only, the mean (this histogram has no classic buckets: docs/metrics.md, \"Series per probe\").',
          'suffix: tok/s',
          common.quantilesOrMean('llm_probe_output_tokens_per_second', ps, byProbe, probeLegend, ['0.5', '0.1']),
        ) + g.size(12, 9),

        g.row('Throughput and outcomes'),
        g.timeseries(
          'Output tokens per second (sum)',
          'Output tokens the probes received per second, all outcomes (llm_probe_output_tokens_total).',
          'suffix: tok/s',
          [
            g.q('sum by (target, probe) (rate(%s[$__rate_interval]))' % series('llm_probe_output_tokens_total'), '{{target}}/{{probe}} output'),
            g.q('sum by (target, probe) (rate(%s[$__rate_interval]))' % series('llm_probe_input_tokens_total'), '{{target}}/{{probe}} input'),
          ],
        ) + g.size(12, 8),
        g.timeseries(
          'Outcomes',
          'Every probe attempt by outcome (docs/metrics.md, Outcomes).',
          'reqps',
          [g.q('sum by (target, probe, outcome) (rate(%s[$__rate_interval]))' % series('llm_probe_requests_total'), '{{target}}/{{probe}} {{outcome}}')],
        ) + g.withStack + g.size(12, 8),

        g.collapsedRow('Answers: correctness, reasoning, rate limits'),
        g.timeseries(
          'Wrong answers',
          "Answers that failed a probe's assertions, by assertion (llm_probe_assertion_failures_total; docs/configuration.md, assert). Empty for probes without assertions. Any at all fires LLMProbeWrongAnswers.",
          'reqps',
          [g.q('sum by (target, probe, assertion) (rate(%s[$__rate_interval]))' % series('llm_probe_assertion_failures_total'), '{{target}}/{{probe}} {{assertion}}')],
        ) + g.size(8, 8),
        g.timeseries(
          'Reasoning: first thinking vs first answer token',
          'For reasoning models: time to the first reasoning token and to the first answer token (what a user waits for), median per probe. Empty for probes whose answers never carried reasoning.',
          's',
          common.quantiles('llm_probe_time_to_first_reasoning_token_seconds', ps, byProbe, probeLegend + ' thinking', ['0.5'])
          + common.quantiles('llm_probe_time_to_first_answer_token_seconds', ps, byProbe, probeLegend + ' answer', ['0.5']),
        ) + g.size(8, 8),
        g.timeseries(
          'Rate-limit headroom',
          "remaining / limit of each target's rate limit, from the x-ratelimit-* headers of its last answers (hosted APIs and gateways; empty for servers that send none). LLMProbeRateLimitHeadroomLow fires below 10%.",
          'percentunit',
          [g.q('min by (target, resource) (%s)' % promql.series('llm_probe_rate_limit_remaining_ratio', [c.proberSelector, common.mJob, common.mTarget]), '{{target}} {{resource}}')],
        ) + g.size(8, 8),

        g.collapsedRow('Prefix cache'),
        g.timeseries(
          'TTFT with a cold and a warm prefix',
          'session and shared_prefix probes: median TTFT of the first request of each run (cold: its prefix is new to the server) and of the later ones (warm: the prefix was just sent). Empty for other probes (docs/metrics.md, Prefix cache).',
          's',
          common.quantiles('llm_probe_prefix_time_to_first_token_seconds', ps, byProbe + ', cache', probeLegend + ' {{cache}}', ['0.5']),
        ) + g.size(12, 8),
        g.timeseries(
          'Warm/cold TTFT ratio',
          "Mean warm TTFT over cold TTFT of each probe's last run: low while the server's prefix cache works, near 1 when it does not (LLMProbePrefixCacheNotHitting fires above 0.8 over 30 minutes).",
          'percentunit',
          [g.q('max by (target, probe) (%s)' % series('llm_probe_prefix_warm_cold_ttft_ratio'), probeLegend)],
        ) + g.size(12, 8),

        g.collapsedRow('Cancelled requests'),
        g.timeseries(
          'Cancelled streams by result',
          'cancel: probes: streams cut on purpose, by whether the server then freed the slot within release_timeout (released), did not (leaked; LLMServerCancelledRequestsLeaking fires) or its metrics could not tell (unknown). Empty for other probes (docs/metrics.md, Cancellation).',
          'reqps',
          [g.q('sum by (target, probe, result) (rate(%s[$__rate_interval]))' % series('llm_probe_cancellations_total'), probeLegend + ' {{result}}')],
        ) + g.withStack + g.size(12, 8),
        g.timeseries(
          'Time to free a cancelled slot',
          "From closing a cut stream to the server's running requests dropping by one: an upper bound, up to one poll_interval late, noisy on a replica with other traffic (docs/metrics.md, Cancellation).",
          's',
          common.quantiles('llm_probe_cancel_release_seconds', ps, byProbe, probeLegend, ['0.5', '0.99']),
        ) + g.size(12, 8),

        g.collapsedRow('Connection phases'),
        g.timeseries(
          'Phase duration p95 (or mean)',
          'dns, connect, tls, write (request written) and first_byte (response head), from httptrace, whatever the outcome. A phase that did not happen (connect on a pooled connection) is not observed. p95 from the native histogram, which sums across probes; where Prometheus stores classic series only, the mean (phases have no classic buckets: docs/metrics.md, "Series per probe").',
          's',
          common.quantilesOrMean('llm_probe_phase_duration_seconds', ps, 'target, phase', '{{target}} {{phase}}', ['0.95']),
        ) + g.size(12, 8),
        g.timeseries(
          'Phases per second',
          'How often each phase happened: connect and tls at the probe rate mean no connection reuse.',
          'ops',
          [g.q(promql.histogramRate('llm_probe_phase_duration_seconds', ps, 'target, phase', '$__rate_interval'), '{{target}} {{phase}}')],
        ) + g.size(12, 8),

        g.collapsedRow('Schedule health'),
        g.timeseries(
          'Schedule lag',
          'How late requests went out relative to their planned time. Seconds mean an overloaded prober, and its latencies under-sample slow periods. Percentiles from the native histogram; where Prometheus stores classic series only, the mean (this histogram has no classic buckets: docs/metrics.md, \"Series per probe\").',
          's',
          common.quantilesOrMean('llm_probe_schedule_lag_seconds', ps, byProbe, probeLegend, ['0.99', '0.5']),
        ) + g.size(12, 8),
        g.timeseries(
          'Skipped probes',
          'Planned requests not sent, by reason: concurrency_limit (the probe had max_in_flight in flight), target_concurrency_limit, overdue. Skips mean the probe\'s rate is too high for its latency.',
          'reqps',
          [g.q('sum by (target, probe, reason) (rate(%s[$__rate_interval]))' % series('llm_probe_skipped_total', []), '{{target}}/{{probe}} {{reason}}')],
        ) + g.size(12, 8),
        g.stat(
          'Time since last probe',
          'Seconds since each probe last sent a request. Far beyond its schedule means the probe stopped ("Probe OK now" shows STALE past %d planned intervals) or is outside its active window.' % c.probeNotRunningIntervals,
          's',
          [['green', null], ['orange', 300]],
          [g.instant('time() - max by (target, probe) (%s)' % series('llm_probe_last_run_timestamp_seconds'), probeLegend)],
        ) + g.size(24, 6),

        g.collapsedRow('Prober'),
        g.stat(
          'Last configuration reload',
          'llm_prober_config_last_reload_successful: 0 means the file on disk is invalid and the previous configuration is still running.',
          'none',
          common.okSteps,
          [g.instant(promql.series('llm_prober_config_last_reload_successful', [c.proberSelector, common.mJob]), '{{instance}}')],
        ) + common.okMapping('FAILED', 'OK') + g.size(12, 6),
        g.stat(
          'Scrape-time collectors',
          'llm_prober_collector_success per collector (server_metrics, gpu).',
          'none',
          common.okSteps,
          [g.instant(promql.series('llm_prober_collector_success', [c.proberSelector, common.mJob]), '{{instance}} {{collector}}')],
        ) + common.okMapping('FAILED', 'OK') + g.size(12, 6),
        g.timeseries(
          'Discovered models',
          'Models probed per target with discover_models (llm_prober_discovered_models), and those left out by max_models. A drop is a model the server no longer lists (alert LLMProberModelDisappeared).',
          'none',
          [
            g.q('sum by (target) (%s)' % promql.series('llm_prober_discovered_models', [c.proberSelector, common.mJob, common.mTarget]), '{{target}} probed'),
            g.q('sum by (target) (%s)' % promql.series('llm_prober_model_discovery_left_out', [c.proberSelector, common.mJob, common.mTarget]), '{{target}} left out'),
          ],
        ) + g.size(12, 8),
        g.stat(
          'Model lists',
          'Whether the last model-list refresh of each discovering target succeeded (llm_prober_model_discovery_stale 0). STALE: the last good list is still probed.',
          'none',
          [['green', null], ['red', 1]],
          [g.instant('max by (target) (%s)' % promql.series('llm_prober_model_discovery_stale', [c.proberSelector, common.mJob, common.mTarget]), '{{target}}')],
        ) + g.withValueMapping({ '0': ['FRESH', 'green'], '1': ['STALE', 'red'] }) + g.size(12, 8),
      ],
    ),
  },
}
