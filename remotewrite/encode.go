// Package remotewrite pushes the prober's own samples to receivers with
// Prometheus' remote-write 1.0 protocol (a snappy-compressed protobuf
// WriteRequest POSTed to the receiver), for probers in many locations
// that no central Prometheus can scrape.
//
// The WriteRequest is encoded here with protowire rather than with
// prometheus/prometheus' prompb, which needs gogo/protobuf (not otherwise
// in the module graph, and unmaintained), or client_golang's exp remote
// API, a pseudo-versioned module: the 1.0 message is four small messages
// (WriteRequest, TimeSeries, Label, Sample), tested against a real
// Prometheus receiver.
package remotewrite

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	dto "github.com/prometheus/client_model/go"
)

// Label is one label of a series.
type Label struct{ Name, Value string }

// sample is one value of one series at one time.
type sample struct {
	// labels is sorted by name and shared by the samples of a series of
	// one gather.
	labels []Label
	value  float64
	ts     int64 // milliseconds since the epoch
}

// Field numbers of prometheus/prompb/types.proto and remote.proto.
const (
	fieldWriteTimeseries = 1
	fieldSeriesLabels    = 1
	fieldSeriesSamples   = 2
	fieldLabelName       = 1
	fieldLabelValue      = 2
	fieldSampleValue     = 1
	fieldSampleTimestamp = 2
)

// encode is the WriteRequest of samples: consecutive samples of the same
// series (the same labels slice) go into one TimeSeries. Message lengths
// are computed before writing, so nothing is allocated but buf's growth.
func encode(buf []byte, samples []sample) []byte {
	for i := 0; i < len(samples); {
		j := i + 1
		for j < len(samples) && sameSeries(samples[j].labels, samples[i].labels) {
			j++
		}
		labels := samples[i].labels
		size := 0
		for _, l := range labels {
			size += protowire.SizeTag(fieldSeriesLabels) + protowire.SizeBytes(labelSize(l))
		}
		for _, s := range samples[i:j] {
			size += protowire.SizeTag(fieldSeriesSamples) + protowire.SizeBytes(sampleSize(s))
		}
		buf = protowire.AppendTag(buf, fieldWriteTimeseries, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(size))
		for _, l := range labels {
			buf = protowire.AppendTag(buf, fieldSeriesLabels, protowire.BytesType)
			buf = protowire.AppendVarint(buf, uint64(labelSize(l)))
			buf = protowire.AppendTag(buf, fieldLabelName, protowire.BytesType)
			buf = protowire.AppendString(buf, l.Name)
			buf = protowire.AppendTag(buf, fieldLabelValue, protowire.BytesType)
			buf = protowire.AppendString(buf, l.Value)
		}
		for _, s := range samples[i:j] {
			buf = protowire.AppendTag(buf, fieldSeriesSamples, protowire.BytesType)
			buf = protowire.AppendVarint(buf, uint64(sampleSize(s)))
			buf = protowire.AppendTag(buf, fieldSampleValue, protowire.Fixed64Type)
			buf = protowire.AppendFixed64(buf, math.Float64bits(s.value))
			buf = protowire.AppendTag(buf, fieldSampleTimestamp, protowire.VarintType)
			buf = protowire.AppendVarint(buf, uint64(s.ts))
		}
		i = j
	}
	return buf
}

func labelSize(l Label) int {
	return protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(l.Name)) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(l.Value))
}

func sampleSize(s sample) int {
	return protowire.SizeTag(fieldSampleValue) + protowire.SizeFixed64() +
		protowire.SizeTag(fieldSampleTimestamp) + protowire.SizeVarint(uint64(s.ts))
}

func sameSeries(a, b []Label) bool {
	if len(a) > 0 && len(b) > 0 && &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// flatten turns gathered families into samples at ts, with external
// labels added where a series does not have the label itself (Prometheus'
// rule). Histograms travel as their classic _bucket, _sum and _count
// series (remote-write 1.0 has no native histograms); summaries as their
// quantiles, _sum and _count.
func flatten(mfs []*dto.MetricFamily, external []Label, ts int64) []sample {
	var out []sample
	add := func(name string, base []*dto.LabelPair, v float64, extra ...Label) {
		ls := make([]Label, 0, len(base)+len(extra)+len(external)+1)
		ls = append(ls, Label{"__name__", name})
		for _, lp := range base {
			ls = append(ls, Label{lp.GetName(), lp.GetValue()})
		}
		ls = append(ls, extra...)
		for _, e := range external {
			if !slices.ContainsFunc(ls, func(l Label) bool { return l.Name == e.Name }) {
				ls = append(ls, e)
			}
		}
		slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, sample{labels: ls, value: v, ts: ts})
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.Metric {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.Label, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.Label, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.Label, m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.Quantile {
					add(name, m.Label, q.GetValue(), Label{"quantile", formatFloat(q.GetQuantile())})
				}
				add(name+"_sum", m.Label, s.GetSampleSum())
				add(name+"_count", m.Label, float64(s.GetSampleCount()))
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				if len(h.Bucket) == 0 {
					// Native only: nothing remote-write 1.0 can carry
					// but the count and sum.
					add(name+"_sum", m.Label, h.GetSampleSum())
					add(name+"_count", m.Label, float64(h.GetSampleCount()))
					continue
				}
				for _, b := range h.Bucket {
					if math.IsInf(b.GetUpperBound(), +1) {
						continue // added below from the count
					}
					add(name+"_bucket", m.Label, float64(b.GetCumulativeCount()), Label{"le", formatFloat(b.GetUpperBound())})
				}
				add(name+"_bucket", m.Label, float64(h.GetSampleCount()), Label{"le", "+Inf"})
				add(name+"_sum", m.Label, h.GetSampleSum())
				add(name+"_count", m.Label, float64(h.GetSampleCount()))
			}
		}
	}
	return out
}

// formatFloat writes le and quantile values as client_golang's text
// exposition does, so pushed and scraped series have the same labels.
func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
