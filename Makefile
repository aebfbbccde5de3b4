# Mnemos — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
SQLC := $(GO) tool -modfile=tools/go.mod sqlc
PKGS := ./...
# The bench tag builds `mnemos bench` (cmd/mnemos/bench.go): it drives a
# scripted model upstream, a test helper the product's binary leaves out.
# -p 3 on two cores: many integration packages wait (on Postgres, on a
# scripted model's latency, on a process restarting) while others link
# their race-built test binaries, the CPU work of a run.
TEST_FLAGS ?= -race -shuffle=on -count=1 -timeout=20m -tags bench -p 3

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## start everything in one process: embedded NATS, local Postgres, HTTP on :8080
	$(GO) run ./cmd/mnemos -target=all

DEMO_URL ?= http://127.0.0.1:8080
DEMO_KEY ?= mnemos-dev-key
.PHONY: demo
demo: ## the README's five-minute tour against a running server (make run): DEMO_URL, DEMO_KEY
	$(GO) run ./cmd/mnemos demo --url $(DEMO_URL) --api-key $(DEMO_KEY)

.PHONY: build
build: ## build bin/mnemos
	CGO_ENABLED=0 $(GO) build -tags grpcnotrace -trimpath -o bin/mnemos ./cmd/mnemos

.PHONY: test
test: ## unit and integration tests against real Postgres and NATS JetStream; then, each on its own, the hostile-load suite, the cluster tests and chaos once (a new seed each time)
	$(GO) test $(TEST_FLAGS) -skip '^($(CHAOS_TEST)|$(LEADER_TEST)|$(CLUSTER_BENCH))$$' $$($(GO) list $(PKGS) | grep -v /tests/hostile)
	$(GO) test -count=1 -timeout=15m ./tests/hostile/ # measures latency: without the race detector, alone on the machine
	$(MAKE) test-cluster
	$(MAKE) test-chaos CHAOS_RUNS=1

FAST_FLAGS ?= -short -shuffle=on -count=1 -timeout=10m
# tests/faults and tests/hostile run nothing under -short (proctest.Main):
# left out, their test binaries are not linked either.
.PHONY: test-fast
test-fast: ## unit tests and the in-process tests against Postgres and NATS (go test -short, no race detector): what runs Mnemos as processes (faults, hostile load, cluster, chaos), a browser or the real Claude Code and Codex CLIs skips
	env -u MNEMOS_TEST_CHROMIUM -u MNEMOS_CLAUDE_CODE_BIN -u MNEMOS_CODEX_BIN $(GO) test $(FAST_FLAGS) $$($(GO) list $(PKGS) | grep -v -E '/tests/(faults|hostile)$$')

CHAOS_TEST := TestClusterLosesNothingWhenNodesAndReplicasDie
LEADER_TEST := TestATargetStartedWhileTheClusterHasNoLeaderWaitsForIt
CLUSTER_BENCH := TestClusterIngestThroughput
CHAOS_RUNS ?= 3
# What the cluster tests print: each test's outcome, the chaos schedule and
# summary, and a failure's message (the processes' own logs are left out).
CLUSTER_LINES := '^(---|ok|FAIL|PASS)|chaos|cluster_test.go|system_test.go|Error Trace:|Error:|Messages:|panic'
.PHONY: test-cluster
test-cluster: ## the three-node JetStream cluster tests of tests/faults but chaos (make test-chaos): a target started without a leader
	set -o pipefail; $(GO) test -count=1 -timeout=10m -v -run '^$(LEADER_TEST)$$' ./tests/faults/ | grep -E $(CLUSTER_LINES)

.PHONY: test-chaos
test-chaos: ## the chaos schedule CHAOS_RUNS (3) times, each with its own seed (MNEMOS_CHAOS_SEED replays one; nodes sync always, MNEMOS_CHAOS_SYNC=default for the server's)
	set -o pipefail; $(GO) test -count=$(CHAOS_RUNS) -timeout=20m -v -run '^$(CHAOS_TEST)$$' ./tests/faults/ | grep -E $(CLUSTER_LINES)

.PHONY: bench-rss
bench-rss: ## the resident set of one mnemos -target=all as 1K to 10K sessions become active: one table (docs/performance.md), a few minutes
	set -o pipefail; MNEMOS_BENCH_RSS=1 $(GO) test -count=1 -timeout=20m -v -run '^TestRSSWithActiveSessions$$' ./tests/faults/ | grep -E '^(---|ok|FAIL|PASS)|[|] |RSS of|Error'

.PHONY: bench-cluster
bench-cluster: ## ingest on the three-node cluster with 1, 2, 3 accountants, JetStream sync default and always: one table (docs/scaling.md), about 5 minutes
	set -o pipefail; MNEMOS_BENCH_CLUSTER=1 $(GO) test -count=1 -timeout=15m -v -run '^$(CLUSTER_BENCH)$$' ./tests/faults/ | grep -E '^(---|ok|FAIL|PASS)|^\||CPU per turn|turns/s|JetStream sync'

# Every fuzz target, as <package>:<FuzzName>; add new ones here.
FUZZ_TARGETS := \
	./pkg/turn:FuzzDecode \
	./pkg/turn:FuzzContent \
	./pkg/turn:FuzzContentFastPathAgrees \
	./pkg/turn:FuzzEventFastPathAgrees \
	./pkg/turn:FuzzFastCheckAgreesWithSchema \
	./pkg/turn:FuzzIDRules \
	./pkg/claudecode:FuzzParse \
	./pkg/tokens:FuzzEstimate \
	./pkg/tokens:FuzzTextKindAgreesWithBranches \
	./pkg/memory:FuzzParseName \
	./pkg/memory:FuzzScopePath \
	./pkg/memory:FuzzParseDocument \
	./pkg/memory:FuzzIndex \
	./pkg/sessionnotes:FuzzSubstitute \
	./pkg/context/ctxedit:FuzzParse \
	./services/gateway/proxy:FuzzJSONWalk \
	./services/gateway/proxy:FuzzPlaceFollowsTheClient \
	./pkg/jsonvalid:FuzzValid \
	./pkg/openaiwire:FuzzResponsesRoundTrip \
	./pkg/openaiwire:FuzzChatRoundTrip \
	./pkg/retention:FuzzReportsError \
	./pkg/search:FuzzParse
# A count of executions, not a duration: Go 1.26's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" when a -fuzztime duration runs
# out on a busy machine (go.dev/issue/75804, fixed in Go 1.27); a count has no
# deadline to race.
FUZZTIME ?= 100000x
.PHONY: fuzz-short
fuzz-short: ## run every fuzz target (FUZZ_TARGETS) for FUZZTIME (100000x: that many inputs) each
	@set -e; for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s $$pkg; \
	done

BENCH_FLAGS ?=
.PHONY: bench
bench: ## mnemos bench: ingest (saturated and sustained), context assembly, pre-flight and the proxy's Messages and Responses doors, with raw JetStream and Postgres baselines and ratios
	$(GO) run -tags bench ./cmd/mnemos bench $(BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## the go benchmarks of tests/bench (the same driving code), 3 rounds each
	$(GO) test -run='^$$' -bench=. -benchtime=3x -count=1 ./tests/bench/

.PHONY: generate
generate: ## regenerate sqlc code from sql/ and migrations/
	$(SQLC) generate -f sql/sqlc.yaml

.PHONY: verify-generate
verify-generate: generate ## fail when committed generated code is stale
	@git diff --exit-code -- pkg/store/internal/dbsqlc || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- pkg/store/internal/dbsqlc)" || { echo "generated code has untracked files: run 'make generate' and commit"; exit 1; }

.PHONY: docs
docs: ## write the table of environment variables in docs/configuration.md from cmd/mnemos/configtable.go
	$(GO) run ./cmd/mnemos config -markdown -update docs/configuration.md

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## commit messages since the check came (internal/commitcheck), go vet and golangci-lint (v2, .golangci.yaml)
	$(GO) run ./internal/commitcheck
	$(GO) vet $(PKGS)
	$(GO) vet -tags bench ./cmd/mnemos
	$(GO) tool -modfile=tools/go.mod golangci-lint run $(PKGS)

.PHONY: migrate
migrate: ## apply migrations as MNEMOS_MIGRATE_DATABASE_URL (or the local server) and give the services' role login
	$(GO) run ./cmd/mnemos migrate

HELM := $(GO) tool -modfile=tools/go.mod helm
CHART := deploy/helm/mnemos

.PHONY: image
image: ## build the container image mnemos:local (Dockerfile)
	docker build -t mnemos:local .

.PHONY: compose-check
compose-check: ## validate docker-compose.yml with docker compose config (needs the compose plugin)
	@docker compose version >/dev/null 2>&1 || { echo "docker compose is not installed; 'go test -run TestCompose ./deploy' checks the file with the same loader"; exit 1; }
	docker compose config --quiet

.PHONY: helm-template
helm-template: ## render the Helm chart with its defaults (VALUES=file to add values)
	$(HELM) template mnemos $(CHART) $(if $(VALUES),-f $(VALUES))

.PHONY: helm-lint
helm-lint: ## helm lint the chart with its defaults and with production-like values
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/production-values.yaml

.PHONY: deploy-check
deploy-check: ## the chart against the Kubernetes schemas, compose, dashboard (Go tests)
	$(GO) test -count=1 ./deploy
