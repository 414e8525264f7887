// Alerts (prometheusAlerts). Runbook: docs/runbook.md, one section per
// alert (runbook_url).
//
// A rule's `comment::` (hidden: Prometheus never sees it) is written above
// it as a YAML comment in the generated alerts/llm-prober-rules.yml.
local promql = import '../lib/promql.libsonnet';
local gpuAlerts = import 'gpu.libsonnet';

{
  local c = $._config,
  local ps = c.proberSelector,
  local series(metric, matchers=[]) = promql.series(metric, [ps] + matchers),
  local n = promql.number,

  local alert(name, severity, expr, forDuration, summary, description) = {
    alert: name,
    expr: expr,
    [if forDuration != '' then 'for']: forDuration,
    labels: { severity: severity },
    annotations: {
      summary: summary,
      description: description,
      runbook_url: c.runbookURLPrefix + std.asciiLower(name),
    },
  },

  // The SLO burn-rate alerts: one block per condition, "or" between them.
  local sloKey = 'job, target, probe, model, slo',
  local burnCondition(x) = |||
    (
        target_probe:llm_probe_slo_errors:ratio_rate%(long)s > on (%(key)s) (%(factor)s * target_probe:llm_probe_slo_error_budget:ratio)
      and
        target_probe:llm_probe_slo_errors:ratio_rate%(short)s > on (%(key)s) (%(factor)s * target_probe:llm_probe_slo_error_budget:ratio)
      and
        target_probe:llm_probe_slo_requests:increase%(short)s >= on () group_left () llm_probe:slo_min_requests:%(short)s
    )
  ||| % x { key: sloKey, factor: n(x.factor) },
  local indent(s, prefix) = std.join('\n', [if l == '' then l else prefix + l for l in std.split(s, '\n')]),
  local numberWords = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'],
  local burnRateAlert(name, a) =
    local fastest = std.foldl(std.max, [x.factor for x in a.conditions], 0);
    local days = std.round(30 / fastest);
    alert(
      name,
      if a.page then c.pageSeverity else c.ticketSeverity,
      '(\n%s\n)\n' % std.join('\nor\n', [indent(std.rstripChars(burnCondition(x), '\n'), '  ') for x in a.conditions]),
      '',
      '{{ $labels.slo }} SLO of {{ $labels.target }}/{{ $labels.probe }} is burning its error budget' + (if a.page then ' fast' else ''),
      'Probe {{ $labels.probe }} of target {{ $labels.target }} (model {{ $labels.model }}) misses its {{ $labels.slo }} SLO on {{ $value | humanizePercentage }} of requests in the long window' +
      if a.page then
        ': at this rate the 30-day budget is gone in about %s days or less.' % (if days < std.length(numberWords) then numberWords[days] else std.toString(days))
      else ', more than the budget allows over 30 days.',
    ),

  local ttft = promql.histogramQuantileForms(n(c.ttftRegressionQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.ttftRegressionWindow),
  local ttftBefore = promql.histogramQuantileForms(n(c.ttftRegressionQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.ttftRegressionWindow, c.ttftRegressionOffset),
  local percentile = 'p' + n(std.round(c.ttftRegressionQuantile * 1e4) / 1e2),
  local offsetText = { '1w': 'last week', '1d': 'yesterday' },

  // Mean TTFT of one cache state of the prefix probes over the window, in
  // the native and the classic form; and the cold requests counted.
  local prefixTTFT = 'llm_probe_prefix_time_to_first_token_seconds',
  local prefixBy = 'job, instance, target, probe, model',
  local prefixMean(cache) = {
    local sel(suffix) = series(prefixTTFT + suffix, ['cache="%s"' % cache]),
    native: 'sum by (%s) (histogram_sum(rate(%s[%s]))) / sum by (%s) (histogram_count(rate(%s[%s])))'
            % [prefixBy, sel(''), c.prefixCacheWindow, prefixBy, sel(''), c.prefixCacheWindow],
    classic: 'sum by (%s) (rate(%s[%s])) / sum by (%s) (rate(%s[%s]))'
             % [prefixBy, sel('_sum'), c.prefixCacheWindow, prefixBy, sel('_count'), c.prefixCacheWindow],
  },
  local prefixCold = {
    native: 'sum by (%s) (histogram_count(increase(%s[%s])))'
            % [prefixBy, series(prefixTTFT, ['cache="cold"']), c.prefixCacheWindow],
    classic: 'sum by (%s) (increase(%s[%s]))'
             % [prefixBy, series(prefixTTFT + '_count', ['cache="cold"']), c.prefixCacheWindow],
  },

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'llm-prober-slo.alerts',
        rules: [
          burnRateAlert(name, c.sloBurnRateAlerts[name]) + (
            if name == std.objectFields(c.sloBurnRateAlerts)[0] then {
              comment:: 'Multiwindow, multi-burn-rate alerts (Google SRE workbook, ch. 5):\n%s.' % std.join(';\n', [
                '%s at %s' % [
                  if c.sloBurnRateAlerts[a].page then 'page' else 'ticket',
                  std.join(', or ', ['%sx over %s and %s' % [n(x.factor), x.long, x.short] for x in c.sloBurnRateAlerts[a].conditions]),
                ]
                for a in std.objectFields(c.sloBurnRateAlerts)
              ]),
            } else {}
          )
          for name in std.objectFields(c.sloBurnRateAlerts)
        ],
      },
      {
        name: 'llm-prober-probes.alerts',
        rules: [
          alert(
            'LLMProbeFailing',
            c.pageSeverity,
            |||
              (
                sum by (job, instance, target, probe, model) (increase(%(failed)s[%(w)s])) >= %(min)d
              unless
                sum by (job, instance, target, probe, model) (increase(%(succeeded)s[%(w)s])) > 0
              )
              and on (job, instance, target, probe, model) %(success)s == 0
            ||| % {
              failed: series('llm_probe_requests_total', ['outcome!~"success|wrong_answer"']),
              succeeded: series('llm_probe_requests_total', ['outcome=~"success|wrong_answer"']),
              success: series('llm_probe_success'),
              w: c.probeFailingWindow,
              min: c.probeFailingMinFailures,
            },
            c.probeFailingFor,
            'Probe {{ $labels.target }}/{{ $labels.probe }} is failing',
            'Every probe {{ $labels.probe }} sent to target {{ $labels.target }} (model {{ $labels.model }}) in the last %s failed ({{ $value }} failures). llm_probe_requests_total{outcome} says how.' % promql.durationText(c.probeFailingWindow),
          ) + {
            comment:: |||
              Several consecutive runs failed: no success in %s while at
              least %d attempts failed, and the last one failed too. A wrong
              answer is an answer: LLMProbeWrongAnswers pages for it, not this.
            ||| % [promql.durationText(c.probeFailingWindow), c.probeFailingMinFailures],
          },
          alert(
            'LLMProbeTTFTRegressed',
            c.ticketSeverity,
            '(\n%s\n)\n> %s *\n(\n%s\n)\n' % [
              promql.eitherFormNested(ttft.native, ttft.classic),
              n(c.ttftRegressionFactor),
              promql.eitherFormNested(ttftBefore.native, ttftBefore.classic),
            ],
            c.ttftRegressionFor,
            'TTFT %s of {{ $labels.target }}/{{ $labels.probe }} regressed against %s' % [
              percentile,
              if std.objectHas(offsetText, c.ttftRegressionOffset) then offsetText[c.ttftRegressionOffset] else promql.durationText(c.ttftRegressionOffset) + ' earlier',
            ],
            '%s time to first token of probe {{ $labels.probe }} on target {{ $labels.target }} (model {{ $labels.model }}) is {{ $value | humanizeDuration }}, more than %sx its value at the same time %s ago.' % [
              percentile,
              n(c.ttftRegressionFactor),
              promql.durationText(c.ttftRegressionOffset),
            ],
          ) + {
            comment:: |||
              %s TTFT over the last %s against the same window %s ago, from
              the native histogram, else from the classic buckets: one of them
              is missing when Prometheus stores only the other (see "Histogram
              modes" in docs/deployment.md). Across a switch of mode within the
              window, one form's estimate is compared with the other's; they
              differ by at most the width of the classic bucket involved.
            ||| % [percentile, c.ttftRegressionWindow, promql.durationText(c.ttftRegressionOffset)],
          },
          alert(
            'LLMProbesSkipped',
            c.ticketSeverity,
            'sum by (job, instance, target, probe, model) (rate(%s[%s])) > 0' % [series('llm_probe_skipped_total'), c.skippedProbesWindow],
            c.skippedProbesFor,
            'llm-prober cannot keep the schedule of {{ $labels.target }}/{{ $labels.probe }}',
            '{{ printf "%.2f" $value }} planned probes per second of {{ $labels.probe }} on {{ $labels.target }} (model {{ $labels.model }}) are skipped, so the measured latencies under-represent slow periods.',
          ),
          alert(
            'LLMProbeTLSCertExpiringSoon',
            c.ticketSeverity,
            'min by (job, instance, target) (%s) - time() < %d * 86400' % [series('llm_probe_tls_cert_expiry_timestamp_seconds'), c.tlsCertExpiryDays],
            c.tlsCertExpiryFor,
            'The TLS certificate of {{ $labels.target }} expires within %d days' % c.tlsCertExpiryDays,
            'A certificate in the chain target {{ $labels.target }} presents expires in {{ $value | humanizeDuration }}; renew it before probes (and clients) fail with certificate errors.',
          ) + {
            comment:: |||
              As blackbox_exporter users alert on probe_ssl_earliest_cert_expiry:
              the earliest expiry in the chain the target presented, per target
              (its probes share the server).
            |||,
          },
          alert(
            'LLMProbeWrongAnswers',
            c.wrongAnswerSeverity,
            'sum by (job, instance, target, probe, model) (increase(%s[%s])) > 0' % [series('llm_probe_requests_total', ['outcome="wrong_answer"']), c.wrongAnswerWindow],
            '',
            'Target {{ $labels.target }} answers probe {{ $labels.probe }} wrongly',
            '{{ $value | humanize }} answers of target {{ $labels.target }} (model {{ $labels.model }}) to probe {{ $labels.probe }} failed its assertions in the last %s: the server is up but wrong. llm_probe_assertion_failures_total says which check; the status page shows the text received.' % promql.durationText(c.wrongAnswerWindow),
          ) + {
            comment:: |||
              A correctness canary (assert:) failed: fast and wrong is an
              outage too (a broken chat template, quantisation or deploy).
            |||,
          },
          alert(
            'LLMProbePrefixCacheNotHitting',
            c.ticketSeverity,
            '(\n%s\n)\n> %s\nand on (%s)\n(\n%s\n)\n>= %d\n' % [
              promql.eitherFormNested(
                '(%s) / (%s)' % [prefixMean('warm').native, prefixMean('cold').native],
                '(%s) / (%s)' % [prefixMean('warm').classic, prefixMean('cold').classic],
              ),
              n(c.prefixCacheRatio),
              prefixBy,
              promql.eitherFormNested(prefixCold.native, prefixCold.classic),
              c.prefixCacheMinRuns,
            ],
            c.prefixCacheFor,
            'Prefix cache of {{ $labels.target }} does not speed up probe {{ $labels.probe }}',
            'Requests of probe {{ $labels.probe }} that resend a prefix target {{ $labels.target }} (model {{ $labels.model }}) has just seen take {{ $value | humanizePercentage }} of the first request\'s time to first token over the last %s: the server\'s prefix cache is off, too small, or missing.' % promql.durationText(c.prefixCacheWindow),
          ) + {
            comment:: |||
              session and shared_prefix probes: mean warm TTFT over mean
              cold TTFT (llm_probe_prefix_time_to_first_token_seconds) goes
              to 1 when the prefix cache stops working; at least %d cold
              requests in the window so one slow run does not decide.
            ||| % c.prefixCacheMinRuns,
          },
          alert(
            'LLMProbeRateLimitHeadroomLow',
            c.ticketSeverity,
            |||
              min by (job, instance, target, resource) (%(ratio)s) < %(min)s
              and on (job, instance, target)
                time() - max by (job, instance, target) (%(updated)s) < %(fresh)d
            ||| % {
              ratio: series('llm_probe_rate_limit_remaining_ratio'),
              updated: series('llm_probe_rate_limit_last_update_timestamp_seconds'),
              min: n(c.rateLimitHeadroomRatio),
              fresh: c.rateLimitFreshSeconds,
            },
            c.rateLimitHeadroomFor,
            'Rate limit of {{ $labels.target }} nearly spent ({{ $labels.resource }})',
            'Target {{ $labels.target }} reports only {{ $value | humanizePercentage }} of its {{ $labels.resource }} rate limit left: requests will soon get 429 Too Many Requests.',
          ) + {
            comment:: |||
              From the x-ratelimit-* headers of the target's answers, while
              they are recent: a stale low value after probes stopped says
              nothing about the present.
            |||,
          },
        ],
      },
      {
        name: 'llm-prober-server.alerts',
        rules: [
          alert(
            'LLMServerQueueGrowing',
            c.ticketSeverity,
            |||
              avg_over_time(%(waiting)s[%(avg)s]) > %(n)s
              and deriv(%(waiting)s[%(deriv)s]) > 0
            ||| % {
              waiting: series('llm_server_requests_waiting'),
              avg: c.serverQueueAvgWindow,
              deriv: c.serverQueueDerivWindow,
              n: n(c.serverQueueWaiting),
            },
            c.serverQueueFor,
            'Request queue of {{ $labels.target }} keeps growing',
            '{{ $labels.server }} server {{ $labels.target }} (model {{ $labels.model }}) has {{ $value | humanize }} requests waiting on average and the queue is still growing: it receives more than it can serve.',
          ),
          alert(
            'LLMServerKVCacheSaturated',
            c.ticketSeverity,
            'avg_over_time(%s[%s]) > %s' % [series('llm_server_kv_cache_usage_ratio'), c.kvCacheWindow, n(c.kvCacheSaturatedRatio)],
            c.kvCacheFor,
            'KV cache of {{ $labels.target }} is full',
            '{{ $labels.server }} server {{ $labels.target }} (model {{ $labels.model }}) uses {{ $value | humanizePercentage }} of its KV cache: new requests wait or running ones are preempted.',
          ),
          alert(
            'LLMServerMetricsUnreachable',
            c.ticketSeverity,
            '%s == 0' % series('llm_server_up'),
            c.serverMetricsUnreachableFor,
            'Server metrics of {{ $labels.target }} unreachable',
            'llm-prober {{ $labels.instance }} cannot scrape or parse the /metrics of target {{ $labels.target }}: queue and KV-cache signals are missing.',
          ),
          alert(
            'LLMServerCancelledRequestsLeaking',
            c.cancelLeakSeverity,
            'sum by (job, instance, target, probe, model) (increase(%s[%s])) > 0' % [series('llm_probe_cancellations_total', ['result="leaked"']), c.cancelLeakWindow],
            '',
            'Server {{ $labels.target }} keeps the slots of cancelled requests',
            '{{ $value | humanize }} requests that probe {{ $labels.probe }} cancelled on target {{ $labels.target }} (model {{ $labels.model }}) still held their slot when the release timeout ran out, in the last %s: clients that disconnect mid-answer leave slots the server no longer serves with, and its capacity shrinks.' % promql.durationText(c.cancelLeakWindow),
          ) + {
            comment:: |||
              A cancellation probe (cancel:) cut a stream and the server's
              llm_server_requests_running did not fall within the probe's
              release_timeout: aborted requests are not freed.
            |||,
          },
        ],
      },
      {
        name: 'llm-prober-gpu.alerts',
        rules: gpuAlerts.rules(c, alert),
      },
      {
        name: 'llm-prober-discovery.alerts',
        rules: [
          alert(
            'LLMProberModelDisappeared',
            c.ticketSeverity,
            |||
              (
                max_over_time(%(info)s[%(w)s])
              unless on (job, instance, target, model)
                %(info)s
              )
              and on (job, instance, target) %(count)s
            ||| % {
              info: series('llm_prober_discovered_model_info'),
              count: series('llm_prober_discovered_models'),
              w: c.modelDisappearedWindow,
            },
            c.modelDisappearedFor,
            'Model {{ $labels.model }} disappeared from {{ $labels.target }}',
            'The server of target {{ $labels.target }} no longer lists model {{ $labels.model }}, which llm-prober {{ $labels.instance }} probed less than %s ago; its probes stopped. If it was unloaded on purpose, this resolves itself within %s.' % [promql.durationText(c.modelDisappearedWindow), promql.durationText(c.modelDisappearedWindow)],
          ) + {
            comment:: |||
              A model (or LoRA adapter) found through discover_models that is
              no longer in the server's list, while the target still
              discovers models: a restart that lost an adapter, a failed
              load. A list that cannot be fetched keeps the last good one,
              so it never looks like a disappearance (see
              LLMProberModelDiscoveryFailing).
            |||,
          },
          alert(
            'LLMProberModelDiscoveryFailing',
            c.ticketSeverity,
            '%s == 1' % series('llm_prober_model_discovery_stale'),
            c.modelDiscoveryFailingFor,
            'llm-prober cannot refresh the model list of {{ $labels.target }}',
            'llm-prober {{ $labels.instance }} has not been able to fetch the model list of target {{ $labels.target }} for %s; it keeps probing the last good list, so models added or removed since are not followed.' % promql.durationText(c.modelDiscoveryFailingFor),
          ),
        ],
      },
      {
        name: 'llm-prober-self.alerts',
        rules: [
          alert(
            'LLMProberDown',
            c.pageSeverity,
            'up{%s} == 0' % c.proberJobSelector,
            c.proberDownFor,
            'llm-prober {{ $labels.instance }} is down',
            'Prometheus cannot scrape llm-prober {{ $labels.instance }} (job {{ $labels.job }}): no probe results, and no SLO alerts, for its targets.',
          ),
          alert(
            'LLMProberConfigReloadFailed',
            c.ticketSeverity,
            '%s == 0' % series('llm_prober_config_last_reload_successful'),
            c.configReloadFailedFor,
            'llm-prober {{ $labels.instance }} cannot load its configuration',
            'The last configuration reload of llm-prober {{ $labels.instance }} failed; it keeps probing with the previous configuration. The error is in its log and in the answer of POST /-/reload.',
          ),
        ],
      },
    ],
  },
}
