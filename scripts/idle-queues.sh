#!/usr/bin/env bash
# What idle partitions cost: starts a three-node cluster set up as `make run`
# sets it up (TLS, gossip key, tokens; 127.0.0.1, ports 7051-7353 so a
# running `make run` is not disturbed), creates single-partition queues with
# 3 replicas up to each count in COUNTS (default "100 1000"), waits SETTLE
# seconds (default 20), then samples every node for WINDOW seconds (default
# 30) and prints one row per count and node: CPU (share of one core), RSS,
# open files, goroutines. TRAFFIC=1s also runs, after the last count, one
# message per second to every queue (sent and consumed) and samples that.
#
# KILL=1 then, at the last count, kills node3 with kill -9 and prints how
# long until every partition has a leader on node1 or node2 and until a
# send to every queue is confirmed; then restarts node3 and prints how long
# until each of its replicas has applied what its leader had (needs jq).
#
#   scripts/idle-queues.sh                      # 100 and 1,000 queues
#   COUNTS="100 1000 3000 10000" scripts/idle-queues.sh
#   TRAFFIC=1s COUNTS=1000 scripts/idle-queues.sh
#
# PROFILE=1 also writes a 10 s CPU profile of node1 at each count.
# FERRYD=path runs another build of the server (the CLI stays this one's),
# for a before-and-after comparison. KEEP=1 leaves the data directory (its path is printed) for a look at the
# logs. The machine's state goes beside any figure: the script prints a
# 4 KiB O_DSYNC write probe first.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTS=${COUNTS:-"100 1000"}
SETTLE=${SETTLE:-20}
WINDOW=${WINDOW:-30}
TRAFFIC=${TRAFFIC:-}
OFFSET=50
make -s build >/dev/null
FERRYD=${FERRYD:-./bin/ferryd}
dir=$(mktemp -d /tmp/ferry-idle.XXXXXX)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP:-}" == 1 ]]; then echo "data kept in $dir"; else rm -rf "$dir"; fi
}
trap stop EXIT

# A cluster of an earlier run may still be shutting down (a node hands
# thousands of leaderships over first): wait for its ports.
for _ in $(seq 1 120); do
  ss -ltn 2>/dev/null | grep -qE "127\.0\.0\.1:7(0|1|2|3)5[0-3] " || break
  sleep 0.5
done

probe() {
  local f="$dir/probe" out
  out=$(dd if=/dev/zero of="$f" bs=4k count=2000 oflag=dsync 2>&1 | tail -1)
  rm -f "$f"
  echo "disk probe (2,000 x 4 KiB O_DSYNC writes): $out"
}
probe

pki="$dir/pki"
./bin/ferryd dev-pki -dir "$pki" -nodes node1,node2,node3 >/dev/null
./bin/ferryd token -name admin -cluster admin -file "$pki/tokens.json" -secret-file "$pki/admin.token" >/dev/null
(umask 077; head -c 32 /dev/urandom | base64 >"$pki/gossip.key")
seeds=""
for i in 1 2 3; do seeds+="127.0.0.1:$((7301 + OFFSET + i - 1)),"; done
start_node() { # start_node I: starts node I (1..3) in the background, its pid in pids[I-1]
  local i=$1
  mkdir -p "$dir/node$i"
  "$FERRYD" -id "node$i" -data-dir "$dir/node$i" -ip 127.0.0.1 -port-offset $((OFFSET + i - 1)) \
    -bootstrap-expect 3 -join "${seeds%,}" -fast-gossip -gossip-keyring "$pki/gossip.key" \
    -tls-cert "$pki/node$i.pem" -tls-key "$pki/node$i-key.pem" -tls-ca "$pki/ca.pem" -tokens "$pki/tokens.json" \
    -max-queues 10000 -max-partitions 100000 -queue-create-rate 100000 ${PROFILE:+-pprof} \
    >>"$dir/node$i.log" 2>&1 &
  pids[$((i - 1))]=$!
}
for i in 1 2 3; do start_node "$i"; done
ferry=(./bin/ferry --ca "$pki/ca.pem" --token-file "$pki/admin.token" --servers "127.0.0.1:$((7101 + OFFSET)),127.0.0.1:$((7102 + OFFSET)),127.0.0.1:$((7103 + OFFSET))")
for _ in $(seq 1 300); do
  if "${ferry[@]}" cluster status >/dev/null 2>&1; then break; fi
  for i in 0 1 2; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then echo "node$((i + 1)) exited:"; tail -5 "$dir/node$((i + 1)).log"; exit 1; fi
  done
  sleep 0.1
done
sleep 1 # a node that cannot bind a port exits at once: not with a cluster of two
for i in 0 1 2; do
  if ! kill -0 "${pids[$i]}" 2>/dev/null; then echo "node$((i + 1)) exited:"; tail -5 "$dir/node$((i + 1)).log"; exit 1; fi
done

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
open_files() { ls "/proc/$1/fd" | wc -l; }
goroutines() {
  curl -sf --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/admin.token")" \
    "https://127.0.0.1:$((7201 + OFFSET + $1))/metrics" | awk '$1 == "go_goroutines" {print $2}'
}

# sample LABEL: WINDOW seconds of CPU, then RSS, files and goroutines, per node.
sample() {
  local before=() i
  for i in 0 1 2; do before[$i]=$(cpu_ticks "${pids[$i]}"); done
  sleep "$WINDOW"
  for i in 0 1 2; do
    local used=$(( $(cpu_ticks "${pids[$i]}") - before[i] ))
    printf "| %s | node%d | %s%% | %s MB | %s | %s |\n" "$1" $((i + 1)) \
      "$(awk -v u="$used" -v hz="$hz" -v w="$WINDOW" 'BEGIN {printf "%.1f", 100 * u / (hz * w)}')" "$(rss_mb "${pids[$i]}")" \
      "$(open_files "${pids[$i]}")" "$(goroutines "$i")"
  done
}

# replicas I: node I's (0-based) replicas as JSON.
replicas() {
  curl -sf --max-time 10 --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/admin.token")" \
    "https://127.0.0.1:$((7201 + OFFSET + $1))/v1/replicas" || echo '[]'
}
# summary I: node I's (0-based) replica counts by role as JSON.
summary() {
  curl -sf --max-time 10 --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/admin.token")" \
    "https://127.0.0.1:$((7201 + OFFSET + $1))/v1/replicas/summary" || echo '{"leaders": 0}'
}
# elections I: node I's (0-based) raft transition counters, one line:
# became candidate (election rounds), became leader, lease timeouts,
# vote rounds (electSelf), votes served.
elections() {
  curl -sf --max-time 10 --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/admin.token")" \
    "https://127.0.0.1:$((7201 + OFFSET + $1))/metrics" | awk '
      /^ferry_raft_became_candidate_total /   { c = $2 }
      /^ferry_raft_became_leader_total /      { l = $2 }
      /^ferry_raft_leader_lease_timeouts_total / { t = $2 }
      /^ferry_raft_candidate_elect_seconds_count / { e = $2 }
      /^ferry_raft_rpc_request_vote_seconds_count / { v = $2 }
      END { printf "%d %d %d %d %d\n", c, l, t, e, v }'
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f s", b - a}'; }

# kill_restart N: kill -9 of node3 with N single-partition queues, then
# its restart (see KILL above).
kill_restart() {
  local n=$1 t0 led before1 before2
  before1=$(elections 0) before2=$(elections 1)
  kill -9 "${pids[2]}"
  t0=$(now)
  echo "killed node3 (kill -9) with $n queues"
  if [[ "${PROFILE:-}" == 1 ]]; then profile "kill" & fi
  # Leaders counted through /v1/replicas/summary (cheap enough to poll
  # every 0.1 s at 10,000 replicas). Every partition has a replica on
  # node1 and on node2, and node3, which led the rest, is dead: their
  # leader counts add up to the partitions with a leader.
  # The curve goes to kill-curve.txt in the data directory (seconds after
  # the kill; partitions with a leader; then leaders, candidates and
  # replicas without a known leader on node1 and on node2), and every
  # 0.5 s of it is printed.
  local curve="$dir/kill-curve.txt" row
  : >"$curve"
  for _ in $(seq 1 1200); do
    row=$({ summary 0; summary 1; } | jq -rs '"\(map(.leaders) | add) \(map("\(.leaders) \(.candidates // 0) \(.without_leader // 0)") | join(" "))"')
    led=${row%% *}
    echo "$(since "$t0") $row" >>"$curve"
    [[ "$led" -ge "$n" ]] && break
    sleep 0.1
  done
  awk '{ if ($1 >= m) { printf "  %5.1f s: %s led (node1 %s leaders, %s candidates, %s without a leader; node2 %s, %s, %s)\n", $1, $3, $4, $5, $6, $7, $8, $9; m = int($1 * 2 + 1) / 2 } }' m=0 "$curve"
  echo "partitions with a leader on node1 or node2: $led of $n, $(since "$t0") after the kill"
  for i in 1 2; do
    local b a
    if [[ $i == 1 ]]; then b=$before1; else b=$before2; fi
    a=$(elections $((i - 1)))
    echo "$b $a" | awk -v node="node$i" '{ printf "  %s since the kill: %d election rounds, %d won, %d vote rounds, %d votes served, %d lease step-downs\n", node, $6 - $1, $7 - $2, $9 - $4, $10 - $5, $8 - $3 }'
  done
  "${ferry[@]}" bench queues --count "$n" --workers 64 --send-each | grep -v '^queues:' || true
  echo "(sends finished $(since "$t0") after the kill)"
  # What the leaders have applied now; node3 has caught up once each of
  # its replicas applied at least as much.
  { replicas 0; replicas 1; } | jq -s '[.[][] | select(.role == "leader") | {(.group): .applied_index}] | add' >"$dir/leaders.json"
  start_node 3
  t0=$(now)
  local behind=$n
  for _ in $(seq 1 1200); do
    behind=$(replicas 2 | jq --slurpfile led "$dir/leaders.json" \
      '($led[0] | length) - ([.[] | select(.applied_index >= ($led[0][.group] // 0))] | length)')
    [[ "$behind" -le 0 ]] && break
    sleep 0.5
  done
  echo "node3 restarted: replicas behind their leader: $behind, $(since "$t0") after the restart"
}

rows=()
profile() { # PROFILE=1: a 10 s CPU profile of node1 at each count, in the data directory
  [[ "${PROFILE:-}" == 1 ]] || return 0
  curl -sf --cacert "$pki/ca.pem" -H "Authorization: Bearer $(cat "$pki/admin.token")" \
    "https://127.0.0.1:$((7201 + OFFSET))/debug/pprof/profile?seconds=10" -o "$dir/node1-$1.pprof" && echo "profile: $dir/node1-$1.pprof"
}
for n in $COUNTS; do
  echo "creating queues up to $n..."
  "${ferry[@]}" bench queues --count "$n" --workers 32
  sleep "$SETTLE"
  rows+=("$(sample "$n idle")")
  profile "$n"
done
if [[ -n "$TRAFFIC" ]]; then
  last=${COUNTS##* }
  "${ferry[@]}" bench queues --count "$last" --traffic "$TRAFFIC" --duration $((WINDOW + 10))s &
  tp=$!
  sleep 5
  rows+=("$(sample "$last, 1 msg/$TRAFFIC each")")
  wait "$tp"
fi
if [[ "${KILL:-}" == 1 ]]; then
  kill_restart "${COUNTS##* }"
fi
echo
echo "| queues | node | CPU (of one core) | RSS | open files | goroutines |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
