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

  // row starts a new row of panels. A collapsed row opens closed: the
  // panels up to the next row are laid out inside it (layout()), and
  // Grafana queries them only when someone opens it, so rows of features
  // few probes use cost nothing until wanted.
  row(title, collapsed=false):: { type: 'row', title: title, collapsed: collapsed, panels: [] },
  collapsedRow(title):: $.row(title, collapsed=true),

  // withRepeat repeats a row, and the panels under it, once per selected
  // value of a template variable; inside each copy the variable holds that
  // one value, so the row's queries select only it.
  withRepeat(variable):: { repeat: variable },

  // q is a range query; instant an instant query for stat panels.
  q(expr, legend):: { expr: expr, legendFormat: legend, instant: false },
  instant(expr, legend):: { expr: expr, legendFormat: legend, instant: true },

  // tableQuery is an instant query returning a table: one row per series,
  // its labels as columns and its value in "Value #<refId>".
  tableQuery(expr):: $.instant(expr, '') + { format: 'table' },

  // heatmapQuery is a range query of histogram buckets for a heatmap
  // panel: a native histogram as it is, classic buckets by their le.
  heatmapQuery(expr):: $.q(expr, '{{le}}') + { format: 'heatmap' },

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

  // table shows instant queries (tableQuery) merged into one row per
  // label set. columns: [[refId, header, unit, decimals], ...] in order;
  // every other column but the labels in keep is hidden.
  table(title, description, keep, columns, targets):: {
    type: 'table',
    title: title,
    description: description,
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: 'none',
        mappings: [],
        custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false },
        color: { mode: 'thresholds' },
        thresholds: { mode: 'absolute', steps: [{ color: 'text', value: null }] },
      },
      overrides: [
        {
          matcher: { id: 'byName', options: col[1] },
          properties: [
            { id: 'unit', value: col[2] },
            { id: 'decimals', value: col[3] },
          ],
        }
        for col in columns
      ],
    },
    options: {
      showHeader: true,
      cellHeight: 'sm',
      footer: { show: false, reducer: ['sum'], countRows: false, fields: '' },
    },
    transformations: [
      { id: 'merge', options: {} },
      // The labels in keep and the named values; job, instance, model and
      // the like are dropped.
      {
        id: 'filterFieldsByName',
        options: { include: { names: keep + ['Value #' + col[0] for col in columns] } },
      },
      {
        id: 'organize',
        options: {
          excludeByName: {},
          indexByName: {
            [keep[i]]: i
            for i in std.range(0, std.length(keep) - 1)
          } + {
            ['Value #' + columns[i][0]]: std.length(keep) + i
            for i in std.range(0, std.length(columns) - 1)
          },
          renameByName: { ['Value #' + col[0]]: col[1] for col in columns },
        },
      },
    ],
  },

  // withColumnColor colours the cells of a table column by thresholds
  // (steps as in stat), background or text.
  withColumnColor(header, steps, mode='color-background'):: { fieldConfig+: { overrides+: [{
    matcher: { id: 'byName', options: header },
    properties: [
      { id: 'custom.cellOptions', value: { type: mode, mode: 'basic' } },
      { id: 'color', value: { mode: 'thresholds' } },
      { id: 'thresholds', value: { mode: 'absolute', steps: [{ color: s[0], value: s[1] } for s in steps] } },
    ],
  }] } },

  // heatmap shows the distribution of a histogram over time from
  // heatmapQuery targets: yUnit is the unit of the observed values (the
  // buckets), cells are observations per second.
  heatmap(title, description, yUnit, targets):: {
    type: 'heatmap',
    title: title,
    description: description,
    targets: targets,
    fieldConfig: {
      defaults: {
        // The cells: observations per second in each bucket.
        unit: 'reqps',
        mappings: [],
        custom: {
          hideFrom: { legend: false, tooltip: false, viz: false },
          scaleDistribution: { type: 'linear' },
        },
      },
      overrides: [],
    },
    options: {
      // The buckets come from Prometheus; Grafana must not re-bucket them.
      calculate: false,
      cellGap: 1,
      cellValues: { unit: 'reqps' },
      color: {
        mode: 'scheme',
        scheme: 'Oranges',
        fill: 'dark-orange',
        scale: 'exponential',
        exponent: 0.5,
        steps: 64,
        reverse: false,
      },
      exemplars: { color: 'rgba(255,0,255,0.7)' },
      filterValues: { le: 1e-9 },
      legend: { show: true },
      rowsFrame: { layout: 'auto' },
      showValue: 'never',
      tooltip: { mode: 'single', yHistogram: true, showColorScale: false },
      yAxis: { axisPlacement: 'left', reverse: false, unit: yUnit },
    },
  },

  // withDecimals fixes the number of decimals shown.
  withDecimals(n):: { fieldConfig+: { defaults+: { decimals: n } } },

  // withNoValue is the text shown where a query returns nothing.
  withNoValue(text):: { fieldConfig+: { defaults+: { noValue: text } } },

  // withColorByName paints the series whose display name matches the
  // regular expression one fixed colour (e.g. pages red beside tickets).
  withColorByName(regexp, color):: { fieldConfig+: { overrides+: [{
    matcher: { id: 'byRegexp', options: regexp },
    properties: [{ id: 'color', value: { mode: 'fixed', fixedColor: color } }],
  }] } },

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
  //
  // The panels after a collapsed row go inside it (its "panels"), placed
  // as they will be when it is opened; on the dashboard the closed row
  // takes one line, and the next row follows right under it.
  layout(panels)::
    local step(s, p) =
      local newline = if s.x > 0 then { x: 0, y: s.y + s.rowH, rowH: 0 } else { x: s.x, y: s.y, rowH: s.rowH };
      if p.type == 'row' then
        local y = if s.collapsed then s.rowY + 1 else newline.y;
        s {
          x: 0,
          y: y + 1,
          rowH: 0,
          rowY: y,
          collapsed: p.collapsed,
          id: s.id + 1,
          out: s.out + [p { id: s.id, gridPos: { h: 1, w: 24, x: 0, y: y } }],
        }
      else
        local w = p.gridPos.w;
        local h = p.gridPos.h;
        local l = if s.x + w > 24 then newline else { x: s.x, y: s.y, rowH: s.rowH };
        local placed = p {
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
        };
        local n = std.length(s.out);
        s {
          x: l.x + w,
          y: l.y,
          rowH: std.max(l.rowH, h),
          id: s.id + 1,
          out:
            if s.collapsed then s.out[:n - 1] + [s.out[n - 1] { panels+: [placed] }]
            else s.out + [placed],
        };
    std.foldl(step, panels, { x: 0, y: 0, rowH: 0, rowY: 0, collapsed: false, id: 1, out: [] }).out,
}
