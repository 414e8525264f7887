#!/usr/bin/env bash
# make run: the simulated LLM server and the prober together, so /metrics
# shows real TTFT / TPOT / ITL data with no GPU and no model.
set -euo pipefail
bin=${1:-./llm-prober}
config=${2:-examples/llm-prober.yml}
sim_listen=${SIM_LISTEN:-127.0.0.1:8300}
listen=${LISTEN:-:9847}

"$bin" simulate --listen "$sim_listen" &
sim_pid=$!
trap 'kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 50); do
	if curl -fsS "http://$sim_listen/health" >/dev/null 2>&1; then break; fi
	sleep 0.1
done
echo "Simulator on http://$sim_listen; prober metrics on http://localhost:${listen##*:}/metrics (Ctrl-C stops both)" >&2
"$bin" --config.file="$config" --web.listen-address="$listen"
