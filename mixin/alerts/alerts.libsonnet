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

  // The SLO burn-rate alerts: one block per condition, "or" between them
  // (config.libsonnet, sloBurnRateAlerts, says why each part is there).
  local sloKey = 'job, target, probe, model, slo',
  local ratio(w) = 'target_probe:llm_probe_slo_errors:ratio_rate' + w,
  local requests(w) = 'target_probe:llm_probe_slo_requests:increase' + w,
  local budget = 'target_probe:llm_probe_slo_error_budget:ratio',
  local burnCondition(x) = |||
    (
        %(long)s > on (%(key)s) clamp_max(%(factor)s * %(budget)s, %(cap)s)
      and
        %(short)s > on (%(key)s) clamp_max(%(factor)s * %(budget)s, %(cap)s)
      and
        %(long)s * on (%(key)s) %(longN)s
        >= on (%(key)s)
        (%(minBad)s + %(longN)s * on (%(key)s) %(budget)s + %(sigmas)s * sqrt(%(longN)s * on (%(key)s) %(budget)s))
      and on (%(key)s)
        (
            %(recent)s >= %(severeRatio)s
          or
            %(recentN)s == 0
          or
            max_over_time(%(severe)s[%(severeLookback)s]) < %(severeRatio)s
        )
    )
  ||| % {
    key: sloKey,
    factor: n(x.factor),
    budget: budget,
    cap: n(c.sloBurnThresholdCap),
    long: ratio(x.long),
    short: ratio(x.short),
    longN: requests(x.long),
    minBad: n(c.sloEvidenceMinBad),
    sigmas: n(c.sloEvidenceSigmas),
    recent: ratio(c.sloRecentWindow),
    recentN: requests(c.sloRecentWindow),
    severe: ratio(c.sloSevereWindow),
    severeRatio: n(c.sloSevereRatio),
    severeLookback: c.sloSevereLookback,
  },
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

  // A probe is failing: probeFailingMinRuns arrivals in a row failed, the
  // first at least probeFailingMinSeconds ago (LLMProbeFailing, and through
  // it LLMTargetDown).
  local failingBy = 'job, instance, target, probe, model',
  local probeFailing = |||
    %(consecutive)s >= %(runs)d
    and on (%(by)s)
    time() - %(since)s >= %(seconds)d
  ||| % {
    consecutive: series('llm_probe_consecutive_failures'),
    since: series('llm_probe_failing_since_timestamp_seconds'),
    runs: c.probeFailingMinRuns,
    seconds: c.probeFailingMinSeconds,
    by: failingBy,
  },

  local ttft = promql.histogramQuantileForms(n(c.ttftRegressionQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.ttftRegressionWindow),
  local ttftRecent = promql.histogramQuantileForms(n(c.ttftRegressionQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.ttftRegressionRecentWindow),
  local ttftBefore = promql.histogramQuantileForms(n(c.ttftRegressionQuantile), 'llm_probe_time_to_first_token_seconds', [ps], 'job, target, probe, model', c.ttftRegressionWindow, c.ttftRegressionOffset),
  local percentile = 'p' + n(std.round(c.ttftRegressionQuantile * 1e4) / 1e2),
  local offsetText = { '1w': 'last week', '1d': 'yesterday' },

  // Mean TTFT of one cache state of the prefix probes over the window, in
  // the native and the classic form; and the cold requests counted.
  local prefixTTFT = 'llm_probe_prefix_time_to_first_token_seconds',
  local prefixBy = 'job, instance, target, probe, model',
  local prefixMean(cache) = {
    local sel(suffix) = series(prefixTTFT + suffix, ['cache="%s"' % cache, 'mode="shared_prefix"']),
    native: 'sum by (%s) (histogram_sum(rate(%s[%s]))) / sum by (%s) (histogram_count(rate(%s[%s])))'
            % [prefixBy, sel(''), c.prefixCacheWindow, prefixBy, sel(''), c.prefixCacheWindow],
    classic: 'sum by (%s) (rate(%s[%s])) / sum by (%s) (rate(%s[%s]))'
             % [prefixBy, sel('_sum'), c.prefixCacheWindow, prefixBy, sel('_count'), c.prefixCacheWindow],
  },
  local prefixCold = {
    native: 'sum by (%s) (histogram_count(increase(%s[%s])))'
            % [prefixBy, series(prefixTTFT, ['cache="cold"', 'mode="shared_prefix"']), c.prefixCacheWindow],
    classic: 'sum by (%s) (increase(%s[%s]))'
             % [prefixBy, series(prefixTTFT + '_count', ['cache="cold"', 'mode="shared_prefix"']), c.prefixCacheWindow],
  },

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'llm-prober-slo.alerts',
        interval: c.alertsInterval,
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
        ] + [
          alert(
            'LLMProbeSLOSeriesAbsent',
            c.ticketSeverity,
            |||
              %(objective)s
              unless on (job, target, probe, model, slo)
              target_probe:llm_probe_slo_errors:ratio_rate%(w)s
            ||| % { objective: series('llm_probe_slo_objective_ratio'), w: c.sloBurnRateAlerts[std.objectFields(c.sloBurnRateAlerts)[0]].conditions[0].long },
            c.sloSeriesAbsentFor,
            'No SLO series for {{ $labels.target }}/{{ $labels.probe }} ({{ $labels.slo }})',
            'Probe {{ $labels.probe }} of target {{ $labels.target }} declares a {{ $labels.slo }} objective, but the SLO recording rules give nothing for it: the burn-rate alerts cannot fire for it. Are the llm-prober-slo.rules loaded, with a proberSelector that matches this job?',
          ) + {
            comment:: |||
              Blind-spot guard: a probe declares an objective but the recording
              rules the burn-rate alerts read produce nothing for it (rules
              not loaded, a selector that misses the job, a renamed label).
            |||,
          },
        ],
      },
      {
        name: 'llm-prober-probes.alerts',
        interval: c.alertsInterval,
        rules: [
          alert(
            'LLMTargetDown',
            c.pageSeverity,
            |||
              (
                max by (job, instance, target) (
                %(failing)s)
                unless on (job, instance, target)
                (
                    %(lastRun)s
                  > on (job, instance, target) group_left ()
                    min by (job, instance, target) (%(since)s > 0)
                  and on (%(by)s)
                    %(consecutive)s == 0
                )
              )
              or
              (
                  max by (job, instance, target) (%(consecutive)s)
                and on (job, instance, target)
                  max by (job, instance, target) (ALERTS{alertname="LLMTargetDown", alertstate="firing"%(psAlerts)s})
                and on (job, target)
                  (
                      max by (job, target) (%(consecutive)s > 0)
                    or
                      max by (job, target) (ALERTS{alertname="LLMProbeSLOErrorBudgetBurnFast", alertstate="firing"%(psAlerts)s})
                  )
              )
            ||| % {
              failing: indent(probeFailing, '    '),
              lastRun: series('llm_probe_last_run_timestamp_seconds'),
              since: series('llm_probe_failing_since_timestamp_seconds'),
              consecutive: series('llm_probe_consecutive_failures'),
              by: failingBy,
              psAlerts: if ps == '' then '' else ', ' + ps,
            },
            '',
            'Target {{ $labels.target }} is down',
            'Probes of target {{ $labels.target }} fail and none has succeeded since the failures began: the server is down or unreachable from llm-prober {{ $labels.instance }}. Its per-probe alerts are inhibited (mixin/alertmanager/alertmanager.yml); this resolves once every probe of it has succeeded again.',
          ) + {
            comment:: |||
              One page for a dead server however many probes it has: some probe
              of the target meets LLMProbeFailing's condition, and no probe of
              it succeeded after that probe's streak began (probes that have
              not run since do not count either way, so a slow probe beside
              fast ones does not hold it back). In the same group as
              LLMProbeFailing, so both reach Alertmanager from one evaluation
              and the inhibition rule can keep the per-probe pages back.
              Once firing it holds (second part, through its own ALERTS
              series) while any probe of the target is still on a failing
              streak or its fast-burn page still fires: otherwise a slow probe
              that has not run since the recovery, or the burn rate's last
              minutes, would reach a human as a second page the moment the
              inhibition lifts.
            |||,
          },
          alert(
            'LLMProbeFailing',
            c.pageSeverity,
            probeFailing,
            '',
            'Probe {{ $labels.target }}/{{ $labels.probe }} is failing',
            'The last {{ $value }} arrivals of probe {{ $labels.probe }} on target {{ $labels.target }} (model {{ $labels.model }}) failed or were skipped behind a request the server still held. llm_probe_requests_total{outcome} says how.',
          ) + {
            comment:: |||
              At least %d arrivals in a row failed, the first %d s or more ago:
              keyed on the probe's own runs (llm_probe_consecutive_failures), so
              it pages within about two intervals at any probe rate, and a
              single transient error never pages. A wrong answer is an answer:
              LLMProbeWrongAnswers pages for it, not this. Resolves with the
              next success.
            ||| % [c.probeFailingMinRuns, c.probeFailingMinSeconds],
          },
          alert(
            'LLMProbeTTFTRegressed',
            c.ticketSeverity,
            |||
              (
              %(now)s
              )
              > %(f)s *
              (
              %(before)s
              )
              and on (%(by)s)
              (
                  (
                  %(recent)s
                  )
                  > %(f)s *
                  (
                  %(before)s
                  )
                or
                  sum by (%(by)s) (increase(%(ok)s[%(rw)s])) == 0
              )
              and on (%(by)s)
              group by (%(by)s) (%(scheduled)s)
            ||| % {
              now: promql.eitherFormNested(ttft.native, ttft.classic),
              recent: indent(promql.eitherFormNested(ttftRecent.native, ttftRecent.classic), '    '),
              before: promql.eitherFormNested(ttftBefore.native, ttftBefore.classic),
              f: n(c.ttftRegressionFactor),
              by: 'job, target, probe, model',
              ok: series('llm_probe_requests_total', ['outcome="success"']),
              rw: c.ttftRegressionRecentWindow,
              scheduled: series('llm_probe_scheduled_total'),
            },
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
              The last %s must be regressed too (or hold no successful
              request: slow probes), so it resolves within minutes of the
              regression's end; and the probe must still exist (its
              llm_probe_scheduled_total), so a probe removed by a reload takes
              its alert along at once instead of after the window.
            ||| % [percentile, c.ttftRegressionWindow, promql.durationText(c.ttftRegressionOffset), promql.durationText(c.ttftRegressionRecentWindow)],
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
            'LLMProbeNotRunning',
            c.ticketSeverity,
            |||
              time() - %(lastRun)s
              > on (job, instance, target, probe, model)
              clamp_min(%(k)d * %(interval)s, %(min)d)
            ||| % {
              lastRun: series('llm_probe_last_run_timestamp_seconds'),
              interval: series('llm_probe_planned_interval_seconds'),
              k: c.probeNotRunningIntervals,
              min: c.probeNotRunningMinSeconds,
            },
            c.probeNotRunningFor,
            'Probe {{ $labels.target }}/{{ $labels.probe }} has stopped running',
            'The last run of probe {{ $labels.probe }} on target {{ $labels.target }} (model {{ $labels.model }}) started {{ $value | humanizeDuration }} ago, more than %d planned intervals: llm-prober {{ $labels.instance }} no longer sends it (a request that never ends, or the prober itself), so its other alerts cannot fire either.' % c.probeNotRunningIntervals,
          ) + {
            comment:: |||
              Blind-spot guard: the probe's last run is older than %d planned
              intervals (llm_probe_planned_interval_seconds, the longest gap
              its schedule plans; not exported for closed-loop and
              active-window schedules, which it therefore does not cover).
            ||| % c.probeNotRunningIntervals,
          },
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
            |||
              sum by (job, instance, target, probe, model) (increase(%s[%s])) > 0
              and on (job, instance, target, probe, model)
              %s == 0
            ||| % [series('llm_probe_requests_total', ['outcome="wrong_answer"']), c.wrongAnswerWindow, series('llm_probe_success')],
            '',
            'Target {{ $labels.target }} answers probe {{ $labels.probe }} wrongly',
            '{{ $value | humanize }} answers of target {{ $labels.target }} (model {{ $labels.model }}) to probe {{ $labels.probe }} failed its assertions in the last %s: the server is up but wrong. llm_probe_assertion_failures_total says which check; the status page shows the text received.' % promql.durationText(c.wrongAnswerWindow),
          ) + {
            comment:: |||
              A correctness canary (assert:) failed: fast and wrong is an
              outage too (a broken chat template, quantisation or deploy).
              While the last run is not a success: the next good answer
              resolves it, not the window's end.
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
              shared_prefix probes: mean warm TTFT over mean cold TTFT
              (llm_probe_prefix_time_to_first_token_seconds) goes to 1 when
              the prefix cache stops working; at least %d cold requests in the
              window so one slow run does not decide. Their warm and cold
              requests carry the same new tokens, so the ratio compares like
              with like. session probes (mode="session") are left out: each
              warm turn resends the conversation and adds more new tokens than
              turn 1 had, so a working cache can still give ratios near or
              above 1 (0.5-3.2 against a real llama.cpp that hit its cache on
              every warm turn).
            ||| % c.prefixCacheMinRuns,
          },
          alert(
            'LLMProbeFleetOutlier',
            c.ticketSeverity,
            |||
              %(p)s
              > on (job, module, probe, model) group_left ()
              (%(f)s * quantile by (job, module, probe, model) (0.5, %(p)s))
              and on (job, module, probe, model)
              count by (job, module, probe, model) (%(p)s) >= %(min)d
            ||| % {
              p: 'module_target_probe:llm_probe_time_to_first_token_seconds:p%s_%s' % [n(std.round(c.fleetOutlierQuantile * 100)), c.fleetOutlierWindow],
              f: n(c.fleetOutlierFactor),
              min: c.fleetOutlierMinSiblings,
            },
            c.fleetOutlierFor,
            'Endpoint {{ $labels.target }} is slower than its siblings',
            'TTFT p%s of probe {{ $labels.probe }} on {{ $labels.target }} (model {{ $labels.model }}) is {{ $value | humanizeDuration }}, more than %sx the median of the endpoints discovered by module {{ $labels.module }}: one replica (its GPU, node or neighbours) is slow while the others are not.' % [n(std.round(c.fleetOutlierQuantile * 100)), n(c.fleetOutlierFactor)],
          ) + {
            comment:: |||
              One bad replica among many: an endpoint discovered from a module
              (every ready pod of a Service) whose TTFT p%s over %s is more
              than %sx its siblings' median, with at least %d siblings
              reporting so the median means something.
            ||| % [n(std.round(c.fleetOutlierQuantile * 100)), c.fleetOutlierWindow, n(c.fleetOutlierFactor), c.fleetOutlierMinSiblings],
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
        interval: c.alertsInterval,
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
            'LLMProberAbsent',
            c.pageSeverity,
            'absent(up{%s} == 1)' % c.proberJobSelector,
            c.proberAbsentFor,
            'No llm-prober is up',
            'Prometheus has no llm-prober scrape target that is up (selector %s): every prober is down or gone from service discovery, so no probe runs and no probe alert can fire.' % c.proberJobSelector,
          ) + {
            comment:: |||
              LLMProberDown needs an `up` series that is 0; a prober that
              vanished from service discovery (deleted Deployment, wrong
              labels) has none. This fires when no prober target is up at
              all.
            |||,
          },
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
