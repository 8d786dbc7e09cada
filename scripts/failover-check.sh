#!/usr/bin/env bash
# Measures failover: starts a three-node Ferry cluster on loopback (TLS,
# the production raft timings of ferryd's defaults, data in a temporary
# directory), runs `ferry bench pub --sync` against it, kills the leader
# of the bench queue's partition with kill -9 while sends go on, and
# prints the longest time without a confirmed send (the failover time).
# ROUNDS (default 1) repeats the kill on fresh clusters; FERRYD_FLAGS adds
# ferryd flags (e.g. other raft timings); IDLE=N first creates N idle
# single-partition queues beside the bench queue (`ferry bench queues`),
# to see a busy partition's failover among many idle ones. Not part of
# `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build >/dev/null
rounds=${ROUNDS:-1}
work=$(mktemp -d /tmp/ferry-failover.XXXXXX)
declare -A pid
stop_all() {
  for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pid[@]}"; do wait "$p" 2>/dev/null || true; done
  pid=()
}
trap 'stop_all; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
offset=2500 # clients on 9601-9603, away from `make run`'s ports
servers="127.0.0.1:$((7101 + offset)),127.0.0.1:$((7102 + offset)),127.0.0.1:$((7103 + offset))"
seeds="127.0.0.1:$((7301 + offset)),127.0.0.1:$((7302 + offset)),127.0.0.1:$((7303 + offset))"

export round
for round in $(seq 1 "$rounds"); do
  dir="$work/r$round"
  mkdir -p "$dir/pki"
  (umask 077; head -c 32 /dev/urandom | base64 > "$dir/pki/gossip.key")
  ./bin/ferryd dev-pki -dir "$dir/pki" -nodes node1,node2,node3 >/dev/null
  ./bin/ferryd token -name failover -cluster admin -file "$dir/pki/tokens.json" -secret-file "$dir/pki/failover.token" 2>/dev/null
  for i in 1 2 3; do
    ./bin/ferryd -id "node$i" -data-dir "$dir/node$i" -ip 127.0.0.1 -port-offset $((offset + i - 1)) \
      -bootstrap-expect 3 -join "$seeds" -fast-gossip -gossip-keyring "$dir/pki/gossip.key" \
      -tls-cert "$dir/pki/node$i.pem" -tls-key "$dir/pki/node$i-key.pem" -tls-ca "$dir/pki/ca.pem" -tokens "$dir/pki/tokens.json" ${FERRYD_FLAGS:-} \
      > "$dir/node$i.log" 2>&1 &
    pid[node$i]=$!
  done
  for _ in $(seq 1 150); do
    curl -sf --cacert "$dir/pki/ca.pem" "https://127.0.0.1:$((7201 + offset))/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  ferry=(./bin/ferry --servers "$servers" --ca "$dir/pki/ca.pem" --token-file "$dir/pki/failover.token")
  if [[ -n "${IDLE:-}" ]]; then
    "${ferry[@]}" bench queues --count "$IDLE" --workers 32
  fi
  "${ferry[@]}" --json bench pub failover --sync -c 2 -d 16s --no-progress > "$dir/bench.json" &
  bench=$!
  # The leader as the cluster reports it, once two looks a second apart
  # agree (the report follows gossip, which lags an election a little).
  sleep 3 # steady sends before the kill
  leader="" prev=""
  for _ in $(seq 1 20); do
    leader=$("${ferry[@]}" cluster status --json 2>/dev/null |
      jq -r '.queues[] | select(.name == "failover") | .partitions[0].leader' 2>/dev/null || true)
    [ -n "$leader" ] && [ "$leader" != null ] && [ "$leader" = "$prev" ] && break
    prev=$leader
    sleep 1
  done
  if [ -z "$leader" ] || [ "$leader" = null ] || [ -z "${pid[$leader]:-}" ]; then
    echo "round $round: no leader found for the bench queue; node logs in $dir" >&2
    exit 1
  fi
  kill -9 "${pid[$leader]}"
  echo "round $round: killed $leader (kill -9) at $(date +%T.%N | cut -c1-12)" >&2
  wait "$bench" || true
  jq -r --arg l "$leader" '"round \(env.round): leader \($l) killed; sends confirmed \(.messages), errors \(.errors); failover (longest time without a confirm) \(.max_stall_ms) ms"' \
    "$dir/bench.json"
  stop_all
done
