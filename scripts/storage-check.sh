#!/usr/bin/env bash
# Measures what the storage design promises on a real three-node cluster:
# N messages of SIZE bytes queued (default 1,000,000 x 1 KiB), then
#   - each node's resident memory with that backlog,
#   - bytes written to disk per message on each node (from /proc/PID/io),
#   - kill -9 of one node and of all three, and the time from the restart
#     until the queue serves a receive again.
# Ports 7041-7043, 7141-7143, 7241-7243, 7341-7343; data in a temporary
# directory that is removed at the end (KEEP=1 keeps it). The cluster runs in
# plaintext (-insecure): what is measured is storage, not TLS. FERRYD_ARGS adds
# flags to every node (e.g. FERRYD_ARGS=-raft-log-prewrite=false).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
SIZE=${SIZE:-1024}
make build >/dev/null
dir=$(mktemp -d /tmp/ferry-storage.XXXXXX)
servers="127.0.0.1:7141,127.0.0.1:7142,127.0.0.1:7143"
seeds="127.0.0.1:7341,127.0.0.1:7342,127.0.0.1:7343"
declare -A pid
gossip_key=$(head -c 32 /dev/urandom | base64)

start() {
  local i=$1
  ./bin/ferryd -id "node$i" -data-dir "$dir/node$i" -ip 127.0.0.1 -port-offset $((39 + i)) \
    -bootstrap-expect 3 -join "$seeds" -fast-gossip -gossip-key "$gossip_key" -insecure -pprof ${FERRYD_ARGS:-} >>"$dir/node$i.log" 2>&1 &
  pid[$i]=$!
}
cleanup() {
  for i in 1 2 3; do kill -9 "${pid[$i]:-0}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "${KEEP:-}" = 1 ] && echo "data kept in $dir" || rm -rf "$dir"
}
trap cleanup EXIT
ferry() { ./bin/ferry --insecure -s "$servers" "$@"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
# served_after prints how long until a receive (without ack) returns a message.
served_after() {
  local t0=$(date +%s.%N)
  until ferry --timeout 2s recv big --visibility 1s >/dev/null 2>&1; do sleep 0.05; done
  echo "$(date +%s.%N) - $t0" | bc
}

for i in 1 2 3; do start "$i"; done
until curl -sf http://127.0.0.1:7241/readyz >/dev/null 2>&1; do sleep 0.1; done
declare -A w0
for i in 1 2 3; do w0[$i]=$(written "${pid[$i]}"); done
echo "sending $N x $SIZE B..."
ferry bench pub big -n "$N" --size "$SIZE" --batch 64 --clients 8 --inflight 4 --keep --no-progress
sleep 5 # let followers apply and snapshots settle
for i in 1 2 3; do
  w=$(( $(written "${pid[$i]}") - ${w0[$i]} ))
  echo "node$i: RSS $(rss_mb "${pid[$i]}") MB, wrote $((w / N)) B per message ($((w / 1048576)) MiB)"
done
sleep 30 # the sends' garbage collected and returned to the system
for i in 1 2 3; do echo "node$i: RSS $(rss_mb "${pid[$i]}") MB with the backlog, 35 s after the last send"; done
ferry queue stats big
if [ "${PROFILE:-}" = 1 ]; then
  curl -sf http://127.0.0.1:7241/debug/pprof/heap >"$dir/heap-before.pprof"
  go tool pprof -top -inuse_space "$dir/heap-before.pprof" 2>/dev/null | head -25
fi

echo "kill -9 node1, restart it"
kill -9 "${pid[1]}"; wait "${pid[1]}" 2>/dev/null || true
t0=$(date +%s.%N); start 1
until curl -sf http://127.0.0.1:7241/readyz >/dev/null 2>&1; do sleep 0.05; done
echo "node1 ready after $(echo "$(date +%s.%N) - $t0" | bc) s; RSS $(rss_mb "${pid[1]}") MB"
echo "queue serves after $(served_after) s"

echo "kill -9 all three, restart them"
for i in 1 2 3; do kill -9 "${pid[$i]}"; done
wait 2>/dev/null || true
t0=$(date +%s.%N)
for i in 1 2 3; do start "$i"; done
until ferry --timeout 2s recv big --visibility 1s >/dev/null 2>&1; do sleep 0.05; done
echo "queue serves $(echo "$(date +%s.%N) - $t0" | bc) s after the restart of all three"
sleep 3
for i in 1 2 3; do echo "node$i: RSS $(rss_mb "${pid[$i]}") MB after restart"; done
sleep 30 # the sends' garbage collected and returned to the system
for i in 1 2 3; do echo "node$i: RSS $(rss_mb "${pid[$i]}") MB with the backlog, 35 s after the last send"; done
ferry queue stats big
if [ "${PROFILE:-}" = 1 ]; then
  curl -sf http://127.0.0.1:7241/debug/pprof/heap >"$dir/heap-after.pprof"
  go tool pprof -top -inuse_space "$dir/heap-after.pprof" 2>/dev/null | head -25
fi
