// The GPU alerts (group llm-prober-gpu.alerts), over the GPU source
// _config.gpuSource names (lib/gpu.libsonnet): the prober's NVML series or
// dcgm-exporter's. alert is alerts.libsonnet's rule constructor.
local gpu = import '../lib/gpu.libsonnet';
local promql = import '../lib/promql.libsonnet';

{
  rules(c, alert)::
    local src = gpu.new(c);
    local n = promql.number;
    [
      alert(
        'LLMGPUMemoryNearlyFull',
        c.ticketSeverity,
        '%s / %s > %s' % [src.memoryUsed, src.memoryTotal, n(c.gpuMemoryFullRatio)],
        c.gpuMemoryFullFor,
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} is nearly out of memory',
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) has {{ $value | humanizePercentage }} of its memory in use.',
      ) + {
        comment:: |||
          vLLM and TensorRT-LLM reserve most GPU memory up front (vLLM's
          default gpu_memory_utilization is 0.9), so the threshold sits
          above that reservation: this fires on memory the server did not plan for.
        |||,
      },
      alert(
        'LLMGPUHot',
        c.ticketSeverity,
        '%s > %s' % [src.temperature, n(c.gpuHotCelsius)],
        c.gpuHotFor,
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} is hot',
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) has been at {{ $value }} °C for %s; it will throttle its clocks.' % promql.durationText(c.gpuHotFor),
      ),
      alert(
        'LLMGPUThrottled',
        c.ticketSeverity,
        if c.gpuSource == 'nvml' then
          'avg_over_time(%s[%s]) > %s\n' % [src.clockEvents(c.gpuThrottleReasons), c.gpuThrottleWindow, n(c.gpuThrottleRatio)]
        else
          // avg_over_time needs a selector: average the reasons' bits
          // with a subquery instead.
          'avg_over_time((\n%s\n)[%s:]) > %s\n' % [src.clockEvents(c.gpuThrottleReasons), c.gpuThrottleWindow, n(c.gpuThrottleRatio)],
        c.gpuThrottleFor,
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} is throttled ({{ $labels.reason }})',
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) had its clocks held down by {{ $labels.reason }} {{ $value | humanizePercentage }} of the last %s: TPOT and TTFT rise while the server itself looks healthy.' % promql.durationText(c.gpuThrottleWindow),
      ) + {
        comment:: |||
          Clocks held down by a thermal or hardware limit for most of %s.
          gpu_idle, clock settings and sync boost are not problems;
          sw_power_cap is left out because a busy GPU running at its power
          limit is normal (the serving-stack dashboard still shows it).
        ||| % promql.durationText(c.gpuThrottleWindow),
      },
      alert(
        'LLMGPUXIDFatal',
        c.pageSeverity,
        src.newXID(c.gpuXIDWindow, c.gpuFatalXIDs, true),
        '',
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} reported fatal XID {{ $labels.%s }}' % src.xidLabel,
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) reported XID error {{ $labels.%s }} within the last %s: the GPU is failing or gone (NVIDIA’s XID catalogue); the server on it is down or about to be. Drain the node and reset or replace the GPU.' % [src.xidLabel, promql.durationText(c.gpuXIDWindow)],
      ) + {
        comment:: |||
          XIDs that mean the GPU is failing or gone (%s; %s source): one XID
          79 (fallen off the bus) is already an outage, so it pages at once.
        ||| % [std.join(', ', [std.toString(x) for x in c.gpuFatalXIDs]), src.source],
      },
      alert(
        'LLMGPUXIDError',
        c.ticketSeverity,
        src.newXID(c.gpuXIDWindow, c.gpuFatalXIDs, false),
        '',
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} reported XID {{ $labels.%s }}' % src.xidLabel,
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) reported XID error {{ $labels.%s }} within the last %s. 13, 31 and 43 are the application’s own faults (a kernel’s illegal access, an MMU fault, a stopped context): look at the server’s log; others: see NVIDIA’s XID catalogue.' % [src.xidLabel, promql.durationText(c.gpuXIDWindow)],
      ) + {
        comment:: |||
          Every XID that is not fatal (LLMGPUXIDFatal pages for those), %s
          source: usually the application's own fault, worth a look, not a
          page.
        ||| % src.source,
      },
      alert(
        'LLMGPUUncorrectableECCErrors',
        c.ticketSeverity,
        src.uncorrectable(c.gpuECCWindow),
        '',
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} has uncorrectable memory errors',
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) counted uncorrectable ECC errors, or remapped rows after them, within the last %s: data in its memory was lost, and the GPU needs a reset (pending row remap) or replacing.' % promql.durationText(c.gpuECCWindow),
      ) + {
        comment:: |||
          Uncorrectable (double-bit) ECC errors since the driver loaded, or
          rows remapped because of them (Ampere and newer), rising.
        |||,
      },
    ],
}
