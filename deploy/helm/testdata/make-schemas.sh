#!/usr/bin/env bash
# Writes deploy/helm/testdata/schemas: the JSON schemas kubeconform checks
# the chart against, offline. The inputs come from Go modules (through the
# Go module proxy, like any `go mod download`):
#   - the Kubernetes OpenAPI v2 document, api/openapi-spec/swagger.json of
#     k8s.io/kubernetes at KUBERNETES_VERSION;
#   - the ServiceMonitor CRD as JSON, jsonnet/prometheus-operator/
#     servicemonitors-crd.json of github.com/prometheus-operator/prometheus-operator;
#   - the Certificate and Issuer CRDs, deploy/crds/*.yaml of
#     github.com/cert-manager/cert-manager, turned into JSON with helm's
#     fromYaml and toJson.
# Then schemagen (beside this script) inlines, tightens and writes them.
# Needs go and helm. Run from the repository root:
#   deploy/helm/testdata/make-schemas.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."

KUBERNETES_VERSION=${KUBERNETES_VERSION:-1.36.3}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
out=deploy/helm/testdata/schemas

moddir() { (cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k8s=$(moddir "k8s.io/kubernetes@v$KUBERNETES_VERSION")
promop=$(moddir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
certm=$(moddir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")

# YAML to JSON with helm: a throwaway chart whose one template prints the
# file given to it as JSON.
yaml2json() {
  local chart="$tmp/yaml2json"
  rm -rf "$chart" && mkdir -p "$chart/templates" "$chart/files"
  printf 'apiVersion: v2\nname: yaml2json\nversion: 0.0.0\n' > "$chart/Chart.yaml"
  echo '{{ .Files.Get "files/in.yaml" | fromYaml | toJson }}' > "$chart/templates/out.yaml"
  cp "$1" "$chart/files/in.yaml"
  helm template x "$chart" --show-only templates/out.yaml | grep -v '^---$' | grep -v '^# Source:' > "$2"
}
yaml2json "$certm/deploy/crds/cert-manager.io_certificates.yaml" "$tmp/certificates.json"
yaml2json "$certm/deploy/crds/cert-manager.io_issuers.yaml" "$tmp/issuers.json"

rm -rf "$out"
go run ./deploy/helm/testdata/schemagen -version "$KUBERNETES_VERSION" -out "$out" \
  -swagger "$k8s/api/openapi-spec/swagger.json" \
  -crd "$promop/jsonnet/prometheus-operator/servicemonitors-crd.json" \
  -crd "$tmp/certificates.json" -crd "$tmp/issuers.json"
ls -l "$out"/*
