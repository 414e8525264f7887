// The llm-prober monitoring mixin: recording rules (prometheusRules),
// alerts (prometheusAlerts) and Grafana dashboards (grafanaDashboards),
// configured by _config (config.libsonnet). Use it as any monitoring mixin
// (README.md):
//
//   local llmProber = (import 'mixin.libsonnet') + {
//     _config+:: { proberSelector: 'job="llm-prober"', kvCacheSaturatedRatio: 0.9 },
//   };
//   { groups: llmProber.prometheusRules.groups + llmProber.prometheusAlerts.groups }
//
// The project's own files (alerts/, dashboards/, deploy/) are generated
// from it by `make mixin` (mixin/gen).
(import 'config.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
