// PromQL helpers shared by the rules and the dashboards.
{
  // selector joins label matchers into a selector body, skipping empty
  // ones (an empty _config selector adds nothing).
  selector(matchers):: std.join(', ', [m for m in matchers if m != '']),

  // series is metric{matchers}, or the bare name when no matcher is left.
  series(metric, matchers)::
    local s = self.selector(matchers);
    if s == '' then metric else '%s{%s}' % [metric, s],

  // histogramOr joins the two forms of a histogram query: the native
  // histogram's first, the classic series' after it, each on its own line
  // around a top-level "or". Which histogram series Prometheus stores
  // depends on how it scrapes (docs/deployment.md, "Histogram modes"):
  // classic only (_bucket, _count, _sum: native histograms off), native
  // only (the histogram under its own name: 2.x
  // --enable-feature=native-histograms, 3.x scrape_native_histograms: true)
  // or both (3.x with always_scrape_classic_histograms: true). For a
  // histogram exposed in both forms, as the prober's are, exactly one form
  // has data in the first two modes; in the third both do and "or" keeps
  // the native result, which has the same labels, so no line is drawn
  // twice. A histogram exposed only with classic buckets (vLLM's) keeps
  // them in every mode, unless Prometheus 3 converts it
  // (convert_classic_histograms_to_nhcb), when the native form reads it.
  // Within a range "or" is decided per step, so a Prometheus switched from
  // one mode to another shows its history unbroken.
  //
  // Tests split queries at histogramOr to check each form on its own
  // (dashboards.HistogramOr in Go is the same string, and a test keeps
  // them equal).
  histogramOr:: '\nor\n',

  // eitherForm joins the native and the classic form of one histogram
  // query at the top level of an expression; every top-level histogram
  // query of the dashboards and rules is built through it.
  eitherForm(native, classic):: native + self.histogramOr + classic,

  // eitherFormNested is eitherForm laid out inside parentheses or a
  // function's arguments (the forms indented by four, "or" by two).
  eitherFormNested(native, classic):: '    %s\n  or\n    %s' % [native, classic],

  // histogramQuantileForms are the native and the classic form of the
  // q-quantile of histogram metric over window, grouped by `by`. A probe's
  // classic layout includes its own SLO thresholds, so classic buckets are
  // summed only within one probe (`by` includes probe) or for histograms
  // whose layout is fixed; native histograms have no such limit. offset,
  // when given, is a duration the range is shifted back by.
  histogramQuantileForms(quantile, metric, matchers, by, window, offset=''):: {
    local off = if offset == '' then '' else ' offset ' + offset,
    native: 'histogram_quantile(%s, sum by (%s) (rate(%s[%s]%s)))'
            % [quantile, by, $.series(metric, matchers), window, off],
    classic: 'histogram_quantile(%s, sum by (%s, le) (rate(%s[%s]%s)))'
             % [quantile, by, $.series(metric + '_bucket', matchers), window, off],
  },

  // histogramQuantile is histogramQuantileForms joined by eitherForm.
  histogramQuantile(quantile, metric, matchers, by, window)::
    local f = self.histogramQuantileForms(quantile, metric, matchers, by, window);
    self.eitherForm(f.native, f.classic),

  // histogramRate is the number of observations per second of histogram
  // metric over window, grouped by `by`, in both forms: histogram_count of
  // the native histogram, or the classic _count series.
  histogramRate(metric, matchers, by, window)::
    self.eitherForm(
      'sum by (%s) (histogram_count(rate(%s[%s])))' % [by, self.series(metric, matchers), window],
      'sum by (%s) (rate(%s[%s]))' % [by, self.series(metric + '_count', matchers), window],
    ),

  // histogramHeatmap is histogram metric's observations per second in each
  // bucket over window, summed over the selected series, for a heatmap: the
  // native histogram as it is, or the classic buckets by le. A probe's
  // classic layout adds its own SLO thresholds to a shared ladder, and
  // summing an le only some series have would make the cumulative counts
  // fall back; so the classic form keeps the boundaries every selected
  // series has (the count of series with that le equals the number of
  // series).
  histogramHeatmap(metric, matchers, window)::
    local bucket = $.series(metric + '_bucket', matchers);
    self.eitherForm(
      'sum(rate(%s[%s]))' % [$.series(metric, matchers), window],
      std.rstripChars(|||
        sum by (le) (
            rate(%(b)s[%(w)s])
          and on (le)
            (count by (le) (%(b)s) == scalar(count(count without (le) (%(b)s))))
        )
      ||| % { b: bucket, w: window }, '\n'),
    ),

  // durationSeconds reads a one-unit Prometheus duration ("30s", "5m",
  // "1h", "1d", "1w") as seconds, to order windows.
  durationSeconds(d)::
    local unit = std.substr(d, std.length(d) - 1, 1);
    local units = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
    assert std.objectHas(units, unit) : 'duration %s: want a number and one unit of s, m, h, d, w' % d;
    std.parseInt(std.substr(d, 0, std.length(d) - 1)) * units[unit],

  // durationText writes a one-unit duration in words for annotations:
  // "10m" → "10 minutes", "1w" → "a week".
  durationText(d)::
    local n = std.parseInt(std.substr(d, 0, std.length(d) - 1));
    local unit = std.substr(d, std.length(d) - 1, 1);
    local names = { s: 'second', m: 'minute', h: 'hour', d: 'day', w: 'week' };
    assert std.objectHas(names, unit) : 'duration %s: want a number and one unit of s, m, h, d, w' % d;
    if n == 1 then (if unit == 'h' then 'an ' else 'a ') + names[unit]
    else '%d %ss' % [n, names[unit]],

  // sortDurations sorts and deduplicates durations by length.
  sortDurations(ds)::
    std.uniq(std.sort(ds, self.durationSeconds), self.durationSeconds),

  // number writes a threshold as PromQL and people write it: the shortest
  // decimal that reads back as the same number (0.95, not std.toString's
  // 0.94999999999999996).
  number(x)::
    local tries = [std.format('%.' + p + 'f', x) for p in std.range(0, 17)];
    [s for s in tries if std.parseJson(s) == x][0],
}
