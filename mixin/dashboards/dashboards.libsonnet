// The Grafana dashboards (grafanaDashboards), keyed by file name.
(import 'overview.libsonnet') +
(import 'serving-stack.libsonnet')
