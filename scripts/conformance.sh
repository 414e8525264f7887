#!/usr/bin/env bash
# Conformance of llm-prober against a real llama.cpp llama-server (CPU, a
# tiny random-weight model): `make conformance`. Opt-in, never part of
# `make test`: it needs a llama-server binary and a GGUF model that CI
# cannot fetch. docs/conformance.md has what it checks and the last result.
#
#   LLAMA_SERVER=/root/.cache/llm-prober/llama.cpp-src/build/bin/llama-server \
#   MODEL=/root/.cache/llm-prober/tiny-llama.gguf make conformance
#
# It builds the prober (make build), starts llama-server with --metrics and
# 4 slots, and then
#   1. one-shot probes (`llm-prober probe`), ONESHOT_N per protocol
#      (openai_chat, openai_completions), each set against the server's own
#      account of the same request (the timings block llama-server logs);
#   2. raw curl requests with the same settings, reading usage and timings
#      from the final stream chunk (what the server tells any client);
#   3. the daemon, one process reloaded between phases of DURATION seconds:
#      back-to-back probes (concurrency 1) on each protocol, then 4
#      concurrent chat probes; between phases it idles until the server has
#      nothing in flight, so per-phase deltas of both /metrics are exact;
#   4. llm_server_* (the prober's normalised view) against llamacpp:* (the
#      server's /metrics) at idle;
#   5. cancellation probes (cancel: after CANCEL_AFTER tokens) against the
#      slot the server logged: it stopped decoding, freed the slot, logged
#      no finished request, and the prober saw the release;
#   6. one run of a shared_prefix and of a session probe, request by
#      request against the logged timings (prompt_n: tokens evaluated, so
#      input tokens - prompt_n came from the server's prompt cache);
#   7. a second llama-server with --embeddings --pooling mean (EMB_PORT):
#      openai_embeddings probes, input tokens against /tokenize;
#   8. a third with --reranking and a random BERT reranker (RERANK_PORT,
#      RERANK_MODEL): openai_rerank and tei_rerank probes against the same
#      request by curl (document ranked first, usage) and /tokenize.
# It prints the tables and exits non-zero when any probe failed or any check
# disagreed. Logs and configs stay in a temp dir (printed; KEEP=1 keeps it
# on success too).
#
# Settings (environment): LLAMA_SERVER, MODEL (required); RERANK_MODEL
# (tiny-rerank.gguf beside MODEL); LLAMA_PORT (18080), PROBER_PORT (19847),
# EMB_PORT and RERANK_PORT (LLAMA_PORT + 1, + 2), CANCEL_N (3),
# CANCEL_AFTER (8), CANCEL_MAX_TOKENS (1536), PREFIX_TOKENS (768), EMB_N
# (3), RERANK_N (3), THREADS (1, llama-server -t: with more, a
# loaded 2-core machine crawls, each ggml barrier waiting for a descheduled
# thread), DURATION (60, seconds per daemon phase), ONESHOT_N (5), CURL_N
# (3), MAX_TOKENS (64), INPUT_TOKENS (128), NICE (10: llama-server and the
# build run under nice; the prober, which measures, does not), SKIP_BUILD
# (1 uses the existing ./llm-prober), NEW_CONN (1 sets
# new_connection_per_probe on both targets: no kept-alive connections, a
# diagnostic for connection reuse bugs; connection setup then lies in TTFT).
#
# ---------------------------------------------------------------------------
# Recipe for LLAMA_SERVER and MODEL (no network but GitHub snapshots; no
# weights downloaded). The last run used ggerganov/llama.cpp at
# c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20, examples/server).
#
# 1. Source. A snapshot of llama.cpp as a bare git dir (the agent `fetch`
#    tool: github:ggerganov/llama.cpp -> /work/.mirror/ggerganov+llama.cpp/repo;
#    elsewhere `git clone --bare https://github.com/ggml-org/llama.cpp`).
#    Large vocab files may be absent from a snapshot; check out everything
#    else:
#      src=/root/.cache/llm-prober/llama.cpp-src; mkdir -p $src
#      export GIT_DIR=/work/.mirror/ggerganov+llama.cpp/repo GIT_INDEX_FILE=/tmp/llama-idx
#      git read-tree HEAD
#      git ls-tree -r HEAD | while read -r m t o p; do
#        git cat-file -e "$o" 2>/dev/null || git rm --cached -q "$p"; done
#      git --work-tree=$src checkout-index -a; rm $GIT_INDEX_FILE; unset GIT_DIR GIT_INDEX_FILE
# 2. Build llama-server on CPU (apt-get install -y cmake; ~4 min on 2
#    shared cores). In trees where the server lives in examples/server,
#    LLAMA_BUILD_EXAMPLES must be ON for the target to exist (only
#    llama-server is built); in newer trees (tools/server) it may be OFF:
#      cd $src && nice -n 10 cmake -B build -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
#        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON \
#        -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF -DCMAKE_BUILD_TYPE=Release
#      nice -n 10 cmake --build build --target llama-server -j2
#    -> $src/build/bin/llama-server (static llama/ggml; OpenMP off so idle
#    threads do not spin on a shared machine).
# 3. Model: random weights, tokenizer from the vocab-only GGUF in models/
#    (apt-get install -y python3-numpy python3-yaml; no PyPI needed):
#      PYTHONPATH=$src/gguf-py /usr/bin/python3 scripts/conformance-model.py \
#        --vocab $src/models/ggml-vocab-llama-spm.gguf \
#        --out /root/.cache/llm-prober/tiny-llama.gguf
#    -> llama, 2 layers, n_embd 128, 4 heads, n_ff 256, n_ctx 2048, 32000
#    tokens, f32, 35 MB. It generates random text; ignore_eos makes every
#    answer exactly max_tokens long. The reranker (RERANK_MODEL) the same
#    way, a BERT cross-encoder with a classification head (cls,
#    cls.output) and pooling type rank, tokenizer from the bge vocab:
#      PYTHONPATH=$src/gguf-py /usr/bin/python3 scripts/conformance-model.py \
#        --arch bert-rerank --vocab $src/models/ggml-vocab-bert-bge.gguf \
#        --out /root/.cache/llm-prober/tiny-rerank.gguf
#    -> bert, 2 layers, n_embd 128, 4 heads, n_ff 256, n_ctx 512, 30522
#    tokens, f32, 18 MB; its scores are random but fixed for a given
#    query and document.
# ---------------------------------------------------------------------------
set -euo pipefail

die() { echo "conformance: $*" >&2; exit 2; }
[[ -n ${LLAMA_SERVER:-} && -n ${MODEL:-} ]] ||
	die "set LLAMA_SERVER=/path/to/llama-server and MODEL=/path/to/model.gguf (recipe: header of $0)"
[[ -x $LLAMA_SERVER ]] || die "LLAMA_SERVER=$LLAMA_SERVER is not an executable"
[[ -r $MODEL ]] || die "MODEL=$MODEL is not readable"
[[ -r ${RERANK_MODEL:-$(dirname "$MODEL")/tiny-rerank.gguf} ]] ||
	die "RERANK_MODEL=${RERANK_MODEL:-$(dirname "$MODEL")/tiny-rerank.gguf} is not readable (a random reranker: step 3 of the recipe in the header of $0)"
for c in curl awk sort; do command -v "$c" >/dev/null || die "$c not found"; done

LLAMA_PORT=${LLAMA_PORT:-18080}
PROBER_PORT=${PROBER_PORT:-19847}
THREADS=${THREADS:-1}
DURATION=${DURATION:-60}
ONESHOT_N=${ONESHOT_N:-5}
CURL_N=${CURL_N:-3}
MAX_TOKENS=${MAX_TOKENS:-64}
INPUT_TOKENS=${INPUT_TOKENS:-128}
NICE=${NICE:-10}
EMB_PORT=${EMB_PORT:-$((LLAMA_PORT + 1))}
RERANK_PORT=${RERANK_PORT:-$((LLAMA_PORT + 2))}
RERANK_MODEL=${RERANK_MODEL:-$(dirname "$MODEL")/tiny-rerank.gguf}
CANCEL_N=${CANCEL_N:-3}
CANCEL_AFTER=${CANCEL_AFTER:-8}
CANCEL_MAX_TOKENS=${CANCEL_MAX_TOKENS:-1536}
PREFIX_TOKENS=${PREFIX_TOKENS:-768}
EMB_N=${EMB_N:-3}
RERANK_N=${RERANK_N:-3}
MODEL_NAME=tiny-llama
EMB_TEXT="The keeper climbed the spiral stairs at dusk to light the lamp."
RERANK_QUERY="Who looks after a lighthouse at night?"
rerank_docs=("A lighthouse keeper tends the lamp through the night on a rocky island."
	"Quarterly revenue grew by four percent."
	"The bakery sells rye bread every morning.")
SRV=http://127.0.0.1:$LLAMA_PORT
PRB=http://127.0.0.1:$PROBER_PORT
BIN=./llm-prober

cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/llm-prober-conformance.XXXXXX")
srv_pid= prb_pid=
aux_pids=()
failures=()
fail() { failures+=("$*"); echo "FAIL: $*"; }
cleanup() {
	local rc=$?
	set +e
	# This llama-server build aborts on SIGTERM ("terminate called without an
	# active exception") after its cleanup; its exit status is not ours.
	[[ -n $prb_pid ]] && kill "$prb_pid" 2>/dev/null && wait "$prb_pid" 2>/dev/null
	[[ -n $srv_pid ]] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
	local p
	for p in "${aux_pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	if [[ $rc -eq 0 && -z ${KEEP:-} ]]; then rm -rf "$work"; else echo "conformance: logs and configs in $work" >&2; fi
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for p in "$LLAMA_PORT" "$PROBER_PORT" "$EMB_PORT" "$RERANK_PORT"; do
	if curl -s -o /dev/null "http://127.0.0.1:$p/" 2>/dev/null; then die "port $p is in use (set LLAMA_PORT / PROBER_PORT)"; fi
done

if [[ -z ${SKIP_BUILD:-} ]]; then
	echo "== make build"
	nice -n "$NICE" make -s build
fi
[[ -x $BIN ]] || die "$BIN missing (make build)"

# ---------------------------------------------------------------- helpers
# msum FILE NAME [SUBSTRING...]: sum of the samples of metric NAME (exact
# name, any labels) whose line contains every SUBSTRING.
# NAME may list several metrics as a|b: their sum.
msum() {
	local f=$1 n=$2
	shift 2
	awk -v n="$n" -v pats="$*" '
		BEGIN { k = split(pats, P, " "); split(n, N, "|"); for (j in N) want[N[j]] = 1 }
		/^#/ { next }
		{ name = $1; sub(/\{.*/, "", name); if (!(name in want)) next
		  for (i = 1; i <= k; i++) if (index($0, P[i]) == 0) next
		  s += $NF; found = 1 }
		END { if (found) printf "%.6f\n", s; else print "NA" }' "$f"
}
# fmt VALUE [DECIMALS]: a number with fixed decimals, NA passes through.
fmt() { awk -v v="$1" -v d="${2:-2}" 'BEGIN { if (v == "NA" || v == "") print "NA"; else printf "%.*f\n", d, v }'; }
# calc EXPR: awk arithmetic (NA when an operand is NA or a division by 0).
calc() { awk "BEGIN { r = $1; print r }" 2>/dev/null || echo NA; }
ratio() { awk -v a="$1" -v b="$2" -v m="${3:-1}" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.4f\n", a / b * m }'; }
logn() { wc -l <"$work/llama-server.log"; }
# timings blocks logged so far (every request it finished; GET /metrics is
# logged too, so the line count never settles).
nblocks() { grep -c 'prompt eval time =' "$work/llama-server.log" || true; }
# server_blocks FROM: the timings blocks llama-server logged after line FROM,
# one line each: prompt_n prompt_ms predicted_n predicted_ms
server_blocks() {
	awk -v from="$1" 'NR <= from { next }
		/prompt eval time =/ { for (i = 1; i <= NF; i++) if ($i == "=") { pms = $(i + 1); pn = $(i + 4) }; have = 1; next }
		/^[[:space:]]*eval time =/ && have { for (i = 1; i <= NF; i++) if ($i == "=") { ems = $(i + 1); en = $(i + 4) }
			print pn, pms, en, ems; have = 0 }' "$work/llama-server.log"
}
# median of the numbers on stdin
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "NA"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n; else print "NA" }'; }
# idle: wait until llama-server has nothing in flight and its counters and
# log stopped moving (a request the prober sent just before a reload
# finishes first).
idle() {
	local prev= cur i
	for i in $(seq 120); do
		cur=$(curl -fsS "$SRV/metrics" | awk '$1 == "llamacpp:requests_processing" { p = $2 } $1 == "llamacpp:requests_deferred" { d = $2 }
			$1 == "llamacpp:tokens_predicted_total" { t = $2 } END { print p + d, t }')
		cur+=" $(nblocks)"
		if [[ $cur == "$prev" && $cur == "0 "* ]]; then return 0; fi
		prev=$cur
		sleep 0.5
	done
	fail "llama-server did not go idle within 60s"
}
words=(time person year way day thing man world life hand part child eye woman place work week case point
	government company number group problem fact water room mother area money story month lot right study
	book word business issue side kind head house service friend father power hour game line end member law
	car city community name president team minute idea kid body information back parent face others level)
random_prompt() { local i out=; for ((i = 0; i < $1; i++)); do out+="${words[RANDOM % ${#words[@]}]} "; done; echo "${out% }"; }

# ------------------------------------------------------------ llama-server
echo "== llama-server: $LLAMA_SERVER"
echo "   model: $MODEL"
nice -n "$NICE" "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$LLAMA_PORT" --metrics \
	-np 4 -c 8192 -t "$THREADS" -a "$MODEL_NAME" >"$work/llama-server.log" 2>&1 &
srv_pid=$!
for i in $(seq 600); do
	curl -fsS -o /dev/null "$SRV/health" 2>/dev/null && break
	kill -0 "$srv_pid" 2>/dev/null || { tail -20 "$work/llama-server.log"; die "llama-server exited"; }
	sleep 0.2
done
curl -fsS -o /dev/null "$SRV/health" || die "llama-server not healthy after 120s"
srv_version=$("$LLAMA_SERVER" --version 2>&1 | head -1 || true)
echo "   $srv_version; 4 slots, -c 8192, -t $THREADS, nice $NICE"
echo "   load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# Whether this build serves the OpenAI Responses API (the openai_responses
# protocol): a 404 means the route does not exist, anything else that it
# does (an empty body is refused, but by the handler).
responses_status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{}' "$SRV/v1/responses" || true)
if [[ $responses_status == 404 ]]; then responses_note="not served (404)"; else responses_note="served (HTTP $responses_status to an empty request)"; fi
echo "   POST /v1/responses: $responses_note"

# ----------------------------------------------------------------- configs
# write_config FILE SERIAL_CHAT SERIAL_COMPL CONCURRENT: each schedule is
# "on" (its phase's schedule) or "off" (a burst only at 00:00 on January 1,
# i.e. idle). The same probes always exist, so a reload keeps their series.
off='{burst: 1, cron: "0 0 1 1 *"}'
newconn=false
[[ -n ${NEW_CONN:-} && ${NEW_CONN} != 0 ]] && newconn=true
write_config() {
	local s1=$off s2=$off s3=$off
	[[ $2 == on ]] && s1='{concurrency: 1}'
	[[ $3 == on ]] && s2='{concurrency: 1}'
	[[ $4 == on ]] && s3='{concurrency: 4}'
	cat >"$1.tmp" <<EOF
# generated by scripts/conformance.sh
targets:
  - name: chat
    protocol: openai_chat
    url: $SRV
    model: $MODEL_NAME
    timeout: 60s
    new_connection_per_probe: $newconn
    server_metrics: {url: $SRV/metrics, kind: llamacpp}
    probes:
      - {name: serial, workload: conf, schedule: $s1}
      - {name: concurrent, workload: conf, schedule: $s3}
  - name: completions
    protocol: openai_completions
    url: $SRV
    model: $MODEL_NAME
    timeout: 60s
    new_connection_per_probe: $newconn
    probes:
      - {name: serial, workload: conf, schedule: $s2}
workloads:
  conf:
    prompts: {synthetic: {input_tokens: $INPUT_TOKENS}}
    max_tokens: $MAX_TOKENS
    ignore_eos: true
gpus: {enabled: false}
EOF
	mv "$1.tmp" "$1"
}
cfg=$work/llm-prober.yml
write_config "$cfg" off off off
"$BIN" check-config "$cfg" >/dev/null

# --------------------------------------------------------- 1. one-shot
declare -A tok_ours
echo
echo "== 1. one-shot probes (llm-prober probe), per request vs the timings llama-server logged for it"
printf '%-18s %2s %-8s %11s %10s %10s %10s %10s %12s %16s\n' \
	protocol "#" outcome "out ours" predicted_n "TTFT ms" prompt_ms "TPOT ms" "per_token_ms" "pred_ms/(n-1)"
for target in chat completions; do
	proto=openai_chat; [[ $target == completions ]] && proto=openai_completions
	for ((n = 1; n <= ONESHOT_N; n++)); do
		idle
		from=$(logn)
		out=$work/oneshot-$target-$n.txt
		rc=0
		"$BIN" probe --config.file "$cfg" --target "$target" --probe serial >"$out" 2>&1 || rc=$?
		for i in $(seq 40); do [[ -n $(server_blocks "$from") ]] && break; sleep 0.05; done
		read -r pn pms en ems < <(server_blocks "$from" | tail -1; echo "NA NA NA NA") || true
		outcome=$(awk '$1 == "outcome" { print $2; exit }' "$out" | tr -d :)
		ttft=$(awk '$1 == "ttft" { print $2; exit }' "$out")
		tpot=$(awk '$1 == "tpot" { print $2; exit }' "$out")
		otok=$(awk '$1 == "output" && $2 == "tokens" { print $3 $4; exit }' "$out")
		srv_tpot=$(ratio "$ems" "$en" 1)
		srv_tpot1=$(ratio "$ems" "$(calc "$en - 1")" 1)
		printf '%-18s %2d %-8s %11s %10s %10s %10s %10s %12s %16s\n' "$proto" "$n" "${outcome:-?}" "$otok" "$en" \
			"$ttft" "$(fmt "$pms")" "$tpot" "$(fmt "$srv_tpot")" "$(fmt "$srv_tpot1")"
		[[ $rc -eq 0 && $outcome == success ]] || fail "one-shot $proto #$n: ${outcome:-no outcome} (see $out)"
		[[ ${otok%%(*} == "$en" ]] || fail "one-shot $proto #$n: output tokens ours ${otok} vs predicted_n $en"
		[[ ${otok%%(*} == "$MAX_TOKENS" ]] || fail "one-shot $proto #$n: ${otok} output tokens, want max_tokens $MAX_TOKENS (ignore_eos)"
		awk -v a="$ttft" -v b="$pms" 'BEGIN { exit !(a != "" && b != "NA" && a + 0 >= b + 0) }' ||
			fail "one-shot $proto #$n: TTFT $ttft ms below the server's prompt_ms $pms"
	done
done

# --------------------------------------------------------- 2. raw curl
echo
echo "== 2. raw curl requests, same settings: usage and timings from the final chunk"
printf '%-18s %2s %18s %11s %10s %12s %12s %10s\n' \
	protocol "#" completion_tokens predicted_n prompt_ms per_token_ms "curl TTFB ms" "total ms"
for proto in openai_chat openai_completions; do
	for ((n = 1; n <= CURL_N; n++)); do
		idle
		prompt=$(random_prompt "$INPUT_TOKENS")
		if [[ $proto == openai_chat ]]; then
			path=/v1/chat/completions
			body="{\"model\":\"$MODEL_NAME\",\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"max_tokens\":$MAX_TOKENS,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
		else
			path=/v1/completions
			body="{\"model\":\"$MODEL_NAME\",\"prompt\":\"$prompt\",\"max_tokens\":$MAX_TOKENS,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
		fi
		sse=$work/curl-$proto-$n.sse
		times=$(curl -sS -N -o "$sse" -w '%{time_starttransfer} %{time_total}' -H 'Content-Type: application/json' -d "$body" "$SRV$path")
		final=$(grep '"timings"' "$sse" | tail -1)
		num() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" <<<"$final"; }
		ct=$(num completion_tokens) pdn=$(num predicted_n) pms=$(num prompt_ms) ppt=$(num predicted_per_token_ms)
		printf '%-18s %2d %18s %11s %10s %12s %12s %10s\n' "$proto" "$n" "${ct:-NA}" "${pdn:-NA}" "$(fmt "${pms:-NA}")" \
			"$(fmt "${ppt:-NA}")" "$(fmt "$(calc "${times% *} * 1000")")" "$(fmt "$(calc "${times#* } * 1000")")"
		[[ -n $ct && $ct == "$pdn" && $ct == "$MAX_TOKENS" ]] || fail "curl $proto #$n: completion_tokens ${ct:-none}, predicted_n ${pdn:-none}, max_tokens $MAX_TOKENS"
	done
done

# --------------------------------------------------------- 3. daemon
echo
echo "== 3. the daemon: phases of ${DURATION}s, idle between them (new_connection_per_probe: $newconn)"
"$BIN" --config.file "$cfg" --web.listen-address "127.0.0.1:$PROBER_PORT" >"$work/llm-prober.log" 2>&1 &
prb_pid=$!
for i in $(seq 100); do curl -fsS -o /dev/null "$PRB/-/ready" 2>/dev/null && break; sleep 0.1; done
curl -fsS -o /dev/null "$PRB/-/ready" || die "llm-prober not ready (see $work/llm-prober.log)"
snap() { # snap NAME: both /metrics, prober first
	curl -fsS "$PRB/metrics" >"$work/prober-$1.prom"
	curl -fsS "$SRV/metrics" >"$work/server-$1.prom"
}
reload() {
	write_config "$cfg" "$@"
	curl -fsS -X POST -o /dev/null "$PRB/-/reload" || die "reload refused (see $work/llm-prober.log)"
}
outcomes="success timeout connect_error http_4xx http_5xx grpc_error protocol_error stream_stalled incomplete"
declare -a phase_rows
daemon_total=0 daemon_failed=0 daemon_by=
run_phase() { # run_phase LABEL TARGET PROBE SCHEDULE-SWITCHES...
	local label=$1 target=$2 probe=$3
	shift 3
	idle
	snap "$label-before"
	local from
	from=$(logn)
	reload "$@"
	if [[ $label == concurrent ]]; then
		# Both /metrics back to back every 2s; keep the pair where the
		# server had the most requests in flight for the busy column.
		local end=$((SECONDS + DURATION)) best=-1 r
		while ((SECONDS < end)); do
			sleep 2
			snap "$label-sample"
			r=$(msum "$work/server-$label-sample.prom" llamacpp:requests_processing)
			if awk -v r="$r" -v b="$best" 'BEGIN { exit !(r != "NA" && r + 0 > b + 0) }'; then
				best=$r
				mv "$work/prober-$label-sample.prom" "$work/prober-$label-busy.prom"
				mv "$work/server-$label-sample.prom" "$work/server-$label-busy.prom"
			fi
		done
	else
		sleep "$DURATION"
	fi
	reload off off off
	idle
	snap "$label-after"
	server_blocks "$from" >"$work/blocks-$label.txt"

	local b=$work/prober-$label-before.prom a=$work/prober-$label-after.prom
	local sb=$work/server-$label-before.prom sa=$work/server-$label-after.prom
	local sel="target=\"$target\" probe=\"$probe\""
	d() { calc "$(msum "$a" "$@") - $(msum "$b" "$@")"; }
	local o total=0 failed=0 by=""
	for o in $outcomes; do
		local c
		c=$(d llm_probe_requests_total $sel "outcome=\"$o\"")
		c=${c%.*}
		total=$((total + c))
		if [[ $o != success && $c -gt 0 ]]; then failed=$((failed + c)); by+="${by:+,}$o=$c"; fi
	done
	local ok=$((total - failed))
	local nblk tok_srv_log tok_srv_ctr tok_ours ttft_ours tpot_ours pms_mean ppt_mean ppt1_mean
	nblk=$(wc -l <"$work/blocks-$label.txt")
	tok_srv_log=$(awk '{ s += $3 } END { print s + 0 }' "$work/blocks-$label.txt")
	tok_srv_ctr=$(calc "$(msum "$sa" llamacpp:tokens_predicted_total) - $(msum "$sb" llamacpp:tokens_predicted_total)")
	tok_ours=$(d llm_probe_output_tokens_total $sel)
	ttft_ours=$(ratio "$(d llm_probe_time_to_first_token_seconds_sum $sel)" "$(d llm_probe_time_to_first_token_seconds_count $sel)" 1000)
	tpot_ours=$(ratio "$(d llm_probe_time_per_output_token_seconds_sum $sel)" "$(d llm_probe_time_per_output_token_seconds_count $sel)" 1000)
	pms_mean=$(awk '{ print $2 }' "$work/blocks-$label.txt" | mean)
	ppt_mean=$(awk '$3 > 0 { print $4 / $3 }' "$work/blocks-$label.txt" | mean)
	ppt1_mean=$(awk '$3 > 1 { print $4 / ($3 - 1) }' "$work/blocks-$label.txt" | mean)
	phase_rows+=("$(printf '%-32s %6s %8s %-18s %8s %9s %9s %9s %9s %9s %9s %13s' "$label ($target)" "$total" "$ok" "${by:-none}" "$nblk" \
		"$(fmt "$tok_ours" 0)" "$tok_srv_log" "$(fmt "$tok_srv_ctr" 0)" "$(fmt "$ttft_ours")" "$(fmt "$pms_mean")" \
		"$(fmt "$tpot_ours")" "$(fmt "$ppt_mean")/$(fmt "$ppt1_mean")")")
	echo "   $label: $total probes, $failed failed${by:+ ($by)}"
	daemon_total=$((daemon_total + total)) daemon_failed=$((daemon_failed + failed))
	[[ -n $by ]] && daemon_by+="$label: $by; "
	[[ $failed -eq 0 ]] || fail "daemon $label: $failed of $total probes failed: $by"
	[[ $total -gt 0 ]] || fail "daemon $label: no probes ran"
	[[ $ok -eq $nblk ]] || fail "daemon $label: $ok successful probes but the server logged $nblk requests"
	[[ $(fmt "$tok_ours" 0) == "$tok_srv_log" && $(fmt "$tok_srv_ctr" 0) == "$tok_srv_log" ]] ||
		fail "daemon $label: output tokens ours $tok_ours, server log $tok_srv_log, llamacpp:tokens_predicted_total +$tok_srv_ctr"
}
run_phase serial-chat chat serial on off off
run_phase serial-completions completions serial off on off
run_phase concurrent chat concurrent off off on
echo
echo "== 3. daemon phases: ours (llm_probe_*, deltas over the phase) vs the server (its log, llamacpp:*)"
echo "   TTFT/TPOT are means (histogram _sum/_count vs the mean of the logged requests)."
echo "   server TPOT: predicted_per_token_ms / predicted_ms over (n-1), the latter being our definition."
printf '%-32s %6s %8s %-18s %8s %9s %9s %9s %9s %9s %9s %13s\n' phase probes success failures "srv reqs" \
	"tok ours" "tok log" "tok ctr" "TTFT ms" prompt_ms "TPOT ms" "srv TPOT"
printf '%s\n' "${phase_rows[@]}"

# --------------------------------------------------------- 4. llm_server_*
echo
echo "== 4. llm_server_* (prober /metrics) vs llamacpp:* (llama-server /metrics)"
busy_p=$work/prober-concurrent-busy.prom busy_s=$work/server-concurrent-busy.prom
idle_p=$work/prober-concurrent-after.prom idle_s=$work/server-concurrent-after.prom
# Idle again, and both scraped back to back with nothing in flight.
idle
snap final
idle_p=$work/prober-final.prom idle_s=$work/server-final.prom
printf '%-45s %12s   %-40s %12s %22s  %s\n' "llm_server_* (target=chat)" idle "llamacpp:*" idle "busy (c=4) ours/srv" ""
cmp_row() { # cmp_row OURS-NAME OURS-FILTER SERVER-NAME
	local ours srv ob sb mark=ok label=$1
	[[ -n $2 ]] && label+="{$2}"
	ours=$(msum "$idle_p" "$1" 'target="chat"' $2)
	srv=$(msum "$idle_s" "$3")
	ob=$(msum "$busy_p" "$1" 'target="chat"' $2)
	sb=$(msum "$busy_s" "$3")
	if [[ $srv == NA && $ours == NA ]]; then mark="absent on both (not in this build)"
	elif [[ $(fmt "$ours" 4) != "$(fmt "$srv" 4)" ]]; then mark=MISMATCH; fail "llm_server $1 $2 = $ours, $3 = $srv"; fi
	printf '%-45s %12s   %-40s %12s %22s  %s\n' "$label" "$(fmt "$ours" 3)" "$3" "$(fmt "$srv" 3)" "$(fmt "$ob" 3)/$(fmt "$sb" 3)" "$mark"
}
up=$(msum "$idle_p" llm_server_up 'target="chat"')
printf '%-45s %12s\n' llm_server_up "$(fmt "$up" 0)"
[[ $(fmt "$up" 0) == 1 ]] || fail "llm_server_up{target=chat} = $up"
cmp_row llm_server_requests_waiting "" llamacpp:requests_deferred
cmp_row llm_server_requests_running "" llamacpp:requests_processing
cmp_row llm_server_kv_cache_usage_ratio "" llamacpp:kv_cache_usage_ratio
# Builds since PR #26920 count cached prompt tokens apart; the prober adds
# them back (docs/servers.md), so ours is the sum of both.
cmp_row llm_server_prompt_tokens_total "" "llamacpp:prompt_tokens_total|llamacpp:prompt_tokens_cached_total"
cmp_row llm_server_prefix_cache_hits_total "" llamacpp:prompt_tokens_cached_total
cmp_row llm_server_generation_tokens_total "" llamacpp:tokens_predicted_total
cmp_row llm_server_phase_seconds_total 'phase="prefill"' llamacpp:prompt_seconds_total
cmp_row llm_server_phase_seconds_total 'phase="decode"' llamacpp:tokens_predicted_seconds_total
echo "   (busy: ours/server scraped back to back during the concurrent phase, the sample with the most requests running)"

# ------------------------------------------------------- 5. cancellation
# One-shot probes that hang up after CANCEL_AFTER tokens of a long answer,
# against the same server (idle, nothing else in flight): ours is the
# release the prober saw in llm_server_requests_running; the server's is
# what it logged for the slot (n_prompt_tokens when the task started,
# n_past when it stopped) and whether it counted the request as finished.
# llama.cpp notices the hang-up at its next write to the stream, cancels
# the task and frees the slot without a timings block and without adding
# the tokens to llamacpp:tokens_predicted_total.
# rerank_target NAME PROTOCOL: a target of the extra config probing the
# reranking server once with the documents above.
rerank_target() {
  printf '  - name: %s\n    protocol: %s\n    url: http://127.0.0.1:%s\n    model: tiny-rerank\n    timeout: 30s\n    rerank:\n      documents:\n' "$1" "$2" "$RERANK_PORT"
  for d in "${rerank_docs[@]}"; do printf '        - "%s"\n' "$d"; done
  printf '    probes:\n      - {name: once, workload: query, schedule: {every: 1h}}\n'
}
extra=$work/extra.yml
cat >"$extra" <<EOF
# generated by scripts/conformance.sh
targets:
  - name: chat
    protocol: openai_chat
    url: $SRV
    model: $MODEL_NAME
    timeout: 60s
    server_metrics: {url: $SRV/metrics, kind: llamacpp}
    probes:
      - name: cancel
        workload: long
        schedule: {every: 1h}
        cancel: {after_tokens: $CANCEL_AFTER, release_timeout: 10s, poll_interval: 20ms}
      - {name: shared-prefix, workload: question, schedule: {every: 1h}, shared_prefix: {tokens: $PREFIX_TOKENS, requests: 4}}
      - {name: session, workload: conversation, schedule: {every: 1h}, session: {turns: 4}}
  - name: embed
    protocol: openai_embeddings
    url: http://127.0.0.1:$EMB_PORT
    model: $MODEL_NAME
    timeout: 30s
    embedding: {dimension: 128, inputs: 3}
    probes:
      - {name: once, workload: passage, schedule: {every: 1h}}
$(rerank_target rerank openai_rerank)
$(rerank_target rerank-tei tei_rerank)
workloads:
  long:
    prompts: {synthetic: {input_tokens: $INPUT_TOKENS}}
    max_tokens: $CANCEL_MAX_TOKENS
    ignore_eos: true
  question:
    prompts: {synthetic: {input_tokens: 32}}
    max_tokens: 16
    ignore_eos: true
  conversation:
    prompts:
      system: "You are a concise assistant."
      inline:
        - "Explain in two sentences what a KV cache is."
        - "And why does a prefix cache make the next turn start faster?"
        - "Give one reason it might stop working after a deploy."
        - "How would you notice that from the outside?"
    max_tokens: 32
    ignore_eos: true
  passage:
    prompts: {inline: ["$EMB_TEXT"]}
  query:
    prompts: {inline: ["$RERANK_QUERY"]}
gpus: {enabled: false}
EOF
"$BIN" check-config "$extra" >/dev/null || die "the generated $extra is refused (check-config)"

echo
echo "== 5. cancellation: $CANCEL_N one-shot probes cut after $CANCEL_AFTER of $CANCEL_MAX_TOKENS tokens, vs the slot llama-server logged"
printf '%2s %-8s %9s %-9s %12s %14s %12s %12s %14s\n' "#" outcome "read" slot "release ms" n_prompt_tokens "n_past" "srv decoded" "srv tok ctr +"
for ((n = 1; n <= CANCEL_N; n++)); do
	idle
	from=$(logn)
	ctr0=$(curl -fsS "$SRV/metrics" | awk '$1 == "llamacpp:tokens_predicted_total" { print $2 }')
	out=$work/cancel-$n.txt
	rc=0
	"$BIN" probe --config.file "$extra" --target chat --probe cancel >"$out" 2>&1 || rc=$?
	idle
	ctr1=$(curl -fsS "$SRV/metrics" | awk '$1 == "llamacpp:tokens_predicted_total" { print $2 }')
	outcome=$(awk '$1 == "outcome" { print $2; exit }' "$out" | tr -d :)
	read_n=$(sed -n 's/^cancelled *after \([0-9]*\) token.*/\1/p' "$out")
	slot=$(awk '$1 == "slot" { print $2; exit }' "$out" | tr -d :)
	rel=$(sed -n 's/^ *slot *released: seen free \([0-9.]*\) ms.*/\1/p' "$out")
	# The slot's own lines after `from`: the prompt size it started with and
	# where it stopped; a timings block would mean it ran to the end.
	read -r npt npast < <(awk -v from="$from" 'NR <= from { next }
		/new prompt,/ { for (i = 1; i <= NF; i++) if ($i == "n_prompt_tokens") { p = $(i + 2) } }
		/stop processing: n_past =/ { for (i = 1; i <= NF; i++) if ($i == "n_past") { s = $(i + 2); sub(/,/, "", s) } }
		END { print (p == "" ? "NA" : p), (s == "" ? "NA" : s) }' "$work/llama-server.log")
	dec=$(calc "$npast - $npt")
	dctr=$(calc "$ctr1 - $ctr0")
	printf '%2d %-8s %9s %-9s %12s %14s %12s %12s %14s\n' "$n" "${outcome:-?}" "${read_n:-NA}" "${slot:-?}" "${rel:-NA}" "$npt" "$npast" "$dec" "$(fmt "$dctr" 0)"
	[[ $rc -eq 0 && $outcome == success ]] || fail "cancel #$n: ${outcome:-no outcome} (see $out)"
	[[ $slot == released ]] || fail "cancel #$n: slot ${slot:-not reported}, want released (see $out)"
	[[ ${read_n:-0} -ge $CANCEL_AFTER ]] || fail "cancel #$n: read ${read_n:-no} tokens before the cut, want $CANCEL_AFTER"
	[[ $(server_blocks "$from") == "" ]] || fail "cancel #$n: llama-server logged a finished request (timings block): it did not stop"
	awk -v d="$dec" -v m="$CANCEL_MAX_TOKENS" -v r="${read_n:-0}" 'BEGIN { exit !(d != "NA" && d + 0 >= r + 0 && d + 0 < m + 0) }' ||
		fail "cancel #$n: the server decoded $dec tokens (n_past $npast - n_prompt_tokens $npt), want between the $read_n read and max_tokens $CANCEL_MAX_TOKENS"
done
echo "   read: tokens the prober read before closing; srv decoded: n_past - n_prompt_tokens at the server's release;"
echo "   srv tok ctr +: llamacpp:tokens_predicted_total over the request (a cancelled task is not counted)"

# ------------------------------------------------- 6. prefix cache probes
# One run each of a shared_prefix probe (a fresh random ~PREFIX_TOKENS
# system prompt, 4 requests) and a 4-turn session, request by request
# against the timings llama-server logged for it: prompt_n is what it
# evaluated, so input tokens - prompt_n is what its prompt cache supplied
# (this build has no usage.prompt_tokens_details, so the prober's
# llm_probe_cached_input_tokens_total stays 0 here).
echo
echo "== 6. prefix cache: one run per probe, per request vs the timings llama-server logged (prompt_n = tokens it evaluated)"
printf '%-14s %2s %-5s %-8s %10s %9s %10s %10s %11s %12s\n' probe "#" cache outcome "in ours" prompt_n "srv cached" "TTFT ms" prompt_ms "out/pred_n"
for pr in shared-prefix session; do
	idle
	from=$(logn)
	out=$work/prefix-$pr.txt
	rc=0
	"$BIN" probe --config.file "$extra" --target chat --probe "$pr" >"$out" 2>&1 || rc=$?
	for i in $(seq 40); do [[ $(server_blocks "$from" | wc -l) -ge 4 ]] && break; sleep 0.05; done
	mapfile -t blocks < <(server_blocks "$from")
	mapfile -t reqs < <(awk '/^--- request/ { n++; cache[n] = $4; sub(/^\(/, "", cache[n]) }
		n && $1 == "outcome" { o[n] = $2 } n && $1 == "ttft" { t[n] = $2 }
		n && $1 == "input" && $2 == "tokens" { it[n] = $3 } n && $1 == "output" && $2 == "tokens" { ot[n] = $3 }
		END { for (i = 1; i <= n; i++) print cache[i], o[i], it[i], t[i], ot[i] }' "$out")
	[[ $rc -eq 0 && ${#reqs[@]} -eq 4 ]] || fail "$pr: exit $rc, ${#reqs[@]} requests reported, want 4 (see $out)"
	[[ ${#blocks[@]} -eq ${#reqs[@]} ]] || fail "$pr: ${#reqs[@]} requests but the server logged ${#blocks[@]}"
	cold_pn=
	for i in "${!reqs[@]}"; do
		read -r cache outcome itok ttft otok <<<"${reqs[$i]}"
		outcome=${outcome%:}
		read -r pn pms en ems <<<"${blocks[$i]:-NA NA NA NA}"
		printf '%-14s %2d %-5s %-8s %10s %9s %10s %10s %11s %12s\n' "$pr" $((i + 1)) "$cache" "$outcome" "$itok" "$pn" \
			"$(calc "$itok - $pn")" "$ttft" "$(fmt "$pms")" "$otok/$en"
		[[ $outcome == success ]] || fail "$pr #$((i + 1)): $outcome (see $out)"
		[[ $otok == "$en" ]] || fail "$pr #$((i + 1)): output tokens ours $otok vs predicted_n $en"
		awk -v a="$ttft" -v b="$pms" 'BEGIN { exit !(a != "" && b != "NA" && a + 0 >= b + 0) }' ||
			fail "$pr #$((i + 1)): TTFT $ttft ms below the server's prompt_ms $pms"
		if [[ $cache == cold ]]; then
			cold_pn=$pn
		elif [[ $pr == shared-prefix ]]; then
			# The server must have reused the shared prefix: it evaluated
			# under half of what the cold request did.
			awk -v w="$pn" -v c="${cold_pn:-0}" 'BEGIN { exit !(w != "NA" && c > 0 && w * 2 < c) }' ||
				fail "$pr #$((i + 1)): the server evaluated $pn prompt tokens warm vs $cold_pn cold: its cache was not used"
		fi
	done
	verdict=$(grep '^TTFT cold' "$out" || echo "no warm/cold line")
	echo "   $pr: $verdict"
	if [[ $pr == shared-prefix ]]; then
		[[ $verdict == *"the prefix cache helps"* ]] || fail "shared-prefix: the prober did not see the cache help: $verdict"
	fi
done

# ------------------------------------------------ 7. embeddings
# A second llama-server: this build serves /v1/embeddings only with
# --embeddings (which turns completions off) and a pooling type that is
# not none. Input tokens ours (usage.prompt_tokens) against the same texts
# through the server's /tokenize (with the BOS it adds for embeddings).
start_aux() { # start_aux NAME PORT ARGS...: a llama-server on PORT, healthy
	local name=$1 port=$2
	shift 2
	nice -n "$NICE" "$LLAMA_SERVER" --host 127.0.0.1 --port "$port" --metrics -t "$THREADS" "$@" >"$work/$name.log" 2>&1 &
	aux_pids+=("$!")
	for i in $(seq 600); do
		curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && return 0
		kill -0 "${aux_pids[-1]}" 2>/dev/null || { tail -20 "$work/$name.log"; die "llama-server ($name) exited"; }
		sleep 0.2
	done
	die "llama-server ($name) not healthy after 120s"
}
# tokens PORT TEXT ADD_SPECIAL: the server's token count of TEXT.
ntokens() {
	curl -fsS "http://127.0.0.1:$1/tokenize" -H 'Content-Type: application/json' \
		-d "{\"content\":\"$2\",\"add_special\":$3}" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/' | awk -F, '{ print ($0 == "" ? 0 : NF) }'
}
echo
echo "== 7. embeddings: llama-server --embeddings --pooling mean (port $EMB_PORT), $EMB_N one-shot openai_embeddings probes"
start_aux embeddings "$EMB_PORT" -m "$MODEL" --embeddings --pooling mean -np 2 -c 4096 -a "$MODEL_NAME"
emb_expect=0
for i in 1 2 3; do emb_expect=$((emb_expect + $(ntokens "$EMB_PORT" "$i. $EMB_TEXT" true))); done
printf '%2s %-8s %-28s %12s %14s %12s %12s\n' "#" outcome answer "in ours" "srv /tokenize" "e2e ms" "curl ms"
for ((n = 1; n <= EMB_N; n++)); do
	out=$work/embed-$n.txt
	rc=0
	"$BIN" probe --config.file "$extra" --target embed --probe once >"$out" 2>&1 || rc=$?
	outcome=$(awk '$1 == "outcome" { print $2; exit }' "$out" | tr -d :)
	answer=$(sed -n 's/^answer *//p' "$out")
	itok=$(awk '$1 == "input" && $2 == "tokens" { print $3 $4; exit }' "$out")
	e2e=$(awk '$1 == "end-to-end" { print $2; exit }' "$out")
	body="{\"model\":\"$MODEL_NAME\",\"input\":[\"1. $EMB_TEXT\",\"2. $EMB_TEXT\",\"3. $EMB_TEXT\"],\"encoding_format\":\"float\"}"
	ct=$(curl -sS -o "$work/embed-curl-$n.json" -w '%{time_total}' -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$EMB_PORT/v1/embeddings")
	printf '%2d %-8s %-28s %12s %14s %12s %12s\n' "$n" "${outcome:-?}" "${answer:-none}" "$itok" "$emb_expect" "$e2e" "$(fmt "$(calc "$ct * 1000")")"
	[[ $rc -eq 0 && $outcome == success ]] || fail "embeddings #$n: ${outcome:-no outcome} (see $out)"
	[[ $answer == "3 vectors of dimension 128" ]] || fail "embeddings #$n: answer '${answer}', want 3 vectors of dimension 128"
	[[ ${itok%%(*} == "$emb_expect" ]] || fail "embeddings #$n: input tokens ours $itok vs $emb_expect by the server's /tokenize"
done

# ------------------------------------------------ 8. rerank
# A third llama-server with --reranking and the random BERT cross-encoder
# (RERANK_MODEL, recipe above): openai_rerank (/v1/rerank, Jina/Cohere
# form) and tei_rerank (/rerank with texts: llama.cpp answers in TEI's
# form). Ours: outcome, the document ranked first, input tokens; the
# server's: the same request by curl (the weights are fixed, so the
# scores are too) and its token count, [BOS] query [EOS] [SEP] doc [EOS]
# per document, from /tokenize.
echo
echo "== 8. rerank: llama-server --reranking (port $RERANK_PORT, $(basename "$RERANK_MODEL")), $RERANK_N one-shot probes per protocol"
start_aux rerank "$RERANK_PORT" -m "$RERANK_MODEL" --reranking -np 2 -c 1024 -a tiny-rerank
docs_json=$(printf '"%s",' "${rerank_docs[@]}")
docs_json="[${docs_json%,}]"
rr_expect=0
qn=$(ntokens "$RERANK_PORT" "$RERANK_QUERY" false)
for d in "${rerank_docs[@]}"; do rr_expect=$((rr_expect + qn + $(ntokens "$RERANK_PORT" "$d" false) + 4)); done
curl -fsS -H 'Content-Type: application/json' -o "$work/rerank-curl.json" \
	-d "{\"model\":\"tiny-rerank\",\"query\":\"$RERANK_QUERY\",\"documents\":$docs_json,\"top_n\":${#rerank_docs[@]}}" "http://127.0.0.1:$RERANK_PORT/v1/rerank"
# The index with the highest relevance_score, and the usage the server sent.
srv_top=$(grep -o '"index":[0-9]*,"relevance_score":[-0-9.eE+]*' "$work/rerank-curl.json" |
	sed 's/"index":\([0-9]*\),"relevance_score":\(.*\)/\2 \1/' | sort -g -r | awk 'NR == 1 { print $2 }')
srv_usage=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$work/rerank-curl.json")
printf '%-14s %2s %-8s %-34s %9s %11s %14s %10s\n' protocol "#" outcome answer "in ours" "srv usage" "srv /tokenize" "e2e ms"
for t in rerank rerank-tei; do
	proto=openai_rerank; [[ $t == rerank-tei ]] && proto=tei_rerank
	for ((n = 1; n <= RERANK_N; n++)); do
		out=$work/$t-$n.txt
		rc=0
		"$BIN" probe --config.file "$extra" --target "$t" --probe once >"$out" 2>&1 || rc=$?
		outcome=$(awk '$1 == "outcome" { print $2; exit }' "$out" | tr -d :)
		answer=$(sed -n 's/^answer *//p' "$out")
		itok=$(awk '$1 == "input" && $2 == "tokens" { print $3 $4; exit }' "$out")
		e2e=$(awk '$1 == "end-to-end" { print $2; exit }' "$out")
		printf '%-14s %2d %-8s %-34s %9s %11s %14s %10s\n' "$proto" "$n" "${outcome:-?}" "${answer:-none}" "$itok" "${srv_usage:-NA}" "$rr_expect" "$e2e"
		[[ $rc -eq 0 && $outcome == success ]] || fail "$proto #$n: ${outcome:-no outcome} (see $out)"
		[[ $answer == "${#rerank_docs[@]} rerank results, document $srv_top first" ]] ||
			fail "$proto #$n: answer '$answer', the server's own answer by curl ranks document $srv_top first"
		if [[ $proto == openai_rerank ]]; then
			[[ ${itok%%(*} == "$srv_usage" && $srv_usage == "$rr_expect" ]] ||
				fail "$proto #$n: input tokens ours $itok, usage by curl $srv_usage, /tokenize $rr_expect"
		else
			# TEI's token count is a header this server does not send.
			[[ $itok == unknown ]] || fail "$proto #$n: input tokens $itok, want unknown (llama.cpp sends no x-compute-tokens)"
		fi
	done
done
echo "   srv usage: usage.prompt_tokens of the same /v1/rerank request by curl; srv /tokenize: the sum of ([BOS] query [EOS] [SEP] doc [EOS]) over the documents"

# ----------------------------------------------------------------- verdict
echo
echo "== daemon probes: $daemon_total, failed: $daemon_failed${daemon_by:+ (${daemon_by%; })}"
echo "== machine: $(nproc) CPUs, $(uname -sr), load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== server: $srv_version ($LLAMA_SERVER); model $MODEL; /v1/responses $responses_note"
echo "== prober: $("$BIN" --version 2>&1 | head -1)"
if ((${#failures[@]})); then
	echo "== FAILED: ${#failures[@]} check(s)"
	printf '   %s\n' "${failures[@]}"
	exit 1
fi
echo "== all checks passed"
