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

  grafanaDashboards+:: {
    'llm-prober-overview.json': g.dashboard(
      c,
      'overview',
      'Overview',
      'What users of the probed LLM servers feel: SLO attainment and error-budget burn, TTFT / TPOT / ITL / latency percentiles, throughput, outcomes, connection phases and whether the prober keeps its schedule.',
      common.probeVariables(c),
      [
        g.row('SLOs'),
        g.stat(
          'SLO attainment over the dashboard range',
          'Share of requests that were good for each declared SLO (ttft, tpot, goodput) over the selected time range, from llm_probe_slo_requests_total. Failed requests count as bad. Compare with the objective beside it.',
          'percentunit',
          [['red', null], ['orange', 0.95], ['green', 0.99]],
          [g.instant(
            'sum by (target, probe, slo) (increase(%s[$__range]))\n/\nsum by (target, probe, slo) (increase(%s[$__range]))'
            % [series('llm_probe_slo_requests_total', ['result="good"']), series('llm_probe_slo_requests_total')],
            '{{target}}/{{probe}} {{slo}}',
          )],
        ) + g.size(8, 8),
        g.stat(
          'Objective',
          'The objective each probe declares (slo.objective), exported as llm_probe_slo_objective_ratio.',
          'percentunit',
          [['blue', null]],
          [g.instant('max by (target, probe, slo) (%s)' % series('llm_probe_slo_objective_ratio'), '{{target}}/{{probe}} {{slo}}')],
        ) + g.size(4, 8),
      ] + burnRatePanels + [
        g.timeseries(
          'SLO judgements by result',
          'Requests judged good or bad per SLO, per second.',
          'reqps',
          [g.q('sum by (target, probe, slo, result) (rate(%s[$__rate_interval]))' % series('llm_probe_slo_requests_total'), '{{target}}/{{probe}} {{slo}} {{result}}')],
        ) + g.withStack + g.size(12, 8),

        g.row('Latency (successful streamed requests)'),
        g.timeseries(
          'Time to first token',
          'From just before the request is written to the first chunk carrying output (docs/metrics.md). Percentiles per probe, from the native histogram where Prometheus stores one, else from the classic buckets (each probe\'s include its SLO threshold).',
          's',
          common.quantiles('llm_probe_time_to_first_token_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Time per output token',
          '(end-to-end − TTFT) / (output tokens − 1), per request.',
          's',
          common.quantiles('llm_probe_time_per_output_token_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Inter-token latency',
          'Each gap between output chunks divided by the tokens of the later chunk, one observation per token: stalls stay visible.',
          's',
          common.quantiles('llm_probe_inter_token_latency_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
        ) + g.size(12, 9),
        g.timeseries(
          'Request duration (end to end)',
          'From request start to the last byte of the final event, successful requests.',
          's',
          common.quantiles('llm_probe_request_duration_seconds', ps, byProbe, probeLegend, ['0.5', '0.9', '0.99']),
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
        ) + g.size(8, 8),
        g.timeseries(
          'Tokens per second per request',
          'Output tokens / end-to-end latency of each successful request, as a client experiences it; the low percentile is the slow tail.',
          'suffix: tok/s',
          common.quantiles('llm_probe_output_tokens_per_second', ps, byProbe, probeLegend, ['0.5', '0.1']),
        ) + g.size(8, 8),
        g.timeseries(
          'Outcomes',
          'Every probe attempt by outcome (docs/metrics.md, Outcomes).',
          'reqps',
          [g.q('sum by (target, probe, outcome) (rate(%s[$__rate_interval]))' % series('llm_probe_requests_total'), '{{target}}/{{probe}} {{outcome}}')],
        ) + g.withStack + g.size(8, 8),
        g.stat(
          'Last probe',
          "Whether each probe's last request succeeded (llm_probe_success). Absent until a probe has run once.",
          'none',
          common.okSteps,
          [g.instant('max by (target, probe) (%s)' % series('llm_probe_success'), probeLegend)],
        ) + common.okMapping('FAIL', 'OK') + g.size(12, 6),
        g.stat(
          'Time since last probe',
          'Seconds since each probe last sent a request. Far beyond its schedule means the probe stopped (or is outside its active window).',
          's',
          [['green', null], ['orange', 300]],
          [g.instant('time() - max by (target, probe) (%s)' % series('llm_probe_last_run_timestamp_seconds'), probeLegend)],
        ) + g.size(12, 6),

        g.row('Answers: correctness, reasoning, rate limits'),
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

        g.row('Prefix cache'),
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

        g.row('Cancelled requests'),
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

        g.row('Connection phases'),
        g.timeseries(
          'Phase duration p95',
          'dns, connect, tls, write (request written) and first_byte (response head), from httptrace, whatever the outcome. A phase that did not happen (connect on a pooled connection) is not observed. Phase buckets are the same for every probe, so they sum across probes.',
          's',
          common.quantiles('llm_probe_phase_duration_seconds', ps, 'target, phase', '{{target}} {{phase}}', ['0.95']),
        ) + g.size(12, 8),
        g.timeseries(
          'Phases per second',
          'How often each phase happened: connect and tls at the probe rate mean no connection reuse.',
          'ops',
          [g.q(promql.histogramRate('llm_probe_phase_duration_seconds', ps, 'target, phase', '$__rate_interval'), '{{target}} {{phase}}')],
        ) + g.size(12, 8),

        g.row('Schedule health'),
        g.timeseries(
          'Schedule lag',
          'How late requests went out relative to their planned time. Seconds mean an overloaded prober, and its latencies under-sample slow periods.',
          's',
          common.quantiles('llm_probe_schedule_lag_seconds', ps, byProbe, probeLegend, ['0.99', '0.5']),
        ) + g.size(12, 8),
        g.timeseries(
          'Skipped probes',
          'Planned requests not sent, by reason: concurrency_limit (the probe had max_in_flight in flight), target_concurrency_limit, overdue. Skips mean the probe\'s rate is too high for its latency.',
          'reqps',
          [g.q('sum by (target, probe, reason) (rate(%s[$__rate_interval]))' % series('llm_probe_skipped_total', []), '{{target}}/{{probe}} {{reason}}')],
        ) + g.size(12, 8),

        g.row('Prober'),
        g.stat(
          'Prober up',
          'Whether Prometheus scrapes each prober (up).',
          'none',
          common.okSteps,
          [g.instant(promql.series('up', [c.proberSelector, common.mJob]), '{{instance}}')],
        ) + common.okMapping('DOWN', 'UP') + g.size(8, 6),
        g.stat(
          'Last configuration reload',
          'llm_prober_config_last_reload_successful: 0 means the file on disk is invalid and the previous configuration is still running.',
          'none',
          common.okSteps,
          [g.instant(promql.series('llm_prober_config_last_reload_successful', [c.proberSelector, common.mJob]), '{{instance}}')],
        ) + common.okMapping('FAILED', 'OK') + g.size(8, 6),
        g.stat(
          'Scrape-time collectors',
          'llm_prober_collector_success per collector (server_metrics, gpu).',
          'none',
          common.okSteps,
          [g.instant(promql.series('llm_prober_collector_success', [c.proberSelector, common.mJob]), '{{instance}} {{collector}}')],
        ) + common.okMapping('FAILED', 'OK') + g.size(8, 6),
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
