# dedupeworker — build, run and test targets. `make test` is what CI runs (.ci/run).
GO        ?= go
BIN       := bin/dedupeworker
PKGS      := ./...
FUZZTIME  ?= 5s

.PHONY: all build run test test-unit test-race fuzz-short fuzz docs-check deploy-check sdk-check image bench bench-quick bench-go lint chaos soak scale model clean

all: build

## build: a static binary; `bin/dedupeworker version` reports the module version and the git revision it was built
## from (-buildvcs=auto: stamped inside a git clone even where GOFLAGS says -buildvcs=false; BUILDVCS=false to skip;
## a git worktree, whose .git is a file, is not stamped: the go command looks for a .git directory).
BUILDVCS  ?= auto
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=$(BUILDVCS) -o $(BIN) ./cmd/dedupeworker

## run: the worker with an embedded JetStream server (no NATS needed, and never the server of NATS_URL or a nats CLI
## context: --embedded); set DEDUPE_NATS_URL to use your own.
## The shell execs the binary, so the worker is make's own child: Ctrl-C, or SIGTERM to make, reaches it and it
## shuts down cleanly (`go run` would leave it running when make is terminated). Metrics and health are served on
## 127.0.0.1 only (DEDUPE_HTTP_ADDR overrides it).
run: build
	DEDUPE_HTTP_ADDR="$${DEDUPE_HTTP_ADDR-127.0.0.1:9464}" exec ./$(BIN) run $(if $(DEDUPE_NATS_URL),,--embedded)

## test: everything CI runs — vet, unit and integration tests (the fault suite's short variants, a fixed seed), the
## README's walkthroughs (with the tools present: internal/docscheck), the deploy files' checks (the deploy module,
## which keeps the Kubernetes types out of the worker's go.mod), the bench module's own tests (its workload, flags,
## routing and in-process contenders; about 10 s), and the race detector on the concurrent packages (-short: the
## 3-node cluster tests, which the unit tests run, would take it from about 135 s to 210 s of a 10-minute budget).
## Every fuzz target's seed corpus and testdata run here as plain tests (go test runs a Fuzz function on its seeds), so a
## parser regression fails the build; the fuzzer itself, which builds each package again with
## coverage instrumentation before it fuzzes at all, runs in make fuzz and make fuzz-short (13 targets × 5 s took
## 606 s on two shared cores: the largest part of make test when it ran there).
test: test-unit test-race

test-unit:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 8m $(PKGS)
	$(GO) -C deploy vet ./... && $(GO) -C deploy test -count=1 -timeout 5m ./...
	$(GO) -C bench vet ./... && $(GO) -C bench test -count=1 -timeout 5m ./...

test-race:
	$(GO) test -race -short -count=1 -timeout 6m ./pipeline/ ./kvwindow/...

## fuzz-short: each fuzz target for FUZZTIME (5s): new inputs, not only the seeds make test runs.
fuzz-short:
	@./scripts/fuzz.sh $(FUZZTIME)

## fuzz: each fuzz target for FUZZTIME (default here 2m).
fuzz:
	@./scripts/fuzz.sh $(if $(filter 5s,$(FUZZTIME)),2m,$(FUZZTIME))

## docs-check: the walkthroughs of README.md (the nats CLI quickstart, the webhook quickstart) and docs/consuming.md,
## every step (make test skips those whose tools are missing), against a worker built from this tree, on free loopback
## ports. Installs the nats CLI NATSCLI into bin/tools first (about a minute the first time, from the Go module proxy).
NATSCLI   ?= v0.5.1
docs-check:
	GOBIN="$(CURDIR)/bin/tools" $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI)
	PATH="$(CURDIR)/bin/tools:$$PATH" DOCS_CHECK_REQUIRE=1 $(GO) test -count=1 -v -run '^TestReadme|^TestConsuming' ./internal/docscheck/

## deploy-check: the deploy files through the tools that read them, installed into bin/tools from the Go module
## proxy (the first build of promtool compiles all of Prometheus, many minutes: not part of make test): promtool
## check rules and promtool test rules (the alerts' unit tests, deploy/prometheus/tests/), and the deploy module's
## kustomize tests with kustomize required — kustomize build of the base and the KEDA overlay on a copy with
## placeholder operator files, each rendered object decoded strictly into its Kubernetes API type (an unknown or
## misspelt field fails: the schema check kubeconform makes, without the schemas kubeconform downloads from GitHub
## when it runs). KUSTOMIZE stays below v5.8.3, which needs a newer Go than go.mod's.
PROMTOOL  ?= v0.316.0
KUSTOMIZE ?= v5.8.2
deploy-check:
	GOBIN="$(CURDIR)/bin/tools" $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL)
	GOBIN="$(CURDIR)/bin/tools" $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE)
	./bin/tools/promtool check rules deploy/prometheus/alerts.yaml deploy/prometheus/ingest-alerts.yaml
	./bin/tools/promtool test rules deploy/prometheus/tests/*.test.yaml
	PATH="$(CURDIR)/bin/tools:$$PATH" DEPLOY_CHECK_REQUIRE=1 $(GO) -C deploy test -count=1 -run 'Kustomize|KEDA' ./...
## sdk-check: deliveries signed by the providers' own npm libraries (standardwebhooks, svix,
## @octokit/webhooks-methods), installed into a temporary directory, through the receiver (TestSDKSignedDeliveries).
## Skips with status 0 without node and npm or without network; not part of make test.
sdk-check:
	GO="$(GO)" ./scripts/sdk-check.sh

## image: the container image, tagged $(IMAGE):$(IMAGE_TAG) (the git describe of the checkout), with the build
## arguments `dedupeworker version` reports (the build context leaves .git out). Push it with docker push and name it
## in the images: entry of deploy/k8s/base/kustomization.yaml.
IMAGE     ?= ghcr.io/dedupeworker/dedupeworker
IMAGE_TAG ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
image:
	docker build -t $(IMAGE):$(IMAGE_TAG) --build-arg VERSION=$(IMAGE_TAG) \
	  --build-arg REVISION=$$(git rev-parse HEAD) --build-arg REVISION_TIME=$$(git log -1 --format=%cI) .

## bench: the benchmark harness (bench/, a module of its own so that its dependencies stay out of the worker's) —
## the worker against the server's own limit (floor), a naive worker and JetStream's built-in dedupe, with server
## and workers in their own processes (BENCHMARKS.md), and (-ingest) signed POSTs through `dedupeworker ingest`
## beside publishing straight to NATS; then the Go micro-benchmarks. It builds the worker and nats-server from this
## module. Three interleaved rounds (-repeat 3): every ratio and CPU µs/envelope figure is a median.
## BENCHFLAGS=-ingest=false leaves the receiver out; BENCHFLAGS=-repeat=1 makes it a single round. Relative paths in
## BENCHFLAGS and SCALEFLAGS are relative to bench/.
bench:
	$(GO) -C bench run . -repeat 3 -ingest $(BENCHFLAGS)
	$(MAKE) bench-go

## bench-quick: the same comparison in under a minute.
bench-quick:
	$(GO) -C bench run . -quick -ingest $(BENCHFLAGS)

## bench-go: micro-benchmarks of the hot paths (bytes/s, allocations) beside encoding/json, and in the bench module
## the JSON validators beside fastjson; BENCHMARKS.md has the before/after comparison commands (-count 6, benchstat).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/jsonscan/ ./hashing/ ./keys/ ./pipeline/ ./kvwindow/
	$(GO) -C bench test -run '^$$' -bench . -benchmem .

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) -C deploy vet ./...
	$(GO) -C bench vet ./...

## chaos: the fault suite's long variants (200,000 envelopes, more kills and freezes; ~8 minutes). Unlike make test
## (a fixed seed), chaos and soak draw a fresh DEDUPE_SEED each run and print it first; DEDUPE_SEED=n replays one.
chaos:
	@seed=$${DEDUPE_SEED:-$$(( $$(od -An -N4 -tu4 /dev/urandom) % 1000000 ))}; echo "make chaos: DEDUPE_SEED=$$seed"; \
	DEDUPE_SEED=$$seed DEDUPE_CHAOS=1 $(GO) test -count=1 -v -timeout 60m ./integration/
	DEDUPE_CLUSTER_TESTS=1 $(GO) test -count=1 -v -timeout 10m -run TestPlacementAndRebalance ./kvwindow/

## model: the exactly-once protocol explored exhaustively (pipeline/protocol/model, test code: docs/model.md; figures in
## RELIABILITY.md): protocol.Decide driven through every interleaving of two copies of one event, three deliveries
## each, two replicas and two faults, with both kinds of input stream, without and with forwarding while the window is
## down (no seed: the order of the search is fixed); prints the states explored, fails on any violation with the first
## trace of each invariant broken, then shows each earlier fix undone and the trace that finds it. make test runs a
## smaller bound.
model:
	DEDUPE_MODEL=full $(GO) test -count=1 -v -timeout 20m -run '^TestModel' ./pipeline/protocol/model/

## soak: a million envelopes through two replicas; throughput over time and flat RSS (RELIABILITY.md).
soak:
	@seed=$${DEDUPE_SEED:-$$(( $$(od -An -N4 -tu4 /dev/urandom) % 1000000 ))}; echo "make soak: DEDUPE_SEED=$$seed"; \
	DEDUPE_SEED=$$seed DEDUPE_SOAK=1 $(GO) test -count=1 -v -timeout 2h -run TestSoak ./integration/

## scale: fill a window to SCALE_N envelopes (default 5,000,000; 5 % retries, so ~4.75M keys) over SCALE_SHARDS
## buckets through the worker and nats-server in their own processes, in chunks of 500k; per chunk drain rate,
## claim latency, server heap/RSS and KV bytes per key; then the window commands, a SIGTERM and a SIGKILL restart
## and the oldest keys' retries (BENCHMARKS.md, "A window of millions of keys"). ~15 minutes at 5M on 2 cores and
## ~6 GiB of RAM; not part of make test. SCALEFLAGS passes more (e.g. -server-gomemlimit 2GiB).
SCALE_N      ?= 5000000
SCALE_SHARDS ?= 1
scale:
	$(GO) -C bench run . scale -n $(SCALE_N) -shards $(SCALE_SHARDS) $(SCALEFLAGS)

clean:
	rm -rf bin data
