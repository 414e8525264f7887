// The settings of the llm-prober mixin. Override any of them with
//
//   (import 'mixin.libsonnet') + { _config+:: { proberSelector: 'job="llm-prober"' } }
//
// The defaults reproduce the files shipped in alerts/ and dashboards/.
{
  _config+:: {
    // ---- Selectors ----------------------------------------------------------

    // Label matchers added to every selector of a series the prober exports
    // (llm_probe_*, llm_server_*, llm_gpu_*, llm_prober_*) in the rules,
    // and to the dashboards' selectors and variable queries, e.g.
    // 'job="llm-prober"' where other jobs export the same names. Empty:
    // every such series, whichever job scraped it.
    proberSelector: '',
    // Selects the prober's scrape targets among the `up` series for
    // LLMProberDown: `up` has no prober-specific name, so this one needs a
    // job matcher even when proberSelector is empty. The Kubernetes
    // ServiceMonitors of deploy/ set job: llm-prober.
    proberJobSelector: 'job=~".*llm-prober.*"',
    // Label matchers added to the selectors of vLLM's own series (vllm:*,
    // scraped from vLLM directly, not through the prober) in the recording
    // rules and the serving-stack dashboard, e.g. 'job="vllm"'.
    vllmSelector: '',

    // ---- Alerts ---------------------------------------------------------------

    // Severity labels of the paging and the non-paging alerts.
    pageSeverity: 'page',
    ticketSeverity: 'ticket',
    // runbook_url of each alert: this prefix and the alert's name in lower
    // case (a section of docs/runbook.md).
    runbookURLPrefix: 'https://github.com/llm-prober/llm-prober/blob/main/docs/runbook.md#',

    // SLO error-budget burn-rate alerts (multiwindow, multi-burn-rate; Google
    // SRE workbook, ch. 5), by name; docs/alerting.md shows what they catch
    // at which probe rate (the alert backtest). Each fires when any of its
    // conditions holds, all of:
    //  - the error ratio over the long and the short window exceeds
    //    min(factor × error budget, sloBurnThresholdCap): without the cap,
    //    objectives at or below ~93% could never reach 14.4× (it would need
    //    more than 100% errors), so their pages could never fire;
    //  - the long window holds enough bad requests that a server within
    //    its objective shows as many less than about once a month:
    //    at least sloEvidenceMinBad + e + sloEvidenceSigmas·√e bad, e being
    //    the bad requests the budget allows in it. A traffic-aware guard: a
    //    fast probe clears it long before the ratio, a slow one (1/5 min)
    //    needs several bad requests, never a fixed request count that the
    //    probe rate sits on;
    //  - the incident is not over: after a severe incident (error ratio
    //    over sloSevereWindow at least sloSevereRatio at some time in the
    //    last sloSevereLookback) a sloRecentWindow with requests and
    //    under sloSevereRatio of them bad resolves it, rather than the short window cooling down for
    //    up to its length; the lookback covers the longest short window,
    //    so the windows still over their threshold after the recovery do
    //    not fire it again. Below that severity the short windows decide,
    //    so a moderate burn does not flap with every clean few minutes.
    // page: true pages (pageSeverity), else ticketSeverity.
    sloBurnRateAlerts: {
      LLMProbeSLOErrorBudgetBurnFast: {
        page: true,
        conditions: [
          { long: '1h', short: '5m', factor: 14.4 },
          { long: '6h', short: '30m', factor: 6 },
        ],
      },
      LLMProbeSLOErrorBudgetBurnSlow: {
        page: false,
        conditions: [
          { long: '1d', short: '2h', factor: 3 },
          { long: '3d', short: '6h', factor: 1 },
        ],
      },
    },
    sloBurnThresholdCap: 0.125,
    sloEvidenceMinBad: 2,
    sloEvidenceSigmas: 3,
    sloRecentWindow: '4m',
    sloSevereWindow: '30m',
    sloSevereRatio: 0.5,
    sloSevereLookback: '6h',
    // Evaluation interval of the SLO recording rules and of the alert
    // groups that read probe series: the backtest's timings assume it.
    sloRulesInterval: '30s',
    alertsInterval: '30s',
    // The 30-day error budget remaining (dashboards): a 30-day rate,
    // recorded every sloBudgetInterval. Needs 30 days of retention.
    sloBudgetWindow: '30d',
    sloBudgetInterval: '5m',

    // LLMProbeFailing: at least minRuns arrivals in a row failed (or were
    // skipped behind a request the server still held), the first of them
    // at least minSeconds ago. Keyed on the probe's own runs, so a probe
    // every 5 minutes pages after two failures and one every 10 s after
    // 90 s of them: a hard outage pages within max(~2.5 min, 2 intervals
    // + 45 s) at any probe rate. LLMTargetDown uses the same condition.
    probeFailingMinRuns: 2,
    probeFailingMinSeconds: 90,

    // LLMProbeNotRunning: the last run started more than this many planned
    // intervals (llm_probe_planned_interval_seconds) ago, and at least
    // minSeconds, for `for`.
    probeNotRunningIntervals: 3,
    probeNotRunningMinSeconds: 60,
    probeNotRunningFor: '1m',

    // LLMProberAbsent: no llm-prober scrape target up at all (vanished from
    // service discovery, or all down), for `for`.
    proberAbsentFor: '2m',

    // LLMProbeSLOSeriesAbsent: a probe declares an objective but the SLO
    // recording rules produce nothing for it, for `for`.
    sloSeriesAbsentFor: '15m',

    // LLMProbeFleetOutlier: among the targets discovery made from one
    // module (llm_prober_discovered_target_info), one endpoint's TTFT
    // quantile over the window is above factor × the median of its
    // siblings', with at least minSiblings endpoints reporting, for `for`.
    // The median, not p95: a 10-minute window at 1/30 s to 1/5 min holds
    // 2 to 20 requests, so its p95 is one healthy tail request; the
    // backtest's healthy fleet ticketed up to 18 times a week with p95 and
    // for 10m, 0 times with the median and for 15m (docs/alerting.md).
    fleetOutlierQuantile: 0.5,
    fleetOutlierWindow: '10m',
    fleetOutlierFactor: 2,
    fleetOutlierMinSiblings: 3,
    fleetOutlierFor: '15m',

    // LLMProbeTTFTRegressed: the TTFT quantile over the window, and over
    // the recent window (or no request in it: slow probes), is more than
    // factor × the same quantile over the window `offset` earlier, for
    // `for`. The recent window lets it resolve within minutes of the
    // regression's end rather than after the whole window.
    ttftRegressionQuantile: 0.95,
    ttftRegressionFactor: 1.5,
    ttftRegressionWindow: '1h',
    ttftRegressionRecentWindow: '5m',
    ttftRegressionOffset: '1w',
    ttftRegressionFor: '15m',

    // LLMProbesSkipped: any skipped probe over the window, for `for`.
    skippedProbesWindow: '4m',
    skippedProbesFor: '10m',

    // LLMProbeTLSCertExpiringSoon: a certificate of the chain a target
    // presents expires within this many days.
    tlsCertExpiryDays: 14,
    tlsCertExpiryFor: '1h',

    // LLMProbeWrongAnswers: any answer that failed a probe's assertions in
    // the window while the probe's last run did not succeed. A canary with
    // deterministic settings should never fail, so one is enough; the next
    // good answer resolves it.
    wrongAnswerWindow: '10m',
    wrongAnswerSeverity: 'page',

    // LLMProbePrefixCacheNotHitting: mean warm TTFT over mean cold TTFT
    // of session and shared_prefix probes above this ratio over the
    // window, with at least minRuns cold requests in it, for `for`. A
    // working prefix cache makes warm requests far faster (the simulator:
    // about 0.05 for a 1024-token prefix); without one they cost the same.
    prefixCacheRatio: 0.8,
    prefixCacheWindow: '30m',
    prefixCacheMinRuns: 3,
    prefixCacheFor: '15m',

    // LLMProbeRateLimitHeadroomLow: less than this share of a target's rate
    // limit left in its last answers, reported within freshSeconds, for
    // `for`.
    rateLimitHeadroomRatio: 0.1,
    rateLimitFreshSeconds: 600,
    rateLimitHeadroomFor: '5m',

    // LLMServerQueueGrowing: more than this many requests waiting on average
    // over avgWindow while the queue still grows over derivWindow.
    serverQueueWaiting: 5,
    serverQueueAvgWindow: '5m',
    serverQueueDerivWindow: '15m',
    serverQueueFor: '15m',

    // LLMServerKVCacheSaturated: KV cache usage ratio averaged over the
    // window.
    kvCacheSaturatedRatio: 0.95,
    kvCacheWindow: '5m',
    kvCacheFor: '10m',

    serverMetricsUnreachableFor: '5m',

    // LLMServerCancelledRequestsLeaking: any request a cancellation probe
    // cut whose slot the server did not free within the probe's
    // release_timeout, in the window. A healthy server frees every one.
    cancelLeakWindow: '30m',
    cancelLeakSeverity: 'ticket',

    // LLMGPUMemoryNearlyFull: used / total device memory. vLLM and
    // TensorRT-LLM reserve most of it up front (vLLM's default
    // gpu_memory_utilization is 0.9), so keep this above the reservation.
    gpuMemoryFullRatio: 0.98,
    gpuMemoryFullFor: '10m',

    // LLMGPUHot: die temperature in °C.
    gpuHotCelsius: 85,
    gpuHotFor: '10m',

    // LLMGPUThrottled: clocks held down by one of these reasons for more
    // than `ratio` of the window. The serving-stack dashboard shows these
    // and sw_power_cap (a busy GPU at its power limit is normal, so it does
    // not alert).
    gpuThrottleReasons: ['hw_slowdown', 'sw_thermal_slowdown', 'hw_thermal_slowdown', 'hw_power_brake_slowdown'],
    gpuThrottleRatio: 0.5,
    gpuThrottleWindow: '10m',
    gpuThrottleFor: '10m',

    // LLMGPUXIDFatal pages for XIDs that mean the GPU is failing or gone
    // (NVIDIA's XID catalogue: 48 DBE, 63/64 row remapping, 74 NVLink, 79
    // fallen off the bus, 92 high SBE rate, 94/95 contained/uncontained
    // ECC); LLMGPUXIDError tickets every other XID (13, 31, 43 are the
    // application's own faults).
    gpuFatalXIDs: [48, 63, 64, 74, 79, 92, 94, 95],
    // LLMGPUXIDError: any XID error within the window; LLMGPUUncorrectableECCErrors:
    // uncorrectable ECC errors (or rows remapped after them) within the window.
    gpuXIDWindow: '10m',
    gpuECCWindow: '10m',

    // ---- GPU source -------------------------------------------------------------

    // Where the GPU dashboards and alerts read GPUs from: 'nvml', the
    // prober's own llm_gpu_* series, or 'dcgm', dcgm-exporter's DCGM_FI_DEV_*
    // where it already runs on every node (then set gpus: {enabled: false}
    // in the prober; docs/deployment.md). lib/gpu.libsonnet lists the DCGM
    // fields read and the ones to enable beyond dcgm-exporter's defaults.
    gpuSource: 'nvml',
    // Label matchers of dcgm-exporter's series, e.g. 'job="dcgm-exporter"'.
    dcgmSelector: '',
    // The label dcgm-exporter puts the node name in: Hostname up to release
    // 4.5.3-4.8.2, hostname after it.
    dcgmNodeLabel: 'Hostname',
    // Labels (comma-separated) a DCGM series, once its node label is
    // renamed node, shares with the llm_probe_* series of the probers
    // probing the servers on its GPUs; the dashboards keep the GPUs of the
    // selected targets by them. 'node' needs the prober's scrape to add
    // the node name as `node` (docs/deployment.md); with dcgm-exporter's
    // Kubernetes mapping and the sidecar, 'namespace, pod' narrows to the
    // server's own GPUs. Empty: every GPU dcgm-exporter reports.
    dcgmJoinLabels: 'node',

    proberDownFor: '5m',
    configReloadFailedFor: '10m',

    // LLMProberModelDisappeared: a model probed through discover_models in
    // the window that the server no longer lists (its probes stopped).
    // Resolves itself one window after the model went.
    modelDisappearedWindow: '1h',
    modelDisappearedFor: '5m',
    // LLMProberModelDiscoveryFailing: the model list of a target could not
    // be refreshed for this long (the last good list is still probed).
    modelDiscoveryFailingFor: '15m',

    // ---- Dashboards -----------------------------------------------------------

    // uid of each dashboard: this prefix, '-', its name (overview,
    // serving-stack). Keep uids stable: links and bookmarks use them.
    dashboardUIDPrefix: 'llm-prober',
    dashboardTitlePrefix: 'LLM prober / ',
    // The first tag also links the dashboards to each other.
    dashboardTags: ['llm-prober', 'llm', 'inference'],
    dashboardRefresh: '30s',
    dashboardTimeFrom: 'now-3h',
    dashboardTimeTo: 'now',
    dashboardTimezone: 'browser',
    // The error-budget burn-rate panels of the overview: the windows each
    // shows (recorded by the rules: keep them among sloBurnRateAlerts'
    // windows), threshold lines at the factors of the named alert.
    dashboardBurnRatePanels: [
      { title: 'fast', windows: ['5m', '1h'], alert: 'LLMProbeSLOErrorBudgetBurnFast' },
      { title: 'slow', windows: ['6h', '1d', '3d'], alert: 'LLMProbeSLOErrorBudgetBurnSlow' },
    ],
    // Threshold lines of the KV cache and GPU temperature panels: a warning
    // line, and the alert's threshold.
    kvCacheWarningRatio: 0.8,
    gpuWarmCelsius: 80,
  },
}
