// What the dashboards share: the probe template variables and their
// matchers, and percentile queries.
local g = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';

{
  // Matchers of the template variables.
  mJob:: 'job=~"$job"',
  mTarget:: 'target=~"$target"',
  mProbe:: 'probe=~"$probe"',
  mModel:: 'model=~"$model"',

  // probeVariables are the job → target → probe → model chain, each
  // narrowed by the ones before it. llm_probe_requests_total exists, at
  // zero, from the moment a probe is configured.
  probeVariables(c):: [
    g.queryVariable('job', 'Job', promql.series('llm_probe_requests_total', [c.proberSelector])),
    g.queryVariable('target', 'Target', promql.series('llm_probe_requests_total', [c.proberSelector, $.mJob])),
    g.queryVariable('probe', 'Probe', promql.series('llm_probe_requests_total', [c.proberSelector, $.mJob, $.mTarget])),
    g.queryVariable('model', 'Model', promql.series('llm_probe_requests_total', [c.proberSelector, $.mJob, $.mTarget, $.mProbe])),
  ],

  // probeMatchers select one probe's series by every template variable.
  probeMatchers(c, extra=[]):: [c.proberSelector, $.mJob, $.mTarget, $.mProbe, $.mModel] + extra,

  // percentile renders a quantile as a percentile: '0.99' → '99'.
  percentile(quantile):: promql.number(std.round(std.parseJson(quantile) * 1e4) / 1e2),

  // quantiles are one histogramQuantile query per quantile (strings, as
  // written in the query) over Grafana's $__rate_interval, legends
  // "p<percentile> <legendPrefix>".
  quantiles(metric, matchers, by, legendPrefix, qs):: [
    g.q(promql.histogramQuantile(q, metric, matchers, by, '$__rate_interval'), 'p%s %s' % [$.percentile(q), legendPrefix])
    for q in qs
  ],

  // quantilesOrMean is the one query of a summary histogram's panel, a
  // histogram the prober exports without classic buckets (docs/metrics.md,
  // "Series per probe"): with native histograms its quantiles, a line
  // each labelled stat="p<percentile>"; from classic series, which have
  // no bucket but +Inf, the mean over the window (stat="mean"), the most
  // they can tell. Legends "<stat> <legendPrefix>".
  quantilesOrMean(metric, matchers, by, legendPrefix, qs)::
    local w = '$__rate_interval';
    [g.q(promql.eitherForm(
      std.join(' or ', [
        'label_replace(%s, "stat", "p%s", "", "")'
        % [promql.histogramQuantileForms(q, metric, matchers, by, w).native, $.percentile(q)]
        for q in qs
      ]),
      'label_replace(sum by (%s) (rate(%s[%s])) / sum by (%s) (rate(%s[%s])), "stat", "mean", "", "")'
      % [by, promql.series(metric + '_sum', matchers), w, by, promql.series(metric + '_count', matchers), w],
    ), '{{stat}} ' + legendPrefix)],

  // Value mappings of 0/1 gauges.
  okMapping(bad, good):: g.withValueMapping({ '0': [bad, 'red'], '1': [good, 'green'] }),
  okSteps:: [['red', null], ['green', 1]],
}
