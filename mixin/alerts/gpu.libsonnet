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
        'LLMGPUXIDError',
        c.ticketSeverity,
        src.newXID(c.gpuXIDWindow),
        '',
        'GPU {{ $labels.gpu }} on {{ $labels.instance }} reported XID {{ $labels.%s }}' % src.xidLabel,
        'GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) reported XID error {{ $labels.%s }} within the last %s. Some XIDs are the application’s own faults (13, 31, 43); others mean the GPU is failing or gone (48, 63, 64, 74, 79, 92, 94, 95): see NVIDIA’s XID catalogue.' % [src.xidLabel, promql.durationText(c.gpuXIDWindow)],
      ) + {
        comment:: |||
          Any XID error the driver reported (%s source). It fires at once:
          one XID 79 (GPU fallen off the bus) is already an outage.
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
