# llm-prober: `make run` and `make test` are all a new machine needs.
GO              ?= go
BINARY          ?= llm-prober
PKG             := github.com/llm-prober/llm-prober
STATICCHECK     := honnef.co/go/tools/cmd/staticcheck@v0.8.2
RUN_CONFIG      ?= examples/llm-prober.yml
TEST_FLAGS      ?= -race -timeout 15m

VERSION   ?= $(shell cat VERSION 2>/dev/null || echo 0.0.0-dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_USER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)

# The Dockerfile builds with `make build`, so the image's binary and this one
# are made the same way: trimmed paths, version stamped, and cgo on, because
# GPU metrics come through go-nvml, which calls libnvidia-ml.so.1 through
# cgo (a C compiler at build time, glibc at run time). `make build-nonvml`
# makes a fully static binary (CGO_ENABLED=0, -tags nonvml) without GPU
# metrics, for scratch images and hosts that never have GPUs.
LDFLAGS := -s -w \
	-X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=$(BRANCH) \
	-X github.com/prometheus/common/version.BuildUser=$(BUILD_USER) \
	-X github.com/prometheus/common/version.BuildDate=$(BUILD_DATE)

.PHONY: all build build-nonvml build-check run test lint fmt fmt-check mod-check helm vet staticcheck unit promtool alertmanager chromium prometheus3 proto clean mixin dashboards deploy-rules soak soak-long fuzz bench conformance gpu-check alert-backtest alert-backtest-subset

all: build

# netgo and osusergo: Go's own DNS resolver and user lookup, so name
# resolution behaves the same in the cgo build and the static one; naming
# them makes llm_prober_build_info's tags label (read from the binary's build
# settings) say how it was built.
BUILD_TAGS ?= netgo,osusergo

# go-nvml's generated cgo wrappers call functions NVML 13 marks deprecated
# (kept for older drivers); gcc's warnings about them are noise.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

build:
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/llm-prober

build-nonvml:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILD_TAGS),nonvml' -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/llm-prober

# Both shipped builds are made as above and run: the default one (cgo) here;
# the static one is also checked for having no ELF interpreter or shared
# libraries by cmd/llm-prober's TestStaticNonvmlBuild in unit.
BUILD_CHECK_DIR ?= $(or $(TMPDIR),/tmp)/llm-prober-build-check
build-check:
	@mkdir -p $(BUILD_CHECK_DIR)
	$(MAKE) --no-print-directory build BINARY=$(BUILD_CHECK_DIR)/llm-prober
	$(BUILD_CHECK_DIR)/llm-prober --version
	$(MAKE) --no-print-directory build-nonvml BINARY=$(BUILD_CHECK_DIR)/llm-prober-nonvml
	$(BUILD_CHECK_DIR)/llm-prober-nonvml --version
	@rm -rf $(BUILD_CHECK_DIR)

# The simulated LLM server and the prober probing it; Ctrl-C stops both.
run: build
	scripts/run-demo.sh ./$(BINARY) $(RUN_CONFIG)

# Everything that checks the project. CI runs exactly this.
test: fmt-check mod-check vet staticcheck promtool alerts alert-backtest-subset build-check unit

# Go commands the tests need, built once into a cache that outlives the
# checkout (scripts/ensure-go-tool.sh).
TOOLS_CACHE ?= $(HOME)/.cache/llm-prober/tools
HELM_VERSION := v3.22.0
HELM_DIR     := $(TOOLS_CACHE)/helm-$(HELM_VERSION)

# With Chromium installed, its browser test must run (not skip); likewise
# the Helm chart's test with helm built, and the histogram-mode test's 3.x
# modes with Prometheus 3 built. promtool, Prometheus, Alertmanager and
# amtool are installed or make fails, so their tests always run.
unit: promtool alertmanager chromium helm prometheus3
	LLM_PROBER_HELM=$(HELM_DIR)/helm \
	LLM_PROBER_REQUIRE_HELM=$$(test -x "$(HELM_DIR)/helm" && echo 1) \
	LLM_PROBER_REQUIRE_PROMTOOL=1 \
	LLM_PROBER_REQUIRE_ALERTMANAGER=1 \
	LLM_PROBER_REQUIRE_CHROMIUM=$$(test -x "$${CHROMIUM:-/usr/bin/chromium}" && echo 1) \
	LLM_PROBER_PROMETHEUS3="$(PROMETHEUS3)" \
	LLM_PROBER_REQUIRE_PROMETHEUS3=$$(test -x "$(PROMETHEUS3)" && echo 1) \
	$(GO) test $(TEST_FLAGS) ./...

lint: fmt-check mod-check vet staticcheck

# go.mod and go.sum say exactly what the code imports (go mod tidy changes
# nothing) and every downloaded module matches its checksum.
mod-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) mod verify

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "Not gofmt-formatted (run make fmt):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

# promtool (Debian's prometheus package) checks /metrics and, later, alerts.
promtool:
	@scripts/ensure-promtool.sh

# Alertmanager and amtool (Debian's prometheus-alertmanager): test/e2e
# runs a real Alertmanager with the mixin's example configuration
# (mixin/alertmanager/alertmanager.yml), which amtool checks.
alertmanager:
	@scripts/ensure-alertmanager.sh

# Headless Chromium (Debian's chromium) loads the status page in
# cmd/llm-prober's browser test. A machine that cannot install it (no
# apt-get, no root, offline: exit 3) runs everything else, saying why.
chromium:
	@scripts/ensure-chromium.sh; rc=$$?; \
	if [ $$rc = 3 ]; then echo "make: continuing without Chromium; TestStatusPageInBrowser will skip" >&2; \
	elif [ $$rc != 0 ]; then exit $$rc; fi

# helm (for `helm lint` and `helm template` of deploy/helm/llm-prober):
# built from the module proxy once; a machine that cannot build it runs
# everything else, saying why.
helm:
	@GO="$(GO)" scripts/ensure-go-tool.sh "$(HELM_DIR)/helm" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); rc=$$?; \
	if [ $$rc = 3 ]; then echo "make: continuing without helm; the Helm chart test will skip" >&2; \
	elif [ $$rc != 0 ]; then exit $$rc; fi

# Prometheus 3 for test/e2e's TestHistogramModes (native and classic
# histograms stored together, classic ones converted to native): no Debian
# package, so built from the module proxy into a cache outside the tree
# (about 6 minutes on 2 cores, once; CI should keep ~/.cache/llm-prober).
# A machine that cannot build it (no go, offline: exit 3) runs everything
# else, saying why.
PROMETHEUS3 ?= $(HOME)/.cache/llm-prober/prom3/prometheus
# v0.316.0 is the Go module version of Prometheus 3.16.
PROMETHEUS3_VERSION := v0.316.0
prometheus3:
	@GO="$(GO)" scripts/ensure-go-tool.sh "$(PROMETHEUS3)" github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS3_VERSION); rc=$$?; \
	if [ $$rc = 3 ]; then echo "make: continuing without Prometheus 3; the 3.x modes of TestHistogramModes will skip" >&2; \
	elif [ $$rc != 0 ]; then exit $$rc; fi

# Regenerates internal/tritonpb from its .proto with protoc (Debian
# protobuf-compiler) and pinned plugins; the generated code is committed, so
# only someone changing the .proto needs this.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTO_BIN          := $(CURDIR)/.bin
proto:
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	GOBIN=$(PROTO_BIN) $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(PROTO_BIN) $(GO) install $(PROTOC_GEN_GO_GRPC)
	cd internal/tritonpb && PATH=$(PROTO_BIN):$$PATH protoc --proto_path=. \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_service.proto

# Alert and recording rules: syntax, and unit tests of every alert.
alerts: promtool
	promtool check rules alerts/llm-prober-rules.yml
	promtool test rules alerts/llm-prober-rules.test.yml alerts/llm-prober-rules.week.test.yml

# The alert backtest (mixin/backtest; docs/alerting.md): the shipped rules
# evaluated by Prometheus' own rule engine over a simulated prober, every
# scenario (outages, regressions, noise, restarts, removals) at every probe
# rate from 1/10s to 1/5min and every objective; rewrites the tables between
# the backtest markers of docs/alerting.md and lists the missed targets.
# BACKTEST_FLAGS e.g. -seeds 1 -scenarios hard-down,ttft-2x, or -docs - to
# print instead of writing.
BACKTEST_FLAGS ?=
alert-backtest:
	$(GO) run ./mixin/backtest/cmd/alert-backtest $(BACKTEST_FLAGS)

# The backtest's bounded subset, asserting issue 26's targets at objective
# 99% (and 30 days of noise at 1/10s and 1/5min), with the check that its
# chunked evaluation equals promtool's. Not under -race (its test file is
# built without race; unit's go test -race skips it): the simulation is one
# goroutine per world, and the detector would multiply its minutes.
alert-backtest-subset:
	$(GO) test ./mixin/backtest -run '^(TestAlertBacktestSubset|TestChunkedEqualsExact)$$' -count=1 -v -timeout 30m

# Generated files, from the monitoring mixin (mixin/*.libsonnet, evaluated
# by go-jsonnet in Go: no jsonnet binary): the Grafana dashboards
# (dashboards/*.json), the rules file (alerts/llm-prober-rules.yml), the
# Kubernetes PrometheusRule and the Helm chart's copy of the rules. Tests
# fail when they drift (mixin's TestGeneratedFilesUpToDate).
mixin:
	$(GO) run ./mixin/gen

# The dashboards come from the mixin, with the rules.
dashboards: mixin

# Only the Kubernetes PrometheusRule and the Helm chart's copy of the rules,
# from alerts/llm-prober-rules.yml as it is (make mixin writes them too).
deploy-rules:
	$(GO) run ./deploy/gen

# The real binary against the simulator with every schedule kind and every
# fault for SOAK_DURATION (make test runs the same for 60s): every planned
# probe accounted for, no goroutine growth, flat RSS, no panics, /metrics
# always answering. SOAK_RACE=1 builds the prober with the race detector.
SOAK_DURATION ?= 10m
soak:
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test ./test/soak -run '^TestSoak$$' -count=1 -v -timeout 4h

# The fleet soak (docs/performance.md): SOAK_LONG_PROBES probes every 15 s
# against the simulator with faults for SOAK_LONG_DURATION, remote writing
# to a real Prometheus that also scrapes the prober every 15 s: RSS and
# goroutines over time, probes accounted, samples sent vs stored. Opt-in:
# make test compiles it and skips it.
SOAK_LONG_DURATION ?= 1h
SOAK_LONG_PROBES   ?= 1000
soak-long:
	SOAK_LONG_DURATION=$(SOAK_LONG_DURATION) SOAK_LONG_PROBES=$(SOAK_LONG_PROBES) LLM_PROBER_REQUIRE_PROMTOOL=1 \
		$(GO) test ./test/soaklong -run '^TestSoakLong$$' -count=1 -v -timeout 3h

# Performance harness (docs/performance.md), about 20 minutes: the
# simulator in its own process; series per probe in each histogram form;
# client overhead against its ground truth at 1, 16 and 64 streams; CPU per
# token of the prober and of the daemon's path vs a raw net/http client in
# interleaved triples, with the chunk gaps the simulator produced; the
# daemon with 100 and 1000 probes (RSS, /metrics); bursts of 64 at periods
# of 1 s and 5 s, written and arrived; 200/s constant and Poisson; the
# hot-path and /metrics benchmarks. Prints plain tables to diff between
# runs. `make test` only compiles, vets and unit-tests its arithmetic.
# BENCH_FLAGS e.g. -sections bursts -bursts 20 -trace-dir /tmp/trace;
# -sections scale (not run by default, about 12 minutes): idle daemons of
# 1,000 and 5,000 probes scraped every 15 s, CPU per request at 1/60 s
# and 1/5 s.
BENCH_FLAGS ?=
bench: build
	$(GO) run ./test/perf/cmd/perf -bin ./$(BINARY) -go $(GO) $(BENCH_FLAGS)

# Every fuzz target (found by scripts/fuzz.sh) for FUZZTIME each; the seed
# corpora in testdata/fuzz run as plain tests in make test.
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# Conformance against a real llama.cpp llama-server on CPU with a tiny
# random-weight model (docs/conformance.md): one-shot probes, curl, the
# daemon at concurrency 1 and 4, llm_server_* vs llamacpp:*, cancellation,
# prefix-cache probes, embeddings and rerank (RERANK_MODEL: a random
# reranker, default tiny-rerank.gguf beside MODEL). Opt-in, not part of
# `make test`: CI cannot fetch llama.cpp. Recipe for all three in the
# header of scripts/conformance.sh. Exits non-zero on any failed probe.
conformance:
	@if [ -z "$(LLAMA_SERVER)" ] || [ -z "$(MODEL)" ]; then \
		echo "make conformance: set LLAMA_SERVER=/path/to/llama-server and MODEL=/path/to/model.gguf" >&2; \
		echo "  (how to build both: header of scripts/conformance.sh, docs/conformance.md)" >&2; exit 2; fi
	LLAMA_SERVER="$(LLAMA_SERVER)" MODEL="$(MODEL)" GO="$(GO)" scripts/conformance.sh

# The GPU collector against nvidia-smi on a host with an NVIDIA GPU
# (scripts/gpu_check.py; results in docs/gpu.md). Opt-in: CI has no GPU.
# Builds both binaries here; on a GPU host without Go, copy them over and
# run the script directly, as its header says.
GPU_CHECK_OUT ?= gpu-check-out
gpu-check:
	@mkdir -p $(BUILD_CHECK_DIR)
	$(MAKE) --no-print-directory build
	$(MAKE) --no-print-directory build-nonvml BINARY=$(BUILD_CHECK_DIR)/llm-prober-nonvml
	python3 scripts/gpu_check.py ./$(BINARY) $(BUILD_CHECK_DIR)/llm-prober-nonvml $(GPU_CHECK_OUT)

clean:
	rm -f $(BINARY)
	$(GO) clean -testcache
