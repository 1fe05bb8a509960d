# The project's vocabulary. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
export GOTOOLCHAIN := local

BIN      := bin
HARNESS  := $(BIN)/sp-harness
# Two Go modules, one workspace (go.work): the service (the root) and its developer
# tooling (tools/devenv: harness, integration tests, bench, chaos, the local stack).
# ./... stops at a nested module, so every go command names both.
DEVENV   := ./tools/devenv
PKGS     := ./... $(DEVENV)/...
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Integration tests share one control plane per run; give slow machines room.
TEST_FLAGS ?= -race -count=1 -timeout 30m
# REAL_NODE=1 adds a real node (a real kubelet + containerd, root only) to cluster-up and
# run. make test asks for one unless REAL_NODE=0; where the machine cannot run one,
# sp-harness says why and the tests that need it are skipped.
test harness-build: REAL_NODE ?= 1

.PHONY: build image deploy undeploy test test-unit fuzz lint lint-api lint-chart generate check-generated cluster-up cluster-down harness-build run bench bench-limit model chaos chaos-ci chaos-explore clean

# The service binary carries its version (k8s-container-sp --version, /health): the
# nearest tag, else the commit, -dirty with uncommitted changes. VERSION=v1.2.3 to choose.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit the image's binary (--version) and labels name (make build's binary takes it,
# with any uncommitted changes, from Go's VCS stamp).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

build:
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/...
	go build -o $(BIN)/ $(DEVENV)/cmd/...

# The service's OCI image without a container engine, for linux/amd64 and linux/arm64,
# reproducible (the same commit, VERSION and REVISION give the same digest): an OCI layout
# in $(BIN)/image/oci and $(BIN)/image/k8s-container-sp.tar for docker load / podman load.
# Prints the digest. IMAGE=registry/repository:tag names it (default
# quay.io/dcm-project/k8s-container-service-provider:$(VERSION)); IMAGE_FLAGS=-push pushes it.
IMAGE ?=
IMAGE_FLAGS ?=
image:
	go run $(DEVENV)/cmd/sp-image -version $(VERSION) -revision $(REVISION) -out $(BIN)/image $(if $(IMAGE),-ref $(IMAGE)) $(IMAGE_FLAGS)

# Installs the service onto the harness cluster the way users install it: make image's
# image pushed to the real node's registry under its name, the Helm chart
# (deploy/helm/k8s-container-sp) with Helm's library, its pods on the real node. Run after
# `export $(make cluster-up REAL_NODE=1)`; prints the pods' URLs (SP_URL=...).
# REPLICAS=2 runs two. make undeploy removes it.
REPLICAS ?= 1
deploy: image $(HARNESS)
	@$(HARNESS) deploy -image $(BIN)/image/oci -ref $(or $(IMAGE),quay.io/dcm-project/k8s-container-service-provider:$(VERSION)) -replicas $(REPLICAS)

undeploy: $(HARNESS)
	@$(HARNESS) undeploy

$(HARNESS): FORCE
	@go build -o $(HARNESS) $(DEVENV)/cmd/sp-harness
FORCE:

# Builds the control plane if needed (progress is printed), starts one for the whole run
# (with the real node, see REAL_NODE), runs every test of both modules (unit and
# integration) with -race, and stops it all; then the chaos run's planted bug (its own
# build tag).
test: $(HARNESS)
	$(HARNESS) build -real-node=$(if $(filter 1,$(REAL_NODE)),true,false)
	$(HARNESS) exec -real-node=$(if $(filter 1,$(REAL_NODE)),true,false) -- go test $(TEST_FLAGS) $(PKGS)
	go test -count=1 -tags chaosbug -run PlantedBug ./internal/app/

# Unit tests only: no control plane.
test-unit:
	@echo "test-unit: go test -short (no control plane) of the service and of tools/devenv"
	go test -short -race -count=1 $(PKGS)
	go test -count=1 -tags chaosbug -run PlantedBug ./internal/app/

# Go native fuzzing: each target in turn for FUZZTIME, starting from its committed seed
# corpus (testdata/fuzz/<target>/). A failing input is written there by go test and so
# becomes a regression test that plain go test runs. make fuzz FUZZTIME=1m for longer.
# A count, not a duration: Go 1.26's fuzzer can fail a duration's end with "context
# deadline exceeded" on a busy machine (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
fuzz:
	go test -run='^$$' -fuzz='^FuzzCreateRequest$$' -fuzztime=$(FUZZTIME) ./internal/httpapi
	go test -run='^$$' -fuzz='^FuzzPageToken$$' -fuzztime=$(FUZZTIME) ./internal/httpapi
	go test -run='^$$' -fuzz='^FuzzValidateAndBuild$$' -fuzztime=$(FUZZTIME) ./internal/container
	go test -run='^$$' -fuzz='^FuzzStatusOf$$' -fuzztime=$(FUZZTIME) ./internal/container
	go test -run='^$$' -fuzz='^FuzzImagePolicy$$' -fuzztime=$(FUZZTIME) ./internal/container

# api/v1alpha1/openapi.yaml is the contract; the server code (api/v1alpha1/api.gen.go)
# and the Go client (pkg/client/client.gen.go) are generated from it.
generate:
	go generate ./api/... ./pkg/client

# Fails when the checked-in generated code does not match openapi.yaml.
check-generated: generate
	@git diff --exit-code -- api/ pkg/client/ || { echo "api/v1alpha1/api.gen.go or pkg/client/client.gen.go is stale: run make generate and commit"; exit 1; }

# Spectral (pinned in tools/spectral, from npm) with its OpenAPI rules and ours for the
# AEP points DCM checks; the fixture proves every custom rule fires.
SPECTRAL := tools/spectral/node_modules/.bin/spectral
$(SPECTRAL): tools/spectral/package.json tools/spectral/package-lock.json
	cd tools/spectral && npm ci --no-audit --no-fund --loglevel=error
	@touch $(SPECTRAL)

lint-api: $(SPECTRAL)
	$(SPECTRAL) lint --fail-severity warn --ruleset tools/spectral/.spectral.yaml api/v1alpha1/openapi.yaml
	@out=$$($(SPECTRAL) lint --ruleset tools/spectral/.spectral.yaml tools/spectral/testdata/violations.yaml 2>&1); \
	for rule in $$(grep -E '^  [a-z-]+:$$' tools/spectral/.spectral.yaml | tr -d ' :' | grep -E '^(aep|dcm)-'); do \
	  echo "$$out" | grep -q " $$rule " || { echo "custom rule $$rule did not fire on the violations fixture"; exit 1; }; \
	done; echo "custom rules: each fires on tools/spectral/testdata/violations.yaml"

# Helm, built once from the Go module proxy into the per-user cache the harness uses
# (shared by every checkout; SP_HARNESS_CACHE moves it): the first build takes minutes.
# tools/devenv/go.mod requires the same version for the chart's tests
# (TestMakefileHelmIsTheLibrarysVersion keeps them equal).
HELM_VERSION := v3.22.0
TOOLS_CACHE  ?= $(or $(SP_HARNESS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/k8s-container-sp)
HELM         := $(TOOLS_CACHE)/helm-$(HELM_VERSION)/helm
CHART        := deploy/helm/k8s-container-sp
$(HELM):
	@echo "building helm $(HELM_VERSION) into $(dir $(HELM)) (first time: a few minutes)"
	GOBIN=$(dir $(HELM)) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# The chart: helm lint, a render with the defaults and with a DCM-like values file, and a
# values file with a wrong type must be refused naming the field. (What the rendered
# objects contain is tested in tools/devenv/chart.)
lint-chart: $(HELM)
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART)/testdata/dcm-values.yaml
	$(HELM) template k8s-container-sp $(CHART) --namespace dcm-containers > /dev/null
	$(HELM) template k8s-container-sp $(CHART) --namespace dcm -f $(CHART)/testdata/dcm-values.yaml > /dev/null
	@if out=$$($(HELM) template dcm $(CHART) -f $(CHART)/testdata/wrong-type.yaml 2>&1); then \
	  echo "lint-chart: $(CHART)/testdata/wrong-type.yaml rendered: values.schema.json does not refuse it"; exit 1; \
	elif ! echo "$$out" | grep -q "/replicas"; then \
	  echo "lint-chart: the wrong type was refused without naming the field (replicas):"; echo "$$out"; exit 1; \
	fi; echo "lint-chart: testdata/wrong-type.yaml is refused, naming the field: $$(echo "$$out" | grep /replicas)"

lint: check-generated lint-api lint-chart
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS)
	go vet -tags chaosbug ./internal/app/
	go run $(STATICCHECK) $(PKGS)
	@# Each module requires exactly what it imports: the service's go.mod names no tooling.
	go mod tidy -diff
	cd tools/devenv && go mod tidy -diff

# Builds the control-plane binaries (first time: 10-20 minutes) without starting anything.
harness-build: $(HARNESS)
	@echo "harness-build: building what is missing of etcd, Kubernetes, kwok and the DCM registry$(if $(filter 1,$(REAL_NODE)), (and the kubelet),) into the cache (first time: 10-20 minutes)"
	$(HARNESS) build -real-node=$(if $(filter 1,$(REAL_NODE)),true,false)

# Starts a control plane, NATS with JetStream and the DCM registry in the background; prints
# KUBECONFIG, SP_K8S_KUBECONFIG, SP_NATS_URL and DCM_REGISTRATION_URL (export $(make
# cluster-up)). REAL_NODE=1 adds the real node and its image registry, printed as
# REGISTRY=127.0.0.1:PORT (bin/sp-harness push-image IMAGE.tar NAME puts your own image
# there; the node pulls every name from it and from nowhere else).
cluster-up: $(HARNESS)
	@$(HARNESS) up -real-node=$(if $(filter 1,$(REAL_NODE)),true,false)

# Stops all that cluster-up started (and its real node), by PID, and cleans up.
cluster-down: $(HARNESS)
	@$(HARNESS) down

# The whole stack on this machine: control plane + kwok, NATS, the DCM registry and the
# service on http://127.0.0.1:8080, registered. Prints a banner; Ctrl-C stops it all.
# SP_K8S_KUBECONFIG / SP_NATS_URL / DCM_REGISTRATION_URL use existing parts instead.
# REAL_NODE=1 adds the real node and runs the service's containers there.
run:
	@go build -o $(BIN)/sp-local $(DEVENV)/cmd/sp-local
	@go build -o $(HARNESS) $(DEVENV)/cmd/sp-harness
	@$(BIN)/sp-local -real-node=$(if $(filter 1,$(REAL_NODE)),true,false)

# Measures the service against the Kubernetes API in one fresh environment; prints a
# table and writes docs/reports/benchmarks.md and docs/reports/benchmarks.json. BENCH_FLAGS=-sizes=1000,5000,10000
BENCH_FLAGS ?=
bench: $(HARNESS)
	$(HARNESS) build
	go run $(DEVENV)/cmd/sp-bench -limit-from=docs/reports/benchmarks-limit.json $(BENCH_FLAGS)

# The memory at the default limits (SP_MAX_CONTAINERS containers of SP_CONTAINER_MAX_BYTES),
# in a fresh environment of its own (minutes on 2 CPUs: kept out of make bench, which takes
# about 30). Writes docs/reports/benchmarks-limit.json, which make bench's report shows with its date.
bench-limit: $(HARNESS)
	$(HARNESS) build
	go run $(DEVENV)/cmd/sp-bench -only=memory-limit -only-out=docs/reports/benchmarks-limit.json

# The capacity model (no cluster): the service's real store, API and status controller fed
# by an in-process list-watch server with 1,000, 25,000 and 100,000 running containers, each size
# in a fresh process; writes docs/reports/model.md and docs/reports/model.json (tools/devenv/model).
# MODEL_FLAGS=-sizes=1000,10000 for a quick one, -out=DIR to write elsewhere.
MODEL_FLAGS ?=
model:
	go build -o $(BIN)/sp-model $(DEVENV)/cmd/sp-model
	$(BIN)/sp-model -sizes 1000,25000,100000 $(MODEL_FLAGS)

# Seeded fault injection with an invariant checker (docs/reports/reliability.md). SEED=<n> replays
# a run; CHAOS_FLAGS=-duration=10m for a longer one. The report goes to
# .harness/chaos/report/ (printed); CHAOS_FLAGS=-out=docs/reports rewrites the committed one.
CHAOS_FLAGS ?=
chaos: $(HARNESS)
	$(HARNESS) build
	go run $(DEVENV)/cmd/sp-chaos $(if $(SEED),-seed $(SEED)) $(CHAOS_FLAGS)

# CI's chaos gate: fixed seeds only, so a submission never lands or fails by chance. Each
# seed that ever found a bug joins CHAOS_CI_SEEDS once the bug is fixed (see
# docs/reports/reliability-runs.md). Reports go to a temporary folder.
# A seed is SEED or SEED:DURATION (a schedule depends on its duration: a seed found with
# 3m is replayed with 3m); CHAOS_CI_DURATION is the duration of a bare SEED.
CHAOS_CI_SEEDS ?= 7 1475124511 114630519:3m 350101:5m 350102:5m 350103:5m 470102:5m
CHAOS_CI_DURATION ?= 1m
chaos-ci: $(HARNESS)
	$(HARNESS) build
	go build -o $(BIN)/sp-chaos $(DEVENV)/cmd/sp-chaos
	out=$$(mktemp -d) && for s in $(CHAOS_CI_SEEDS); do \
	  seed=$${s%%:*}; dur=$${s#*:}; [ "$$dur" = "$$s" ] && dur=$(CHAOS_CI_DURATION); \
	  echo "chaos-ci: seed $$seed for $$dur"; mkdir -p $$out/$$seed && \
	  $(BIN)/sp-chaos -seed $$seed -duration $$dur -dir .harness/chaos-ci -out $$out/$$seed > $$out/$$seed.md || exit 1; \
	done && echo "chaos-ci: seeds $(CHAOS_CI_SEEDS) passed; reports in $$out"

# Exploration, by hand, never in CI: CHAOS_RUNS runs of CHAOS_DURATION each with a random
# seed (printed first). A seed that fails is a bug: log it in docs/reports/reliability-runs.md, fix
# it, then add it to CHAOS_CI_SEEDS.
CHAOS_RUNS ?= 3
CHAOS_DURATION ?= 3m
chaos-explore: $(HARNESS)
	$(HARNESS) build
	go build -o $(BIN)/sp-chaos $(DEVENV)/cmd/sp-chaos
	out=$$(mktemp -d) && for i in $$(seq $(CHAOS_RUNS)); do \
	  mkdir -p $$out/$$i && $(BIN)/sp-chaos -duration $(CHAOS_DURATION) -dir .harness/chaos-explore -out $$out/$$i > $$out/$$i.md || { echo "chaos-explore: run $$i failed; report in $$out/$$i"; exit 1; }; \
	done && echo "chaos-explore: $(CHAOS_RUNS) random seeds passed; reports in $$out"

clean:
	rm -rf $(BIN) .harness
