#!/usr/bin/env bash
# Runs the same shapes of work against NATS JetStream (3 nodes, R3, file
# storage) and then a Ferry cluster (3 nodes, R3, started as `make run`
# starts it), one after the other on loopback with data in temporary
# directories, and prints one table with the ratio Ferry / NATS twice:
# against NATS at the nats CLI's own defaults (batches of 500 for async
# publish, fetch and consume: what a user comparing the two would run),
# and against NATS at Ferry's batch sizes where those differ. The async
# publish rows also run Ferry's Publisher with NATS's default window (500
# per client) and at the Publisher's own defaults.
#
# Needs nats-server and the nats CLI on PATH or in $(go env GOPATH)/bin:
#   go install github.com/nats-io/nats-server/v2@v2.15.2
#   go install github.com/nats-io/natscli/nats@v0.5.0
# BENCH_SCALE (percent, default 100) scales every message count; BENCH_SIZE is the
# body size (256); BENCH_ONLY=ferry or nats runs one side. BENCH_TLS=1 (the
# default) runs both with TLS on client connections and between servers (one
# throwaway CA from `ferryd dev-pki`); BENCH_TLS=0 runs both in plaintext.
# FERRYD_ARGS adds flags to every Ferry node (e.g.
# FERRYD_ARGS=-raft-log-prewrite=false). BENCH_STEP_TIMEOUT (seconds, 180)
# bounds each benchmark command: one that hangs (the nats CLI's consume bench
# has been seen to) is stopped and reported, and its row holds what it
# printed before (0 and no ratio if nothing).
# Not part of `make test`: it loads the machine for a minute or more.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"
scale=${BENCH_SCALE:-100}
size=${BENCH_SIZE:-256}
n() { echo $(($1 * scale / 100)); }
step_timeout=${BENCH_STEP_TIMEOUT:-180}

# bounded CMD...: runs a benchmark command for at most step_timeout seconds.
# A timeout is reported on the terminal and is not an error; any other
# failure is.
bounded() {
  local rc=0
  timeout -k 10 "$step_timeout" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    # fd 3 is the terminal's stderr while the nats CLI's own goes to a log.
    if { true >&3; } 2>/dev/null; then
      echo "bench-compare: stopped after ${step_timeout}s: $*" >&3
    else
      echo "bench-compare: stopped after ${step_timeout}s: $*" >&2
    fi
    return 0
  fi
  return "$rc"
}

only=${BENCH_ONLY:-}
for tool in nats-server nats; do
  [ "$only" = ferry ] && break
  command -v "$tool" >/dev/null || { echo "bench-compare: $tool not found (see the top of $0)" >&2; exit 1; }
done
make -s build >/dev/null

work=$(mktemp -d /tmp/ferry-bench.XXXXXX)
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
results="$work/results.tsv"
: > "$results"
tls=${BENCH_TLS:-1}
pki="$work/pki"
./bin/ferryd dev-pki -dir "$pki" -nodes node1,node2,node3 >/dev/null

# record SYSTEM SHAPE MSGS_PER_S P50_MS
record() { printf '%s\t%s\t%s\t%s\n' "$@" >> "$results"; }

# disk_probe SYSTEM: times 500 writes of 4 KiB with O_DSYNC in the work
# directory (the file system both systems store on) just before SYSTEM's
# runs, and keeps the milliseconds per write for the table's footer. This
# disk's flush time moves by 2-4x from minute to minute on a shared
# machine, and every Ferry confirm waits for fdatasyncs (NATS at its
# defaults does not), so a row compares only beside its probe.
probes="$work/probes.txt"
: > "$probes"
disk_probe() {
  local t0 t1
  t0=$(date +%s%N)
  dd if=/dev/zero of="$work/probe.bin" bs=4k count=500 oflag=dsync 2>/dev/null
  t1=$(date +%s%N)
  rm -f "$work/probe.bin"
  echo "$1 $(awk -v ns=$((t1 - t0)) 'BEGIN{printf "%.2f", ns / 500 / 1e6}')" >> "$probes"
}

run_nats() {
nats_port=24222
for i in 1 2 3; do
  client_tls="" route_tls=""
  if [ "$tls" = 1 ]; then
    client_tls="tls { cert_file: \"$pki/node$i.pem\", key_file: \"$pki/node$i-key.pem\", ca_file: \"$pki/ca.pem\" }"
    route_tls="tls { cert_file: \"$pki/node$i.pem\", key_file: \"$pki/node$i-key.pem\", ca_file: \"$pki/ca.pem\", verify: true }"
  fi
  cat > "$work/nats$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$((nats_port + i - 1))
$client_tls
jetstream { store_dir: "$work/nats$i" }
cluster { name: bench, listen: 127.0.0.1:$((26221 + i)), routes: [nats://127.0.0.1:26222, nats://127.0.0.1:26223, nats://127.0.0.1:26224]
  $route_tls }
EOF
  nats-server -c "$work/nats$i.conf" > "$work/nats$i.log" 2>&1 &
  pids+=($!)
done
export NATS_URL="nats://127.0.0.1:$nats_port"
nats() { bounded nats "$@"; }
if [ "$tls" = 1 ]; then
  export NATS_URL="tls://127.0.0.1:$nats_port"
  nats() { bounded nats --tlsca "$pki/ca.pem" "$@"; }
fi
for _ in $(seq 1 100); do
  nats server check jetstream >/dev/null 2>&1 && nats stream ls >/dev/null 2>&1 && break
  sleep 0.2
done
stream=(--stream ferrycmp --replicas 3 --storage file --size "$size" --no-progress)

# nats_stats SHAPE OUTPUT [SYSTEM]: the aggregated (or only) stats line's
# rate and P50, recorded for SYSTEM (nats: the CLI's defaults).
nats_stats() {
  local line rate p50
  line=$(grep -E 'stats: [0-9,]+ msgs/sec' <<<"$2" | tail -1)
  rate=$(sed -E 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/' <<<"$line" | tr -d ,)
  p50=$( (grep -E 'P50[: ]+[0-9,.]+us' <<<"$2" || true) | tail -1 | sed -E 's/.*P50:? ([0-9,.]+)us.*/\1/' | tr -d ,)
  record "${3:-nats}" "$1" "${rate:-0}" "$(awk -v u="${p50:-0}" 'BEGIN{printf "%.3f", u/1000}')"
}

echo "== NATS JetStream" >&2
exec 3>&2 2>>"$work/nats-bench.log" # the nats CLI narrates on stderr
# Each shape runs with the nats CLI's own defaults (system "nats": what a
# user comparing the two would run) and, where a batch setting differs,
# again with Ferry's shape ("nats-matched": the batch Ferry's row uses).
# Clients and message counts are Ferry's in both.
out=$(nats bench js pub sync ferrycmp.s "${stream[@]}" --create --purge --clients 1 --msgs "$(n 3000)")
nats_stats "publish sync, 1 client" "$out"
out=$(nats bench js pub sync ferrycmp.s "${stream[@]}" --purge --clients 16 --msgs "$(n 16000)")
nats_stats "publish sync, 16 clients" "$out"
out=$(nats bench js pub async ferrycmp.s "${stream[@]}" --purge --clients 4 --msgs "$(n 80000)")
nats_stats "publish pipelined, 4 x 64" "$out"
nats_stats "publish async, 4 x 64" "$out" # the same run: nats publishes async
# Its default window is 500 messages per client: the row where Ferry's
# Publisher has the same window, and the row where each runs at its own
# defaults (Ferry's Publisher: client.DefaultPublishInFlightMessages).
nats_stats "publish async, 4 x 500" "$out"
nats_stats "publish async, defaults" "$out"
out=$(nats bench js pub async ferrycmp.s "${stream[@]}" --purge --clients 4 --batch 64 --msgs "$(n 80000)")
nats_stats "publish pipelined, 4 x 64" "$out" nats-matched
nats_stats "publish async, 4 x 64" "$out" nats-matched
drain() { # drain SHAPE SYSTEM FETCH|CONSUME [BATCH FLAGS]: fills the stream, then drains it
  local shape=$1 system=$2 mode=$3
  shift 3
  nats consumer rm ferrycmp nats-bench -f >/dev/null 2>&1 || true
  nats bench js pub async ferrycmp.s "${stream[@]}" --purge --clients 4 --batch 64 --msgs "$(n 50000)" >/dev/null
  out=$(nats bench js "$mode" --stream ferrycmp --no-progress --clients 4 "$@" --msgs "$(n 50000)")
  nats_stats "$shape" "$out" "$system"
}
drain "drain, receive 100 + ack" nats fetch
drain "drain, receive 100 + ack" nats-matched fetch --batch 100
# Consume 4 x 8 is the README's shape (Ferry's default prefetch, up to 256
# leases per client); / 32 holds Ferry to a prefetch of 32. NATS's
# defaults are the same run for both.
drain "drain, Consume 4 x 8" nats consume
nats_stats "drain, Consume 4 x 8 / 32" "$out" nats
drain "drain, Consume 4 x 8" nats-matched consume --batch 256
drain "drain, Consume 4 x 8 / 32" nats-matched consume --batch 32
exec 2>&3 3>&-
stop_all
}

run_ferry() {
echo "== Ferry" >&2
(umask 077; mkdir -p "$pki"; head -c 32 /dev/urandom | base64 > "$pki/gossip.key")
./bin/ferryd token -name bench -cluster admin -file "$pki/tokens.json" -secret-file "$pki/bench.token" 2>/dev/null
offset=2000 # clients on 9101-9103, away from `make run`'s ports
seeds="127.0.0.1:$((7301 + offset)),127.0.0.1:$((7302 + offset)),127.0.0.1:$((7303 + offset))"
for i in 1 2 3; do
  security=(-tls-cert "$pki/node$i.pem" -tls-key "$pki/node$i-key.pem" -tls-ca "$pki/ca.pem")
  [ "$tls" = 1 ] || security=(-insecure)
  ./bin/ferryd -id "node$i" -data-dir "$work/node$i" -ip 127.0.0.1 -port-offset $((offset + i - 1)) \
    -bootstrap-expect 3 -join "$seeds" -fast-gossip -gossip-keyring "$pki/gossip.key" \
    "${security[@]}" -tokens "$pki/tokens.json" ${FERRYD_ARGS:-} \
    > "$work/ferry$i.log" 2>&1 &
  pids+=($!)
done
scheme=https client_security=(--ca "$pki/ca.pem")
[ "$tls" = 1 ] || { scheme=http; client_security=(--insecure); }
for _ in $(seq 1 150); do
  curl -sf --cacert "$pki/ca.pem" "$scheme://127.0.0.1:$((7201 + offset))/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
ferry=(bounded ./bin/ferry --servers "127.0.0.1:$((7101 + offset)),127.0.0.1:$((7102 + offset)),127.0.0.1:$((7103 + offset))"
  "${client_security[@]}" --token-file "$pki/bench.token" --json bench --size "$size" --no-progress)

# ferry_stats SHAPE JSON
ferry_stats() {
  local rate p50
  rate=$(jq -r '.msgs_per_s | floor' <<<"$2") p50=$(jq -r '.latency.p50_ms' <<<"$2")
  record ferry "$1" "${rate:-0}" "${p50:-0}"
}
ferry_stats "publish sync, 1 client" "$("${ferry[@]}" pub --sync -c 1 -n "$(n 3000)")"
ferry_stats "publish sync, 16 clients" "$("${ferry[@]}" pub --sync -c 16 -n "$(n 16000)")"
ferry_stats "publish pipelined, 4 x 64" "$("${ferry[@]}" pub -c 4 -w 64 -n "$(n 80000)")"
ferry_stats "publish async, 4 x 64" "$("${ferry[@]}" pub -c 4 -w 64 --async -n "$(n 80000)")"
ferry_stats "publish async, 4 x 500" "$("${ferry[@]}" pub -c 4 -w 500 --async -n "$(n 80000)")"
ferry_stats "publish async, defaults" "$("${ferry[@]}" pub -c 4 -w 0 --async -n "$(n 80000)")"
ferry_stats "drain, receive 100 + ack" "$("${ferry[@]}" consume -c 4 --batch 100 -n "$(n 50000)")"
ferry_stats "drain, Consume 4 x 8" "$("${ferry[@]}" consume -c 4 --handlers 8 -n "$(n 50000)")"
ferry_stats "drain, Consume 4 x 8 / 32" "$("${ferry[@]}" consume -c 4 --handlers 8 --prefetch 32 -n "$(n 50000)")"
stop_all
}

# settle_disk: before each side, the files the other side left are removed
# and the page cache's dirty data written out. NATS at its defaults leaves
# most of what it stored unflushed (hundreds of MB), and the kernel writes
# it back within its 30 s expiry: during the first rows of the side that
# runs next, whose fdatasyncs then queue behind it (Ferry's sync rows ran
# at a third of their speed in such runs).
settle_disk() {
  rm -rf "$work"/nats[123] "$work"/node[123]
  sync
}
if [ "$only" != ferry ]; then settle_disk; disk_probe NATS; run_nats; fi
if [ "$only" != nats ]; then settle_disk; disk_probe Ferry; run_ferry; fi

# Latencies: per call for the publish rows; in the drain rows NATS reports
# per message and Ferry per receive of up to 100, so only rates compare.
python3 - "$results" "$probes" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
probes = [l.split() for l in open(sys.argv[2]) if l.strip()]
shapes, got = [], {}
for system, shape, rate, p50 in rows:
    if shape not in shapes:
        shapes.append(shape)
    got[(system, shape)] = (float(rate), float(p50))
def ratio(f, n):
    return f"{f / n:.2f}" if n and f else "-"
print(f"{'workload':28} {'NATS msg/s':>11} {'p50 ms':>7} {'Ferry msg/s':>12} {'p50 ms':>7} {'ratio':>6}"
      f" {'NATS matched':>13} {'ratio':>6}")
for s in shapes:
    n, f = got.get(("nats", s), (0, 0)), got.get(("ferry", s), (0, 0))
    m = got.get(("nats-matched", s), n)  # no matched run: the defaults are Ferry's shape
    print(f"{s:28} {n[0]:>11,.0f} {n[1]:>7.2f} {f[0]:>12,.0f} {f[1]:>7.2f} {ratio(f[0], n[0]):>6}"
          f" {m[0]:>13,.0f} {ratio(f[0], m[0]):>6}")
print("NATS: the nats CLI's defaults; NATS matched: the same run with Ferry's batch"
      " (async publish 64, fetch 100, consume 256 or 32) where they differ.")
print("publish async: 4 x N is N messages in flight per client (NATS's default is 500);"
      " defaults is each at its own (Ferry's Publisher: 4,096 per client).")
if probes:
    print("disk: 4 KiB O_DSYNC write before the runs, " +
          ", ".join(f"{who} {ms} ms" for who, ms in probes) + ".")
PY
