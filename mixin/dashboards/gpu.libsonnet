// The serving-stack dashboard's GPU row, over the GPU source
// _config.gpuSource names (lib/gpu.libsonnet): the prober's NVML series or
// dcgm-exporter's, joined to the selected targets' probes. It opens with
// the probes' TTFT, so a GPU cause lines up with the symptom.
local g = import '../lib/grafana.libsonnet';
local gpu = import '../lib/gpu.libsonnet';
local promql = import '../lib/promql.libsonnet';
local common = import 'common.libsonnet';

{
  // panels: ps selects the probes (every template variable), ss the
  // selected targets' series, gs the prober's GPU series.
  panels(c, ps, ss, gs)::
    local src = gpu.new(c, gs);
    // ofTargets keeps GPU series next to the probes of the selected
    // targets: with the NVML source, the GPUs of the prober instances that
    // probe them (with a sidecar, the server pod's node); with DCGM, the
    // GPUs sharing c.dcgmJoinLabels with those probes' series.
    local ofTargets =
      if src.joinOn == '' then ''
      else '\nand on (%s)\n' % src.joinOn + promql.series('llm_probe_requests_total', ss);
    local on(expr) = expr + ofTargets;
    local legend = src.legend;
    // The clock event reasons that cost performance (gpu_idle, application
    // and display clock settings and sync boost do not point at a
    // problem): the LLMGPUThrottled alert's and sw_power_cap.
    local throttlingReasons = ['sw_power_cap'] + c.gpuThrottleReasons;
    [
      g.row('GPUs (%s)' % (if c.gpuSource == 'nvml' then "NVML, on the prober's host" else 'dcgm-exporter')),
      g.timeseries(
        'TTFT (prober)',
        'The TTFT the prober measures, repeated here so each GPU panel below lines up with it.',
        's',
        common.quantiles('llm_probe_time_to_first_token_seconds', ps, 'target, probe', '{{target}}/{{probe}}', ['0.5', '0.95']),
      ) + g.size(24, 6),
      g.timeseries(
        'GPU utilisation',
        'Fraction of time at least one kernel ran (not SM occupancy).',
        'percentunit',
        [g.q(on(src.utilization), legend)],
      ) + g.withMax(1) + g.size(12, 8),
      g.timeseries(
        'GPU memory bandwidth utilisation',
        'Fraction of time device memory was read or written: decode is usually memory-bound, so this tracks TPOT.',
        'percentunit',
        [g.q(on(src.memoryBandwidth), legend)],
      ) + g.withMax(1) + g.size(12, 8),
      g.timeseries(
        'GPU memory',
        'Used and total device memory. vLLM and TensorRT-LLM reserve most of it for the KV cache at start.',
        'bytes',
        [
          g.q(on(src.memoryUsed), legend + ' used'),
          g.q(on(src.memoryTotal), legend + ' total'),
        ],
      ) + g.size(8, 8),
      g.timeseries(
        'GPU memory headroom',
        'Device memory not in use (total − used). LLMGPUMemoryNearlyFull fires when used exceeds %s of total; a server that grows past its reservation (a second model, a leak, another process) shows here first.' % promql.number(c.gpuMemoryFullRatio),
        'bytes',
        [g.q(on('(\n%s\n-\n%s\n)' % [src.memoryTotal, src.memoryUsed]), legend)],
      ) + g.size(8, 8),
    ] + (
      if src.processMemory == null then []
      else [
        g.timeseries(
          'GPU memory per process',
          'Device memory of the compute processes holding the most on each GPU (the ten largest): is it the model server, or something else on its GPU?',
          'bytes',
          [g.q(on(src.processMemory), legend + ' {{process}} ({{pid}})')],
        ) + g.withStack + g.size(8, 8),
      ]
    ) + [
      g.timeseries(
        'GPU power',
        'Board power draw as sampled at each scrape, its mean over the rate interval from the energy counter (exact between scrapes: a sampled draw can miss short peaks), and the enforced limit.',
        'watt',
        [
          g.q(on(src.power), legend),
          g.q(on(src.meanPower('$__rate_interval')), legend + ' mean'),
        ]
        + (if src.powerLimit == null then [] else [g.q(on(src.powerLimit), legend + ' limit')]),
      ) + g.size(12, 8),
      g.stat(
        'GPU energy over the dashboard range',
        'Energy each GPU used over the selected time range, from its energy counter (increase over the range, in joules: 1 kWh = 3.6 MJ); set it beside the tokens the server generated in the same range.',
        'joule',
        [['blue', null]],
        [g.instant(on(src.energy('$__range')), legend)],
      ) + g.size(12, 8),
      g.timeseries(
        'GPU temperature',
        'Die temperature; LLMGPUHot fires above %s °C.' % promql.number(c.gpuHotCelsius),
        'celsius',
        [g.q(on(src.temperature), legend)],
      ) + g.withThresholdLines([c.gpuWarmCelsius, c.gpuHotCelsius]) + g.size(8, 8),
      g.timeseries(
        'GPU SM clock',
        'Current SM clock; drops with throttling.',
        'hertz',
        [g.q(on(src.smClock), legend)],
      ) + g.size(8, 8),
      g.timeseries(
        'GPU clock event reasons active',
        'Reasons %s reports for holding clocks down, excluding gpu_idle (normal) and application/display settings. LLMGPUThrottled fires when a thermal or hardware reason persists; sw_power_cap alone is normal for a busy GPU.' % src.source,
        'short',
        [g.q(
          'max by (%s, reason) (\n%s\n)%s' % [src.byGPU, src.clockEvents(throttlingReasons), ofTargets],
          legend + ' {{reason}}',
        )],
      ) + g.withStack + g.size(8, 8),
      g.timeseries(
        'GPU XID errors',
        if c.gpuSource == 'nvml' then
          'XID errors per GPU and code over the rate interval (NVML events). LLMGPUXIDError fires on any.'
        else
          "Changes of dcgm-exporter's last-XID field (label err_code) over the rate interval: it holds the last XID, so a repeat of the same code does not show. LLMGPUXIDError fires on a new one.",
        'short',
        [g.q(on(src.xidEvents('$__rate_interval')), legend + ' XID {{%s}}' % src.xidLabel)],
      ) + g.size(24, 6),
    ],
}
