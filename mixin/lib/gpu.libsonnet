// GPU signals as PromQL, from the source _config.gpuSource names: the
// prober's own llm_gpu_* (NVML, 'nvml') or dcgm-exporter's DCGM_FI_DEV_*
// ('dcgm'). Both give series labelled gpu, uuid and name in the prober's
// base units (ratios, bytes, watts, hertz), so the dashboards and GPU
// alerts are written once. dcgm-exporter's labels are renamed on the way
// (UUID → uuid, modelName → name, its hostname label → node) and its units
// converted (MiB, %, MHz, mJ).
//
// DCGM fields the dashboards and alerts read, from dcgm-exporter's
// etc/default-counters.csv (on by default): DCGM_FI_DEV_GPU_UTIL,
// _MEM_COPY_UTIL, _FB_USED, _FB_FREE, _FB_RESERVED, _POWER_USAGE,
// _GPU_TEMP, _SM_CLOCK, _TOTAL_ENERGY_CONSUMPTION, _XID_ERRORS,
// _UNCORRECTABLE_REMAPPED_ROWS. Off by default, to enable in the counters
// file for their panels and alert conditions: DCGM_FI_DEV_CLOCKS_EVENT_REASONS
// (clock-event reasons), DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (uncorrectable ECC
// before Ampere; remapped rows cover Ampere and newer). The power limit
// line and per-process memory exist only with the NVML source (dcgm-exporter has
// no per-process memory).
local promql = import 'promql.libsonnet';

{
  // NVML clock event reason bits, by the reason label llm_gpu_* uses.
  reasonBits:: {
    gpu_idle: 1,
    applications_clocks_setting: 2,
    sw_power_cap: 4,
    hw_slowdown: 8,
    sync_boost: 16,
    sw_thermal_slowdown: 32,
    hw_thermal_slowdown: 64,
    hw_power_brake_slowdown: 128,
    display_clock_setting: 256,
  },

  // new returns the signals of c.gpuSource. matchers select the prober's
  // series (NVML source only: dcgm-exporter's are selected by
  // c.dcgmSelector).
  new(c, matchers=[])::
    if c.gpuSource == 'nvml' then $.nvml(c, matchers)
    else if c.gpuSource == 'dcgm' then $.dcgm(c)
    else error "gpuSource must be 'nvml' or 'dcgm', not '%s'" % c.gpuSource,

  nvml(c, matchers):: {
    local s(metric, extra=[]) = promql.series(metric, [c.proberSelector] + matchers + extra),
    source:: 'NVML',
    // joinOn: the labels a GPU series shares with the llm_probe_* series of
    // the prober instances next to it (the prober exports both).
    joinOn:: 'job, instance',
    byGPU:: 'job, instance, gpu, uuid, name',
    legend:: '{{instance}} GPU {{gpu}}',
    utilization:: s('llm_gpu_utilization_ratio'),
    memoryBandwidth:: s('llm_gpu_memory_bandwidth_utilization_ratio'),
    memoryUsed:: s('llm_gpu_memory_used_bytes'),
    memoryTotal:: s('llm_gpu_memory_total_bytes'),
    power:: s('llm_gpu_power_watts'),
    powerLimit:: s('llm_gpu_power_limit_watts'),
    temperature:: s('llm_gpu_temperature_celsius'),
    smClock:: s('llm_gpu_sm_clock_hertz'),
    // meanPower: watts averaged over w, from the energy counter (exact
    // where power samples are only a scrape's instant); energy: joules
    // used within w.
    meanPower(w):: 'rate(%s[%s])' % [s('llm_gpu_energy_joules_total'), w],
    energy(w):: 'increase(%s[%s])' % [s('llm_gpu_energy_joules_total'), w],
    // clockEvents: 1 while a reason holds clocks down, label reason.
    clockEvents(reasons):: s('llm_gpu_clock_throttle_reason', ['reason=~"%s"' % std.join('|', reasons)]),
    // xidEvents: XID errors per GPU and code over w, label xid.
    xidEvents(w):: 'increase(%s[%s])' % [s('llm_gpu_xid_errors_total'), w],
    // newXID: one series per GPU and XID code that occurred within w. A
    // code's counter appears with its first event, which increase() cannot
    // see, hence the second clause.
    // newXID: one series per GPU and XID code that occurred within w; with
    // codes, only those (fatal) or only the others (fatal=false).
    newXID(w, codes=[], fatal=true)::
      local x = s('llm_gpu_xid_errors_total', if codes == [] then [] else ['xid%s"%s"' % [if fatal then '=~' else '!~', std.join('|', [std.toString(c) for c in codes])]]);
      'increase(%s[%s]) > 0\nor\n(%s unless %s offset %s)' % [x, w, x, x, w],
    xidLabel:: 'xid',
    // uncorrectable: uncorrectable ECC errors (volatile counter) or rows
    // remapped after one, over w.
    uncorrectable(w)::
      'increase(%s[%s]) > 0\nor\nincrease(%s[%s]) > 0' % [
        s('llm_gpu_ecc_errors_total', ['error="uncorrected"', 'period="volatile"']), w,
        s('llm_gpu_remapped_rows_total', ['error="uncorrectable"']), w,
      ],
    processMemory:: s('llm_gpu_process_memory_used_bytes'),
  },

  dcgm(c):: {
    local sel(metric) = promql.series(metric, [c.dcgmSelector]),
    // rl gives an expression over DCGM series the prober's label names.
    // label_join copies a label without label_replace's "$1", which
    // Grafana would take for a template variable.
    local rl(expr) =
      'label_join(label_join(label_join(%s, "uuid", "", "UUID"), "name", "", "modelName"), "node", "", "%s")'
      % [expr, c.dcgmNodeLabel],
    source:: 'dcgm-exporter',
    joinOn:: c.dcgmJoinLabels,
    byGPU:: 'job, instance, gpu, uuid, name, node',
    legend:: '{{node}} GPU {{gpu}}',
    utilization:: rl(sel('DCGM_FI_DEV_GPU_UTIL') + ' / 100'),
    memoryBandwidth:: rl(sel('DCGM_FI_DEV_MEM_COPY_UTIL') + ' / 100'),
    memoryUsed:: rl(sel('DCGM_FI_DEV_FB_USED') + ' * 1048576'),
    // dcgm-exporter has no total: used + free + reserved, in MiB.
    memoryTotal:: rl('(%s + %s + %s) * 1048576' % [sel('DCGM_FI_DEV_FB_USED'), sel('DCGM_FI_DEV_FB_FREE'), sel('DCGM_FI_DEV_FB_RESERVED')]),
    power:: rl(sel('DCGM_FI_DEV_POWER_USAGE')),
    // DCGM_FI_DEV_POWER_MGMT_LIMIT is off in dcgm-exporter's defaults.
    powerLimit:: null,
    temperature:: rl(sel('DCGM_FI_DEV_GPU_TEMP')),
    smClock:: rl(sel('DCGM_FI_DEV_SM_CLOCK') + ' * 1e6'),
    // The energy counter is in mJ.
    meanPower(w):: rl('rate(%s[%s]) / 1000' % [sel('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION'), w]),
    energy(w):: rl('increase(%s[%s]) / 1000' % [sel('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION'), w]),
    // The reasons bitmask, one 0/1 series per reason, as llm_gpu_* has.
    clockEvents(reasons):: std.join('\nor\n', [
      rl('label_replace(floor(%s / %d) %% 2, "reason", "%s", "", "")' % [sel('DCGM_FI_DEV_CLOCKS_EVENT_REASONS'), $.reasonBits[r], r])
      for r in reasons
    ]),
    // DCGM_FI_DEV_XID_ERRORS holds the last XID (label err_code), not a
    // count: a change of it is an event; a repeat of the same code is not
    // visible.
    xidEvents(w):: rl('changes(%s[%s])' % [sel('DCGM_FI_DEV_XID_ERRORS'), w]),
    newXID(w, codes=[], fatal=true)::
      local x = promql.series('DCGM_FI_DEV_XID_ERRORS', [c.dcgmSelector] + (if codes == [] then [] else ['err_code%s"%s"' % [if fatal then '=~' else '!~', std.join('|', [std.toString(code) for code in codes])]]));
      rl('%s > 0 unless %s offset %s > 0' % [x, x, w]),
    xidLabel:: 'err_code',
    uncorrectable(w)::
      rl('increase(%s[%s]) > 0\nor\nincrease(%s[%s]) > 0' % [
        sel('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL'), w,
        sel('DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS'), w,
      ]),
    processMemory:: null,
  },
}
