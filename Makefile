# Ferry — build, test and lint entry points. `make help` lists them.

GO            ?= go
STATICCHECK   ?= $(shell go env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
# The chart's checks (deploy/helm) run helm and kubeconform; make test
# installs them with go install when missing (helm takes minutes to build
# the first time).
HELM          ?= $(shell go env GOPATH)/bin/helm
HELM_VERSION  := v3.21.4
KUBECONFORM   ?= $(shell go env GOPATH)/bin/kubeconform
KUBECONFORM_VERSION := v0.8.0
PKGS          := ./...
# Packages with goroutines or shared state run under the race detector.
RACE_PKGS     := ./wal/... ./transport/... ./wire/... ./partition/... ./client/... ./node/... ./dashboard/... ./sqs/... ./ferrytest/... ./examples/...

.PHONY: help build run test lint bench bench-compare fuzz tools clean chaos soak image compose-up

help:
	@echo "make run     - build and start a local three-node cluster (Ctrl-C stops it)"
	@echo "make build   - compile every package and binary into ./bin"
	@echo "make test    - run the whole test suite (race detector where there is concurrency)"
	@echo "make lint    - gofmt, go vet, staticcheck"
	@echo "make bench   - run the benchmarks"
	@echo "make bench-compare - NATS JetStream vs Ferry, same shapes, one table (minutes; not in test/CI)"
	@echo "make fuzz    - short fuzzing of the decoders"
	@echo "make chaos   - long chaos suite (as root, with iptables): FERRY_CHAOS_DURATION (10m),"
	@echo "               FERRY_CHAOS_SEED (random), FERRY_CHAOS_NODES (5); 'make test' runs a bounded one"
	@echo "make soak    - the workload under a slow rotation of faults for FERRY_SOAK_DURATION (1h), 3 nodes;"
	@echo "               fails on violations or on RSS/goroutine/open-file growth once steady"
	@echo "make image   - build the container image localhost/ferry:latest (podman or buildah)"
	@echo "make compose-up - build the image and start deploy/compose.yaml's three-node cluster"

build:
	$(GO) build $(PKGS)
	$(GO) build -o bin/ferryd ./cmd/ferryd
	$(GO) build -o bin/ferry ./cmd/ferry

run: build
	./scripts/run-cluster.sh

# The chaos suite runs last and alone: it loads both cores and cuts links
# with machine-wide iptables rules. third_party/raft is a module of its own
# (go test ./... does not reach it): its quiescence, campaign and election
# tests run here; upstream's own tests run with `cd third_party/raft && go test .`.
test: tools
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/chaos)
	$(GO) test -count=1 -race $(RACE_PKGS)
	$(GO) test -count=1 -race ./fsm/ -rapid.checks=100
	cd third_party/raft && $(GO) test -count=1 -race -run 'TestQuiesce|TestCampaign|TestElection|TestCost|TestRejoin|TestReplicateBeforeStore|TestReplication_|TestNotifyAnswered|TestUpdateLastAppended' .
	$(GO) test -count=1 -timeout 20m ./test/chaos/

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

tools:
	@test -x $(STATICCHECK) || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -x $(HELM) || $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	@test -x $(KUBECONFORM) || $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Starts NATS JetStream and then a Ferry cluster on loopback and prints one
# table of ratios (scripts/bench-compare.sh). Not part of test or CI.
bench-compare: build
	./scripts/bench-compare.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzWAL_DecodeRecord -fuzztime 30s ./wal/
	$(GO) test -run '^$$' -fuzz FuzzRaftlog_DecodeEntry -fuzztime 30s ./wal/raftlog/
	$(GO) test -run '^$$' -fuzz FuzzWire_ReadFrame -fuzztime 30s ./wire/
	$(GO) test -run '^$$' -fuzz FuzzSQS_DecodeInput -fuzztime 30s ./sqs/

# The long chaos suite: real ferryd processes under kill -9, pauses,
# partitions and restarts (test/chaos). Partition faults need root and
# iptables; without them they are skipped, loudly.
chaos:
	FERRY_CHAOS=1 $(GO) test -count=1 -run TestChaos_Long -timeout 0 -v ./test/chaos/

# The soak: the chaos workload for an hour (FERRY_SOAK_DURATION) with a
# fault every 20-50 s, sampling the nodes' RSS, goroutines and open files.
soak:
	FERRY_SOAK=1 $(GO) test -count=1 -run TestChaos_Soak -timeout 0 -v ./test/chaos/

# The container image (Containerfile), built from binaries compiled here so
# that no base image is pulled; scripts/image.sh prints its size.
image:
	./scripts/image.sh

# A three-node cluster in containers (deploy/compose.yaml; see
# deploy/compose/README.md).
compose-up: build
	./scripts/compose-up.sh

clean:
	rm -rf bin
