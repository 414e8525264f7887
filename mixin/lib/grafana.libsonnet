// Grafana dashboard building blocks: plain jsonnet objects in Grafana's
// dashboard JSON model (schemaVersion 39), no external library.
//
// Every dashboard works both imported through the UI and provisioned from
// files: the data source is a template variable of type datasource (no
// __inputs, which file provisioning does not resolve), every panel and
// query refers to it as ${datasource}, and the uid is fixed.
{
  // The one data source reference every panel, query, variable and
  // annotation uses.
  datasource:: { type: 'prometheus', uid: '${datasource}' },

  // dashboard is a dashboard with the data source variable first, then
  // variables; panels are laid out by layout().
  dashboard(config, name, title, description, variables, panels):: {
    uid: config.dashboardUIDPrefix + '-' + name,
    title: config.dashboardTitlePrefix + title,
    description: description,
    tags: config.dashboardTags,
    editable: true,
    graphTooltip: 1,  // shared crosshair
    time: { from: config.dashboardTimeFrom, to: config.dashboardTimeTo },
    refresh: config.dashboardRefresh,
    schemaVersion: 39,
    version: 1,
    links: [{
      title: 'llm-prober dashboards',
      type: 'dashboards',
      tags: [config.dashboardTags[0]],
      asDropdown: true,
      includeVars: true,
      keepTime: true,
      targetBlank: false,
    }],
    annotations: { list: [{
      name: 'llm-prober alerts',
      datasource: $.datasource,
      enable: true,
      hide: false,
      iconColor: 'red',
      expr: 'ALERTS{alertname=~"LLM.*", alertstate="firing", job=~"$job"}',
      step: '60s',
      titleFormat: '{{alertname}}',
      textFormat: '{{target}} {{probe}} {{instance}}',
      tagKeys: 'severity',
      useValueForTime: false,
    }] },
    templating: { list: [$.datasourceVariable] + variables },
    panels: $.layout(panels),
    timepicker: {},
    timezone: config.dashboardTimezone,
    weekStart: '',
    fiscalYearStartMonth: 0,
    liveNow: false,
    id: null,  // Grafana assigns one: importing never overwrites another dashboard
  },

  // The template variable every query's data source comes from.
  datasourceVariable:: {
    name: 'datasource',
    label: 'Data source',
    type: 'datasource',
    query: 'prometheus',
    current: {},
    options: [],
    hide: 0,
    refresh: 1,  // on load
    regex: '',
    multi: false,
    includeAll: false,
    sort: 0,
  },

  // queryVariable is a multi-value label_values variable with an All
  // option that matches everything, including an empty label (".*").
  queryVariable(name, label, selector):: {
    local q = 'label_values(%s, %s)' % [selector, name],
    name: name,
    label: label,
    type: 'query',
    query: q,
    definition: q,
    datasource: $.datasource,
    current: {},
    options: [],
    hide: 0,
    refresh: 2,  // on time range change
    regex: '',
    multi: true,
    includeAll: true,
    allValue: '.*',
    sort: 1,
  },

  // row starts a new row of panels.
  row(title):: { type: 'row', title: title, collapsed: false, panels: [] },

  // q is a range query; instant an instant query for stat panels.
  q(expr, legend):: { expr: expr, legendFormat: legend, instant: false },
  instant(expr, legend):: { expr: expr, legendFormat: legend, instant: true },

  // size sets a panel's width (of 24 columns) and height.
  size(w, h):: { gridPos+: { w: w, h: h } },

  // timeseries is a line chart; unit is a Grafana unit id ("none" for a
  // plain number, "suffix:x" for a custom one).
  timeseries(title, description, unit, targets):: {
    type: 'timeseries',
    title: title,
    description: description,
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        mappings: [],
        custom: {
          drawStyle: 'line',
          lineWidth: 1,
          fillOpacity: 10,
          showPoints: 'never',
          spanNulls: false,
          axisSoftMin: 0,
        },
        color: { mode: 'palette-classic' },
      },
      overrides: [],
    },
    options: {
      legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['mean', 'max', 'lastNotNull'] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  },

  // stat shows the last value of each series, coloured by thresholds
  // (steps: [[color, value or null for the base], ...]).
  stat(title, description, unit, steps, targets):: {
    type: 'stat',
    title: title,
    description: description,
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        mappings: [],
        thresholds: { mode: 'absolute', steps: [{ color: s[0], value: s[1] } for s in steps] },
        color: { mode: 'thresholds' },
      },
      overrides: [],
    },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background',
      graphMode: 'none',
      textMode: 'value_and_name',
      orientation: 'auto',
      justifyMode: 'auto',
    },
  },

  // withMax caps a panel's axis.
  withMax(v):: { fieldConfig+: { defaults+: { max: v } } },

  // withStack stacks a timeseries panel's series.
  withStack:: { fieldConfig+: { defaults+: { custom+: {
    stacking: { mode: 'normal', group: 'A' },
    fillOpacity: 60,
  } } } },

  // withThresholdLines draws dashed lines at the given values, ascending:
  // orange, then red from the last one.
  withThresholdLines(values):: { fieldConfig+: { defaults+: {
    thresholds: {
      mode: 'absolute',
      steps: [{ color: 'green', value: null }] + [
        { color: ['orange', 'red'][std.min(i, 1)], value: values[i] }
        for i in std.range(0, std.length(values) - 1)
      ],
    },
    custom+: { thresholdsStyle: { mode: 'dashed' } },
  } } },

  // withRightAxis puts the queries with the given refIds on a right-hand
  // axis with their own unit, dashed.
  withRightAxis(unit, refIds):: { fieldConfig+: { overrides+: [
    {
      matcher: { id: 'byFrameRefID', options: id },
      properties: [
        { id: 'custom.axisPlacement', value: 'right' },
        { id: 'unit', value: unit },
        { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
      ],
    }
    for id in refIds
  ] } },

  // withValueMapping shows 0 and 1 as texts, e.g. {'0': ['FAIL', 'red'],
  // '1': ['OK', 'green']}.
  withValueMapping(texts):: { fieldConfig+: { defaults+: { mappings: [{
    type: 'value',
    options: {
      [std.objectFields(texts)[i]]: {
        text: texts[std.objectFields(texts)[i]][0],
        color: texts[std.objectFields(texts)[i]][1],
        index: i,
      }
      for i in std.range(0, std.length(texts) - 1)
    },
  }] } } },

  // layout places panels on Grafana's 24-column grid, left to right and top
  // to bottom (a row starts a new line and spans it), numbers them from 1,
  // and gives every query a refId (A, B, ...), the data source and
  // range = !instant.
  layout(panels)::
    local step(s, p) =
      local newline = if s.x > 0 then { x: 0, y: s.y + s.rowH, rowH: 0 } else { x: s.x, y: s.y, rowH: s.rowH };
      if p.type == 'row' then
        local l = newline;
        s {
          x: 0,
          y: l.y + 1,
          rowH: 0,
          id: s.id + 1,
          out: s.out + [p { id: s.id, gridPos: { h: 1, w: 24, x: 0, y: l.y } }],
        }
      else
        local w = p.gridPos.w;
        local h = p.gridPos.h;
        local l = if s.x + w > 24 then newline else { x: s.x, y: s.y, rowH: s.rowH };
        s {
          x: l.x + w,
          y: l.y,
          rowH: std.max(l.rowH, h),
          id: s.id + 1,
          out: s.out + [p {
            id: s.id,
            gridPos: { h: h, w: w, x: l.x, y: l.y },
            datasource: $.datasource,
            targets: [
              p.targets[i] {
                refId: std.char(std.codepoint('A') + i),
                datasource: $.datasource,
                range: !p.targets[i].instant,
              }
              for i in std.range(0, std.length(p.targets) - 1)
            ],
          }],
        };
    std.foldl(step, panels, { x: 0, y: 0, rowH: 0, id: 1, out: [] }).out,
}
