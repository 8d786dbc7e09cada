#!/usr/bin/env bash
# What a large schedule of messages costs in memory: starts a three-node
# cluster set up as `make run` sets it up (TLS, gossip key, tokens;
# 127.0.0.1, ports offset by 60 so a running `make run` is not disturbed),
# creates a single-partition queue and sends COUNT (default 1,000,000)
# small messages delayed from one day to 360 days ahead (ten slices of
# COUNT/10, each with its own delay), then prints every node's RSS next to
# its RSS with the queue empty. Then it kills the partition's leader with
# kill -9, waits for a new leader, restarts the killed node, restarts all
# three, and checks the delayed count each time; RSS is printed again
# after the restart. Meanwhile a schedule every second runs on a second
# queue, whose leader is killed with kill -9 too: at the end its messages
# must be exactly one per tick, none twice.
#
#   scripts/scheduled-rss.sh
#   COUNT=100000 scripts/scheduled-rss.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-1000000}
OFFSET=60
make -s build >/dev/null
dir=$(mktemp -d /tmp/ferry-sched.XXXXXX)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP:-}" == 1 ]]; then echo "data kept in $dir"; else rm -rf "$dir"; fi
}
trap stop EXIT

pki="$dir/pki"
./bin/ferryd dev-pki -dir "$pki" -nodes node1,node2,node3 >/dev/null
./bin/ferryd token -name admin -cluster admin -file "$pki/tokens.json" -secret-file "$pki/admin.token" >/dev/null
(umask 077; head -c 32 /dev/urandom | base64 >"$pki/gossip.key")
seeds=""
for i in 1 2 3; do seeds+="127.0.0.1:$((7301 + OFFSET + i - 1)),"; done
start_node() { # start_node I: starts node I (1..3) in the background, its pid in pids[I-1]
  local i=$1
  mkdir -p "$dir/node$i"
  ./bin/ferryd -id "node$i" -data-dir "$dir/node$i" -ip 127.0.0.1 -port-offset $((OFFSET + i - 1)) \
    -bootstrap-expect 3 -join "${seeds%,}" -fast-gossip -gossip-keyring "$pki/gossip.key" \
    -tls-cert "$pki/node$i.pem" -tls-key "$pki/node$i-key.pem" -tls-ca "$pki/ca.pem" -tokens "$pki/tokens.json" \
    >>"$dir/node$i.log" 2>&1 &
  pids[$((i - 1))]=$!
}
ferry=(./bin/ferry --ca "$pki/ca.pem" --token-file "$pki/admin.token" --servers "127.0.0.1:$((7101 + OFFSET)),127.0.0.1:$((7102 + OFFSET)),127.0.0.1:$((7103 + OFFSET))")
wait_cluster() {
  for _ in $(seq 1 300); do
    if "${ferry[@]}" cluster status >/dev/null 2>&1; then return; fi
    sleep 0.2
  done
  echo "the cluster did not come up"; exit 1
}
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
rss_all() { # rss_all LABEL
  for i in 0 1 2; do printf "| %s | node%d | %s MB |\n" "$1" $((i + 1)) "$(rss_mb "${pids[$i]}")"; done
}
delayed() { "${ferry[@]}" queue stats later --json | awk -F': ' '/"delayed"/ {gsub(/[ ,]/, "", $2); print $2; exit}'; }
wait_delayed() { # wait_delayed LABEL
  for _ in $(seq 1 600); do
    if [[ "$(delayed 2>/dev/null)" == "$COUNT" ]]; then echo "$1: $COUNT delayed"; return; fi
    sleep 0.5
  done
  echo "$1: $(delayed 2>/dev/null || echo '?') delayed, want $COUNT"; exit 1
}
leader_pid() { # leader_pid QUEUE: the pid and number of the node leading QUEUE/0
  local id
  id=$("${ferry[@]}" queue stats "$1" --json | awk -F'"' '/"leader"/ {print $4; exit}')
  echo "${pids[$((${id#node} - 1))]}" "${id#node}"
}

for i in 1 2 3; do start_node "$i"; done
wait_cluster
"${ferry[@]}" queue create later --partitions 1 >/dev/null
sleep 2
rss_all "empty queue"
"${ferry[@]}" queue create ticks --partitions 1 >/dev/null
next=$("${ferry[@]}" schedule add ticks beat --every 1s --body tick --json | awk -F'"' '/"next"/ {print $4; exit}')
first_tick=$(date -d "$next" +%s)
slice=$((COUNT / 10))
start=$(date +%s)
for k in $(seq 0 9); do
  seq 1 "$slice" | "${ferry[@]}" send later --delay "$((24 + k * 36 * 24))h" >/dev/null
done
echo "sent $COUNT delayed messages in $(( $(date +%s) - start )) s"
wait_delayed "after the sends"
sleep 5
rss_all "$COUNT scheduled"
kill_leader() { # kill_leader QUEUE: kill -9 of QUEUE/0's leader, restarted once another leads
  local pid n
  read -r pid n < <(leader_pid "$1")
  kill -9 "$pid"
  echo "killed node$n (leader of $1/0) with kill -9"
  wait_delayed "after the kill"
  start_node "$n"
  wait_cluster
  sleep 5
}
kill_leader later
kill_leader ticks
for i in 0 1 2; do kill -TERM "${pids[$i]}"; done
wait 2>/dev/null || true
for i in 1 2 3; do start_node "$i"; done
wait_cluster
wait_delayed "after restarting every node"
sleep 5
rss_all "after the restart"
sleep 3
fired=$("${ferry[@]}" schedule ls ticks --json | awk -F': ' '/"fired"/ {gsub(/[ ,]/, "", $2); print $2; exit}')
"${ferry[@]}" schedule rm ticks beat >/dev/null
: >"$dir/ticks"
while out=$("${ferry[@]}" recv ticks --max 1000 --wait 1s --ack --json) && grep -q '"id"' <<<"$out"; do
  grep -o '"id": "beat@[0-9]*"' <<<"$out" | grep -o '[0-9]*' >>"$dir/ticks"
done
# One tick may fire between the listing and the removal: fired is a floor.
sort -n "$dir/ticks" | awk -v fired="$fired" -v want_first="$first_tick" '
  NR == 1 { first = $1 } { if (seen[$1]++) dup++; last = $1; n++ }
  END { printf "schedule every 1s: %d messages for the %d ticks from its first (%d, want %d) to its last, %d twice (fired %d before the removal)\n",
          n, last - first + 1, first, want_first, dup, fired
        if (first != want_first || n != last - first + 1 || n < fired || dup) exit 1 }'
