#!/usr/bin/env bash
# Starts a local three-node Ferry cluster in the foreground: node1..node3 on
# 127.0.0.1 with fixed ports and data in ./data/node{1,2,3}. Ctrl-C stops it.
#
# Every port but gossip speaks TLS: on first start `ferryd dev-pki` writes a
# throwaway CA and node certificates to ./data/pki, which the nodes use and
# the CLI run from the checkout trusts. Clients need a token: on first start
# `ferryd token` writes an admin token to ./data/pki/admin.token (its hash to
# ./data/pki/tokens.json, which every node reads), and the CLI run from the
# checkout presents it. FERRY_INSECURE=1 runs in plaintext and without
# tokens instead (then use ./bin/ferry --insecure).
set -euo pipefail
cd "$(dirname "$0")/.."

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the cluster..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

seeds="127.0.0.1:7301,127.0.0.1:7302,127.0.0.1:7303"

# The gossip keyring: made on first start, kept with the data. Every node
# reads it; to rotate, edit it (see README) and send the nodes SIGHUP.
keyring="data/pki/gossip.key"
if [ ! -s "$keyring" ]; then
  mkdir -p data/pki
  (umask 077; head -c 32 /dev/urandom | base64 > "$keyring")
  echo "generated a gossip key in $keyring"
fi
scheme=https
curl_tls=(--cacert data/pki/ca.pem)
if [[ "${FERRY_INSECURE:-}" =~ ^(1|true)$ ]]; then
  scheme=http
  curl_tls=()
else
  ./bin/ferryd dev-pki -dir data/pki -nodes node1,node2,node3
fi
if [[ $scheme == https ]] && { [ ! -s data/pki/admin.token ] || [ ! -s data/pki/sqs.env ]; }; then
  rm -f data/pki/tokens.json data/pki/admin.token data/pki/sqs.env
  ./bin/ferryd token -name admin -cluster admin -file data/pki/tokens.json -secret-file data/pki/admin.token \
    -sqs -sqs-env-file data/pki/sqs.env
fi
for i in 1 2 3; do
  mkdir -p "data/node$i"
  if [[ $scheme == https ]]; then
    tls=(-tls-cert "data/pki/node$i.pem" -tls-key "data/pki/node$i-key.pem" -tls-ca data/pki/ca.pem -tokens data/pki/tokens.json)
  else
    tls=(-insecure)
  fi
  ./bin/ferryd -id "node$i" -data-dir "data/node$i" -ip 127.0.0.1 -port-offset $((i - 1)) \
    -bootstrap-expect 3 -join "$seeds" -fast-gossip -gossip-keyring "$keyring" "${tls[@]}" \
    -sqs-addr "127.0.0.1:$((7400 + i))" \
    > >(sed -u "s/^/[node$i] /") 2>&1 &
  pids+=($!)
done

for _ in $(seq 1 100); do
  if curl -sf "${curl_tls[@]}" "$scheme://127.0.0.1:7201/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done

cat <<'TXT'

Ferry is running: node1..node3 serve clients on 127.0.0.1:7101-7103
(HTTP admin on :7201-7203), over TLS with the CA in data/pki/ca.pem.
Clients need a token; ./bin/ferry presents the admin token in
data/pki/admin.token by itself (curl --cacert data/pki/ca.pem
-H "Authorization: Bearer $(cat data/pki/admin.token)" https://127.0.0.1:7201/v1/cluster).
The SQS-compatible API listens on :7401-7403; the admin token's SQS key is in
data/pki/sqs.env (set -a; . data/pki/sqs.env; set +a; AWS_CA_BUNDLE=data/pki/ca.pem
aws --region us-east-1 --endpoint-url https://127.0.0.1:7401 sqs list-queues; docs/sqs.md).
Try, in another terminal:

  ./bin/ferry cluster status
  ./bin/ferry queue create orders
  ./bin/ferry send orders hello
  ./bin/ferry peek orders
  ./bin/ferry recv orders            # prints a receipt such as orders:0:1:1
  ./bin/ferry ack orders:0:1:1
  ./bin/ferry queue stats orders

Press Ctrl-C to stop the cluster (data stays in ./data; rm -rf data to start afresh).
TXT
wait
