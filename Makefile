# kubesearch — build, test and the test bed. `make check` is what CI runs (see .ci/run).
GO ?= go
# Go 1.27.3, which the go command fetches from the module proxy on first use (about 10 s): go1.26.8's
# standard library has known vulnerabilities that kubesearch reaches (make vulncheck). Every target,
# script and test started from here builds with it.
export GOTOOLCHAIN := go1.27.3
E2E_TIMEOUT ?= 60m

.PHONY: build test e2e check fuzz vulncheck testbed-build testbed-up testbed-down e2e-ha chaos run simulate fmt bench-collector bench-indexer bench-query bench-facade bench-facade-memory bench-page bench-freshness bench-roll bench-stores bench-fleet-watch bench-compare bench soak

# bin/kubesearch, and bin/kubectl-search: kubectl runs it as `kubectl search` once it is on PATH.
build:
	$(GO) build -o bin/ ./cmd/kubesearch ./cmd/kubectl-search

# Unit tests: no services needed.
test:
	$(GO) vet ./...
	$(GO) vet -tags 'e2e bench chaos soak' ./tests/...
	$(GO) test -race -count=1 ./...

# Integration and end-to-end tests against the test bed. They reuse a running test bed (make testbed-up)
# or start one for the run and stop it afterwards. TestSearchPage drives Debian's Chromium, installed
# first with apt-get when /usr/bin/chromium is missing (the test fails without it, never skips).
e2e:
	bash tests/browser/install-chromium.sh
	$(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./tests/e2e/...

# Every go test -fuzz target (FuzzXxx in any package's test files, found by tests/tools/fuzz.sh), one
# after another for FUZZTIME each. A failing input lands in <package>/testdata/fuzz/<Target>/: commit
# it with the fix, and `make test` replays it from then on.
FUZZTIME ?= 10s
# make check fuzzes each target for CHECK_FUZZTIME, keeping the whole run near two minutes on 2 cores.
CHECK_FUZZTIME ?= 6s

fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash tests/tools/fuzz.sh

# govulncheck ./... against an offline database built from the golang.org/x/vulndb module (the module
# proxy is reachable, vuln.go.dev is not); database and scanner cached in ~/.cache/kubesearch. Fails when
# the code reaches a known-vulnerable function (VULNDB_VERSION, default latest; GOVULNCHECK_VERSION).
vulncheck:
	GO=$(GO) bash tests/tools/vulncheck.sh

# The README's test command: unit tests, fuzzing, govulncheck, then a fresh test bed, the e2e tests, and
# the test bed stopped whatever happened.
check: test
	$(MAKE) fuzz FUZZTIME=$(CHECK_FUZZTIME)
	$(MAKE) vulncheck
	bash tests/testbed/up.sh
	$(MAKE) e2e; status=$$?; bash tests/testbed/down.sh; exit $$status
	$(MAKE) e2e-ha HA_TESTS='^TestHANodeFaultKinds$$'

# The high availability tests on their own test bed: three Kafka brokers and three OpenSearch nodes,
# one member cluster (KUBESEARCH_TESTBED_HA=1, in .testbed like the other; it replaces a running one).
# CI runs one fault of each kind (TestHANodeFaultKinds: kill -9, SIGSTOP, partition); the default,
# '^TestHA', runs every node of every kind (the hangs in tests built with the chaos tag).
HA_TESTS ?= ^TestHA
e2e-ha:
	KUBESEARCH_TESTBED_HA=1 KUBESEARCH_TESTBED_MEMBERS=1 bash tests/testbed/up.sh
	$(GO) test -tags 'e2e chaos' -count=1 -timeout 20m -v -run '$(HA_TESTS)' ./tests/e2e/; status=$$?; bash tests/testbed/down.sh; exit $$status

# The fault run of issue 26 (TestChaos, README "Chaos"): the whole product replicated on the HA test
# bed with two members under steady churn, one fault after another (kill -9, SIGSTOP and SIGTERM of
# every member kube-apiserver, broker, OpenSearch node and component replica), each checked for
# convergence, loss, ghosts, watch gaps and REST errors. It reuses a running HA test bed with two
# members ($$KUBESEARCH_TESTBED_DIR, default .testbed) or starts one and stops it afterwards.
# CHAOS_FAULTS=regex runs the faults whose names match ("kafka-2 kill -9", "opensearch-1 SIGSTOP",
# "collector-a SIGTERM", ...). Report: bench/results/<date>-chaos/report.md and timeline.svg (CHAOS_REPORT_DIR).
CHAOS_FAULTS ?=
chaos:
	@env="$${KUBESEARCH_TESTBED_DIR:-.testbed}/env"; started=; \
	if ! { [ -f "$$env" ] && grep -q '^export KUBESEARCH_TESTBED_HA=1$$' "$$env" && [ "$$(. "$$env"; echo $$KUBESEARCH_TESTBED_CLUSTERS | wc -w)" -ge 2 ]; }; then \
	  KUBESEARCH_TESTBED_HA=1 KUBESEARCH_TESTBED_MEMBERS=2 bash tests/testbed/up.sh || exit 1; started=1; \
	fi; \
	CHAOS_FAULTS='$(CHAOS_FAULTS)' $(GO) test -tags 'e2e chaos' -count=1 -timeout 150m -v -run '^TestChaos$$' ./tests/e2e/; status=$$?; \
	if [ -n "$$started" ]; then bash tests/testbed/down.sh; fi; exit $$status

testbed-build:
	bash tests/testbed/build.sh

testbed-up:
	bash tests/testbed/up.sh

testbed-down:
	bash tests/testbed/down.sh

# The demo: 3 member clusters with sample workloads, kubesearch standalone over them in the foreground,
# and queries to paste once it is ready (demo/run.sh). Ctrl-C stops everything it started.
run:
	bash demo/run.sh

# The fleet simulator (README "Fleet simulator"): SIM_ARGS (default 200 clusters of 2,000 objects)
# written to the Kafka of $$KAFKA_BROKERS, or when it is unset of the test bed ($$KUBESEARCH_TESTBED_DIR,
# default .testbed), as their collectors would write them; with --listen or --churn-rate in SIM_ARGS it
# runs until Ctrl-C.
SIM_ARGS ?= --clusters 200 --objects 2000

simulate: build
	@env="$${KUBESEARCH_TESTBED_DIR:-.testbed}/env"; if [ -z "$$KAFKA_BROKERS" ] && [ -f "$$env" ]; then . "$$env"; fi; \
	bin/kubesearch simulate --kafka-brokers "$${KAFKA_BROKERS:?set KAFKA_BROKERS or start the test bed (make testbed-up)}" $(SIM_ARGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every benchmark below (and the freshness one) on the running test bed, sized by SCALE (small: a few
# minutes' smoke run; default: about 15 minutes on 2 cores; large: the issues' sizes, about an hour;
# BENCHES="stores query" runs only those), then bench/report: bench/results/<date>.json and .md (every
# figure beside its goal), SVG plots, and the README's generated section under "Measured".
SCALE ?= default

bench:
	GO=$(GO) SCALE=$(SCALE) bash bench/run.sh

# The soak (README "Soak") on the running test bed: SOAK_MINUTES (default 60) of churn, searches,
# facade LISTs and watchers against one pipeline, memory, goroutines, open point-in-times and Kafka
# lag read every SOAK_SAMPLE (default 15s); the table and plots go to bench/results/<date>-soak/, and
# it fails on a series that does not level off. Not in CI: it takes the hour.
SOAK_MINUTES ?= 60
SOAK_SAMPLE ?= 15s

soak:
	GO=$(GO) SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SAMPLE=$(SOAK_SAMPLE) bash bench/soak.sh

# Collector list benchmark on the test bed (10,000 realistic Pods in member1; BENCH_PODS to change).
bench-collector:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 30m -v -run TestBenchCollectorList ./tests/e2e/

# Indexer benchmark on the test bed: 50,000 Pod documents through Kafka and the indexer, beside a raw
# _bulk replay of the same documents (BENCH_DOCS to change).
bench-indexer:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 30m -v -run TestBenchIndexer ./tests/e2e/

# Query API benchmark on the test bed: 100,000 Pod documents (three clusters) through Kafka and the
# indexer, then p50/p99 of 1,000 queries of each kind (BENCH_QUERY_PODS, BENCH_QUERIES to change).
bench-query:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 60m -v -run TestBenchQuery ./tests/e2e/

# Kubernetes facade benchmark on the test bed: fleet LIST against a loop over the members and one
# apiserver, informer sync, watch delivery latency to 100 watchers, query API memory under 10
# concurrent LISTs (3,000 Pods per member; BENCH_FACADE_PODS, BENCH_WATCHERS, BENCH_WATCH_RATE to change).
bench-facade:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 45m -v -run 'TestBenchFacade$$' ./tests/e2e/

# Member write → searchable p50/p99 at a steady 200 creates/s over the members (BENCH_FRESHNESS_RATE,
# BENCH_FRESHNESS_SECONDS), pipeline at the product's defaults.
bench-freshness:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 20m -v -run 'TestBenchFreshness$$' ./tests/e2e/

# The search page's first results on the standalone store at 100,000 Pods (BENCH_PAGE_PODS): its two
# requests' p50/p99 over HTTP and, in headless Chromium, navigation to the first rows. Goal 300 ms.
bench-page:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 30m -v -run 'TestBenchSearchPage$$' ./tests/e2e/

# The query API's memory under 10 concurrent full LISTs of 100,000 Pods fed to the index
# (BENCH_FACADE_MEMORY_PODS, BENCH_FACADE_LISTERS).
bench-facade-memory:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 45m -v -run 'TestBenchFacadeMemory$$' ./tests/e2e/

# Index roll benchmark on the test bed: 50,000 Pod documents in an index of the previous mapping
# version, rolled by the indexer at its start, beside a raw _bulk load of them (BENCH_ROLL_DOCS to
# change).
bench-roll:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 60m -v -run TestBenchRoll ./tests/e2e/

# The embedded store beside OpenSearch on one corpus: indexing docs/s, query p50/p99 per kind, heap
# and disk per 10k Pods, cold start of `kubesearch standalone` on the data folder (BENCH_STORE_PODS,
# BENCH_STORE_QUERIES to change).
bench-stores:
	$(GO) test -tags 'e2e bench' -count=1 -timeout 60m -v -run TestBenchStores ./tests/e2e/

# Fleet-view watches at fleet scale (issue 25), on the test bed: the fleet simulator's
# BENCH_FLEET_WATCH_CLUSTERS (1000) clusters of BENCH_FLEET_WATCH_OBJECTS (20) objects, Pods only,
# through an indexer and a query API following its change feed, then BENCH_FLEET_WATCH_WATCHERS (100)
# fleet watches and an informer while the simulator churns at BENCH_FLEET_WATCH_RATE (200) changes/s
# for BENCH_FLEET_WATCH_SECONDS (120): delivery p50/p99, gaps (a failure), bytes per event, the
# length of resourceVersions and continue tokens, the query API's CPU and memory, a resumed watch.
# Figures in bench/results/<date>-fleet-watch/ (BENCH_FLEET_WATCH_OUT).
bench-fleet-watch:
	BENCH_FLEET_WATCH_OUT=$${BENCH_FLEET_WATCH_OUT:-$(CURDIR)/bench/results/$$(date -u +%Y-%m-%d-%H%M)-fleet-watch} \
	  $(GO) test -tags 'e2e bench' -count=1 -timeout 60m -v -run 'TestBenchFleetWatch$$' ./tests/e2e/

# Go benchmarks of the hot paths (envelope, object → document, query compile, Table rows, watch
# events; no services) on the working tree beside BASE (default HEAD~1), COUNT runs each (default 6),
# compared by benchstat (scripts/bench-compare.sh). E.g. make bench-compare BASE=main COUNT=10.
bench-compare:
	GO=$(GO) BASE=$(BASE) COUNT=$(COUNT) bash scripts/bench-compare.sh

# Packaging (issue 14). The container image without Docker: a static binary stamped with
# IMAGE_VERSION/IMAGE_COMMIT, assembled by tests/packaging/tools/image into an OCI layout
# (bin/image/oci) and a `docker load` tarball (bin/image/kubesearch-<version>-<arch>.tar); with Docker,
# `docker build --build-arg VERSION=... -t kubesearch/kubesearch:<version> .` builds the same image.
.PHONY: image chart-test compose-check
IMAGE_VERSION ?= dev
IMAGE_COMMIT ?= unknown
IMAGE_ARCH ?= amd64

image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath \
	  -ldflags "-s -w -X main.version=$(IMAGE_VERSION) -X main.commit=$(IMAGE_COMMIT)" \
	  -o bin/linux-$(IMAGE_ARCH)/kubesearch ./cmd/kubesearch
	cd tests/packaging/tools && GOWORK=off $(GO) run ./image --binary $(CURDIR)/bin/linux-$(IMAGE_ARCH)/kubesearch \
	  --arch $(IMAGE_ARCH) --version $(IMAGE_VERSION) --commit $(IMAGE_COMMIT) \
	  --oci-layout $(CURDIR)/bin/image/oci --tarball $(CURDIR)/bin/image/kubesearch-$(IMAGE_VERSION)-$(IMAGE_ARCH).tar

# Release binaries: static linux/amd64 and linux/arm64 builds stamped like the image, written as
# $(DIST_DIR)/kubesearch-<version>-linux-<arch> beside a SHA256SUMS file that `sha256sum -c SHA256SUMS`
# checks. For a release: make dist DIST_VERSION=v0.1.0 DIST_COMMIT=$(git rev-parse HEAD). Left empty,
# DIST_COMMIT becomes the VCS revision go build records, if any (cmd/kubesearch/version.go).
# DIST_ARCHES narrows the build (tests/packaging builds amd64 alone).
.PHONY: dist
DIST_DIR ?= dist
DIST_VERSION ?= dev
DIST_COMMIT ?=
DIST_ARCHES ?= amd64 arm64

dist:
	mkdir -p $(DIST_DIR)
	set -e; for arch in $(DIST_ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath \
	    -ldflags "-s -w -X main.version=$(DIST_VERSION) -X main.commit=$(DIST_COMMIT)" \
	    -o $(DIST_DIR)/kubesearch-$(DIST_VERSION)-linux-$$arch ./cmd/kubesearch; \
	done
	cd $(DIST_DIR) && sha256sum $(foreach arch,$(DIST_ARCHES),kubesearch-$(DIST_VERSION)-linux-$(arch)) > SHA256SUMS

# The Helm chart: lint, golden renders and invariants (no services), then the renders applied with
# --dry-run=server to a test bed kube-apiserver and the collector run with the chart's RBAC (test bed).
chart-test:
	$(GO) test -count=1 -run 'Chart' ./tests/packaging/
	$(GO) test -tags e2e -count=1 -timeout 10m -v -run 'TestChart' ./tests/e2e/

# docker-compose.yml: `docker-compose config` (Debian's docker-compose, installed if missing) and the
# wiring test against `kubesearch <command> --help`.
compose-check:
	bash tests/packaging/install-tools.sh
	docker-compose -f docker-compose.yml --profile tools config -q
	$(GO) test -count=1 -run 'Compose|Dashboards' ./tests/packaging/
