#!/usr/bin/env bash
# Measures CPU per message: starts a three-node Ferry cluster on loopback
# (TLS on client and server links, tokens, data in a temporary directory),
# runs `ferry bench pub --sync -c 16`, `ferry bench pub -c 4 -w 64` and
# `ferry bench consume -c 4 --batch 100` (its pipelined fill and its
# drain, both counted per message) ROUNDS times (default 2) and prints, for each run, msgs/s, the p50, and
# the CPU time (user + system, from /proc) each node and the bench client
# spent per message, and the context switches per message of each node
# (all its threads, from /proc) and of the client (with /usr/bin/time,
# when installed): on a paravirtualised VM a switch can cost several
# microseconds of CPU. The partition leader is the node with the largest
# figures. MODES="bench args;bench args" runs other `ferry bench` modes. Throughput on a small shared machine moves a lot from minute to
# minute; CPU per message moves much less, so compare builds with this,
# alternating them (REPO=path runs another checkout's build). FERRYD_ARGS
# adds ferryd flags. PROFILE=dir also saves a 5 s CPU profile of every
# node taken in the middle of each run (dir/<round>-<mode>-nodeN.pprof;
# the nodes then run -pprof; SCALE, default 3 then, multiplies the
# message counts). STAGES=1 also prints, per node, the mean time of each
# stage a message passes (client request, the leader's own log write, an
# AppendEntries round and the follower's store, commit, waiting for and
# running the state machine), from the nodes' /metrics histograms scraped
# before and after each run. Linux only; not part of `make test`.
set -euo pipefail
cd "${REPO:-$(dirname "$0")/..}"
make -s build >/dev/null
rounds=${ROUNDS:-2}
scale=${SCALE:-1} # multiplies the message counts (3 with PROFILE, so runs outlast the profile)
[ -n "${PROFILE:-}" ] && scale=${SCALE:-3}
work=$(mktemp -d /tmp/ferry-cpu.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap 'stop_all; rm -rf "$work"' EXIT
pki="$work/pki"
./bin/ferryd dev-pki -dir "$pki" -nodes node1,node2,node3 >/dev/null
(umask 077; head -c 32 /dev/urandom | base64 > "$pki/gossip.key")
./bin/ferryd token -name bench -cluster admin -file "$pki/tokens.json" -secret-file "$pki/bench.token" 2>/dev/null
offset=2600 # clients on 9701-9703, away from `make run`'s and the other scripts' ports
seeds="127.0.0.1:$((7301 + offset)),127.0.0.1:$((7302 + offset)),127.0.0.1:$((7303 + offset))"
for i in 1 2 3; do
  ./bin/ferryd -id "node$i" -data-dir "$work/node$i" -ip 127.0.0.1 -port-offset $((offset + i - 1)) \
    -bootstrap-expect 3 -join "$seeds" -fast-gossip -gossip-keyring "$pki/gossip.key" \
    -tls-cert "$pki/node$i.pem" -tls-key "$pki/node$i-key.pem" -tls-ca "$pki/ca.pem" \
    -tokens "$pki/tokens.json" ${PROFILE:+-pprof} ${FERRYD_ARGS:-} >"$work/node$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 150); do
  curl -sf --cacert "$pki/ca.pem" "https://127.0.0.1:$((7201 + offset))/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
ferry=(./bin/ferry --servers "127.0.0.1:$((7101 + offset)),127.0.0.1:$((7102 + offset)),127.0.0.1:$((7103 + offset))"
  --ca "$pki/ca.pem" --token-file "$pki/bench.token" --json bench --size 256 --no-progress)
ticks=$(getconf CLK_TCK)
# stage_sums prints "node series sum count" for every latency histogram
# STAGES=1 reports, summed over their labels except op.
stage_sums() {
  for i in 1 2 3; do
    curl -sf --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/bench.token")" \
      "https://127.0.0.1:$((7200 + offset + i))/metrics" |
      awk -v node="$i" '
        /^ferry_(request|raft_(commit|leader_dispatch|replication_append|rpc_append|rpc_store_logs|fsm_enqueue|fsm_apply_batch))_seconds_(sum|count)/ {
          name = $1; op = ""
          if (match(name, /op="[^"]*"/)) op = ":" substr(name, RSTART + 4, RLENGTH - 5)
          sub(/\{.*/, "", name); kind = name; sub(/.*_/, "", kind); sub(/_seconds_(sum|count)$/, "", name)
          sub(/^ferry_(raft_)?/, "", name)
          v[name op, kind] += $2; seen[name op] = 1
        }
        END { for (k in seen) print node, k, v[k, "sum"] + 0, v[k, "count"] + 0 }'
  done
}
# stage_means prints the mean microseconds of each stage that ran between
# two stage_sums outputs (files $1, before, and $2, after).
stage_means() {
  awk 'NR == FNR { s[$1, $2] = $3; c[$1, $2] = $4; next }
    { dc = $4 - c[$1, $2]; if (dc > 0) printf "  node%s %-26s %8.0f us mean over %d\n", $1, $2, ($3 - s[$1, $2]) * 1e6 / dc, dc }' "$1" "$2" | sort
}
TIMEFORMAT="%U %S" # the bench client's CPU seconds, from bash's time
ctx_switches() { cat "/proc/$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime

# profile_nodes saves a 5 s CPU profile of each node, starting 1 s in.
profile_nodes() {
  mkdir -p "$PROFILE"
  sleep 1
  for i in 1 2 3; do
    curl -sf --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/bench.token")" -o "$PROFILE/${1// /_}-node$i.pprof" \
      "https://127.0.0.1:$((7200 + offset + i))/debug/pprof/profile?seconds=5" &
  done
  wait
}

for round in $(seq 1 "$rounds"); do
  default_modes="pub --sync -c 16 -n $((16000 * scale));pub -c 4 -w 64 -n $((200000 * scale));consume -c 4 --batch 100 -n $((100000 * scale))"
  IFS=";" read -ra modes <<<"${MODES:-$default_modes}"
  for mode in "${modes[@]}"; do
    before=()
    switches=()
    for p in "${pids[@]}"; do
      before+=("$(cpu_ticks "$p")")
      switches+=("$(ctx_switches "$p")")
    done
    [ -z "${STAGES:-}" ] || stage_sums >"$work/stages.before"
    profiler=""
    if [ -n "${PROFILE:-}" ]; then
      profile_nodes "$round-${mode%% -n*}" &
      profiler=$!
    fi
    # shellcheck disable=SC2086 # mode is split into arguments on purpose
    timer=()
    [ -x /usr/bin/time ] && timer=(/usr/bin/time -o "$work/client.switches" -f "%w %c")
    { time "${timer[@]}" "${ferry[@]}" $mode >"$work/out.json"; } 2>"$work/client.time"
    [ -z "$profiler" ] || wait "$profiler"
    out=$(cat "$work/out.json")
    nodes=""
    node_switches=""
    n=$(jq .messages <<<"$out")
    for k in 0 1 2; do
      nodes="$nodes $(( ($(cpu_ticks "${pids[$k]}") - before[k]) * 1000000 / ticks / n ))"
      node_switches="$node_switches $(awk -v a="$(ctx_switches "${pids[$k]}")" -v b="${switches[k]}" -v n="$n" 'BEGIN {printf "%.2f", (a - b) / n}')"
    done
    client=$(awk -v n="$n" '{printf "%d", ($1 + $2) * 1000000 / n}' "$work/client.time")
    client_switches="-"
    [ -s "$work/client.switches" ] && client_switches=$(awk -v n="$n" '{printf "%.2f", ($1 + $2) / n}' "$work/client.switches")
    echo "round $round [$mode] $(jq '.msgs_per_s | floor' <<<"$out") msgs/s, p50 $(jq .latency.p50_ms <<<"$out") ms;" \
      "CPU us/msg: nodes$nodes, client $client; switches/msg: nodes$node_switches, client $client_switches"
    if [ -n "${STAGES:-}" ]; then
      stage_sums >"$work/stages.after"
      stage_means "$work/stages.before" "$work/stages.after"
    fi
  done
done
