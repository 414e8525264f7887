// LLM prober / Serving stack: the model server and its GPUs on one time
// axis with the TTFT the prober measures.
local g = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local common = import 'common.libsonnet';
local gpuRow = import 'gpu.libsonnet';

{
  local c = $._config,
  local ps = common.probeMatchers(c),
  // Server series carry the server's own model label (e.g. Triton's
  // tensorrt_llm model beside an ensemble), so they are selected by target
  // only.
  local ss = [c.proberSelector, common.mJob, common.mTarget],
  local gs = [c.proberSelector, common.mJob],
  // vLLM's own series, from Prometheus scraping vLLM directly: another
  // job, no target label; the served model name is the probes' model.
  local vllmSel = [c.vllmSelector, 'model_name=~"$model"'],
  local server(metric, extra=[]) = promql.series(metric, ss + extra),

  grafanaDashboards+:: {
    'llm-prober-serving-stack.json': g.dashboard(
      c,
      'serving-stack',
      'Serving stack',
      "The model server's queue, batch, KV cache and server-side time breakdown, and its GPUs, on one time axis with the TTFT the prober measures. Server metrics are the normalised llm_server_* (scraped through the prober); GPU metrics come from NVML on the prober's host (sidecar deployment), or from dcgm-exporter (the mixin's gpuSource).",
      common.probeVariables(c),
      [
        g.row('What users feel'),
        g.timeseries(
          'TTFT (prober) and requests waiting (server)',
          "TTFT percentiles the prober measured (left axis) beside the server's queue (right axis, dashed): queueing shows up in TTFT first.",
          's',
          common.quantiles('llm_probe_time_to_first_token_seconds', ps, 'target, probe', '{{target}}/{{probe}}', ['0.5', '0.95'])
          + [g.q('sum by (target) (%s)' % server('llm_server_requests_waiting'), '{{target}} waiting')],
        ) + g.withRightAxis('short', ['C']) + g.size(24, 8),
        g.timeseries(
          "TTFT: the prober's and the server's own",
          "The TTFT the prober measured beside what the server reports of itself. vLLM: p95 of its own vllm:time_to_first_token_seconds and vllm:request_queue_time_seconds, from Prometheus scraping vLLM's /metrics directly, matched to the probes by model name (model_name). Servers that export only totals (Triton's queue duration counter, TGI, SGLang, and vLLM through the prober): the mean queue time per request from llm_server_phase_seconds_total / llm_server_phase_requests_total. The prober's TTFT minus the server's is the network, proxies and the client; a server TTFT that rises with the prober's is the server.",
          's',
          common.quantiles('llm_probe_time_to_first_token_seconds', ps, 'target, probe', '{{target}}/{{probe}}', ['0.5', '0.95'])
          + [
            g.q(promql.histogramQuantile('0.95', 'vllm:time_to_first_token_seconds', vllmSel, 'model_name', '$__rate_interval'), 'p95 {{model_name}} vLLM TTFT'),
            g.q(promql.histogramQuantile('0.95', 'vllm:request_queue_time_seconds', vllmSel, 'model_name', '$__rate_interval'), 'p95 {{model_name}} vLLM queue'),
            g.q(
              'sum by (target) (rate(%s[$__rate_interval]))\n/\nsum by (target) (rate(%s[$__rate_interval]))'
              % [server('llm_server_phase_seconds_total', ['phase="queue"']), server('llm_server_phase_requests_total', ['phase="queue"'])],
              'mean {{target}} server queue',
            ),
          ],
        ) + g.size(24, 8),
        g.timeseries(
          'TTFT: client vs server, and the gap (5m mean)',
          "Mean TTFT per target over 5 minutes as the prober measures it (client) and as the server reports it (llm_server_time_to_first_token_seconds through the prober: vLLM, SGLang, Triton with histogram_latencies or its vLLM backend), and client − server (the gap). The server's clock starts when the request reaches its engine's queue and stops at the first token it produces; the gap is the network, proxies, TLS, HTTP handling, tokenization and the first chunk's way back. A growing gap with a flat server TTFT is outside the server; both rising together is the server. The server's mean covers all its clients. Recorded by target:llm_ttft_gap_seconds:mean5m and the two means beside it.",
          's',
          [
            g.q(server('target:llm_probe_time_to_first_token_seconds:mean5m'), '{{target}} client'),
            g.q(server('target:llm_server_time_to_first_token_seconds:mean5m'), '{{target}} server'),
            g.q(server('target:llm_ttft_gap_seconds:mean5m'), '{{target}} gap'),
          ],
        ) + g.size(24, 8),

        g.row('Model server'),
        g.timeseries(
          'Requests waiting and running',
          'llm_server_requests_waiting (queued, not yet scheduled) and llm_server_requests_running (in the running batch).',
          'short',
          [
            g.q(server('llm_server_requests_waiting'), '{{target}} {{model}} waiting'),
            g.q(server('llm_server_requests_running'), '{{target}} {{model}} running'),
          ],
        ) + g.size(12, 8),
        g.timeseries(
          'Batch size',
          'llm_server_batch_size where the server reports one (Triton TensorRT-LLM scheduled requests, TGI); on vLLM and SGLang the running count is the batch.',
          'short',
          [g.q(server('llm_server_batch_size'), '{{target}} {{model}}')],
        ) + g.size(12, 8),
        g.timeseries(
          'KV cache usage',
          'Fraction of the KV cache in use. Near 1, new requests wait or running ones are preempted (LLMServerKVCacheSaturated at %s).' % promql.number(c.kvCacheSaturatedRatio),
          'percentunit',
          [g.q(server('llm_server_kv_cache_usage_ratio'), '{{target}} {{model}}')],
        ) + g.withMax(1) + g.withThresholdLines([c.kvCacheWarningRatio, c.kvCacheSaturatedRatio]) + g.size(12, 8),
        g.timeseries(
          'Server time per request by phase',
          "Mean seconds a request spent in each server-side phase: queue, compute (prefill + decode), prefill, decode, e2e; Triton also compute_input / compute_infer / compute_output. Set beside the prober's TTFT and duration.",
          's',
          [g.q(
            'sum by (target, phase) (rate(%s[$__rate_interval]))\n/\nsum by (target, phase) (rate(%s[$__rate_interval]))'
            % [server('llm_server_phase_seconds_total'), server('llm_server_phase_requests_total')],
            '{{target}} {{phase}}',
          )],
        ) + g.size(12, 8),
        g.timeseries(
          'Server requests finished',
          'Requests the server finished per second, as the server counts them (all clients, not only the prober).',
          'reqps',
          [g.q('sum by (target, result) (rate(%s[$__rate_interval]))' % server('llm_server_requests_total'), '{{target}} {{result}}')],
        ) + g.size(12, 8),
        g.timeseries(
          'Server tokens per second',
          'Prompt tokens processed and tokens generated by the server, all clients.',
          'suffix: tok/s',
          [
            g.q('sum by (target) (rate(%s[$__rate_interval]))' % server('llm_server_prompt_tokens_total'), '{{target}} prompt'),
            g.q('sum by (target) (rate(%s[$__rate_interval]))' % server('llm_server_generation_tokens_total'), '{{target}} generation'),
          ],
        ) + g.size(12, 8),
        g.timeseries(
          'Preemptions',
          'Requests the server preempted (vLLM) or retracted (SGLang) per second to free KV cache; each is recomputed or resumed later, so its latency grows. Steady preemption means the KV cache is too small for the load (see KV cache usage).',
          'reqps',
          [g.q('sum by (target) (rate(%s[$__rate_interval]))' % server('llm_server_preemptions_total'), '{{target}}')],
        ) + g.size(12, 8),
        g.timeseries(
          'Speculative decoding acceptance',
          "Share of the draft tokens the server's speculative decoding proposed that it accepted (vLLM, llama.cpp): accepted / draft tokens over the interval. Lower acceptance means more wasted draft work and less speed-up; no line where the server runs without speculative decoding.",
          'percentunit',
          [g.q(
            'sum by (target) (rate(%s[$__rate_interval]))\n/\nsum by (target) (rate(%s[$__rate_interval]))'
            % [server('llm_server_spec_decode_accepted_tokens_total'), server('llm_server_spec_decode_draft_tokens_total')],
            '{{target}}',
          )],
        ) + g.withMax(1) + g.size(12, 8),
        g.stat(
          'Server metrics reachable',
          "llm_server_up: 0 when the prober cannot fetch or understand the server's /metrics (see the prober's log).",
          'none',
          common.okSteps,
          [g.instant('max by (target) (%s)' % server('llm_server_up'), '{{target}}')],
        ) + common.okMapping('DOWN', 'UP') + g.size(12, 6),
        g.timeseries(
          'Server metrics scrape duration',
          "How long fetching each server's /metrics took.",
          's',
          [g.q(server('llm_server_scrape_duration_seconds'), '{{target}}')],
        ) + g.size(12, 6),
      ] + gpuRow.panels(c, ps, ss, gs),
    ),
  },
}
