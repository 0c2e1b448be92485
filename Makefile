# dra-autoscaler. Every target runs from a clean checkout with only Go
# installed; the first build of anything importing k8s.io/kubernetes takes
# ~15 minutes on 2 cores, later ones about a minute (Go's build cache, which
# `make clean` never touches).

GO          ?= go
# One build configuration for everything but the race detector: static
# binaries with trimmed paths, as the release image is built (hack/image).
# The image, the binaries, the control plane and the tests then share one
# compiled copy of each package: a cold `make test` compiles Kubernetes
# twice (with and without -race) instead of three times. The tool modules
# (kwok, Cluster API, Kueue) clear GOFLAGS and build static too.
export CGO_ENABLED := 0
export GOFLAGS     := $(strip $(GOFLAGS) -trimpath)
BIN         := _out/bin
STATE       := _out/cluster
PORT_BASE   ?= 16440
# The release version (VERSION), stamped into the binaries (pkg/version)
# and naming the image `make image` writes.
VERSION     := $(shell cat VERSION)
LDFLAGS     := -X github.com/dra-autoscaler/dra-autoscaler/pkg/version.Version=$(VERSION)
# Packages whose tests need the local control plane.
E2E_PKGS    := ./test/... ./hack/...
UNIT_PKGS    = $(shell $(GO) list ./... | grep -v -e /test/ -e /hack/)
TEST_FLAGS  ?= -count=1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CONTROLLER_GEN := sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# The cloud provider of `make demo` and `make deploy-build`: kwok, or
# clusterapi (Cluster API machines of the dev infrastructure provider; it
# makes `make up` start Cluster API, as CAPI=1 does).
PROVIDER    ?= kwok
ifeq ($(PROVIDER),clusterapi)
CAPI        ?= 1
endif

.PHONY: all build binaries test test-unit test-race test-image test-e2e bench fuzz diff-long lint crds generate generate-proto up down demo clean docs deploy-build chart-render chart-copies image

all: build

build:
	$(GO) build ./...
	$(GO) build -o $(BIN)/localcluster ./hack/localcluster
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/dra-autoscaler ./cmd/dra-autoscaler
	$(GO) build -o $(BIN)/externalgrpc-kwok ./cmd/externalgrpc-kwok

# The control plane (kube-apiserver, kube-controller-manager, kube-scheduler
# from this module; kwok from its own) — the e2e tests build it too — the
# Cluster API manager from hack/capi (~6 minutes the first time, then ~1s)
# and the Kueue manager from hack/kueue (~15 minutes the first time, then ~1s).
binaries:
	$(GO) run ./hack/localcluster build --bin-dir $(BIN)

# Everything CI runs: the linters (first: they are the fastest to fail),
# unit tests (the differential test's 1,000 seeds among them; `make
# diff-long` runs more), the race detector over the packages that run
# goroutines, and the end-to-end tests on a real local control plane.
# Two of these run in the background at the lowest priority, on the CPU
# the foreground leaves idle: what the e2e tests run (`localcluster build`:
# the Kueue manager, the Cluster API manager, kwok and the control plane;
# about 28 CPU-minutes when cold, most of it Kueue and the control plane)
# beside the linters and unit tests, and the race tests (about 11 minutes
# cold, mostly compiling Kubernetes with -race) beside the e2e tests,
# which mostly wait for the control plane, kwok's nodes and the
# autoscaler's passes. The race tests' output follows the e2e tests'.
# Cold, all of it is CPU-bound (57:50 measured, 193 % of 2 cores): more
# compiling here breaks the 60-minute bar. hack/kwok and hack/capi build
# with this module's versions of what they share with it
# (test/controlplane TestToolVersions), so that most of their packages
# are compiled once.
# LOWPRIO runs a command in a session of its own (so that a failure can
# stop it and all it started) at the lowest priority. The session's
# scheduler autogroup gets nice 19 too: with autogroups (the kernel's
# default), nice orders tasks only within one session, and a new session
# at nice 19 still took half the CPUs from the foreground's (measured: two
# busy loops each side, 52 % against 50 %; 8 % against 97 % with this).
LOWPRIO = setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$$@"' lowprio
test:
	$(GO) build -o $(BIN)/localcluster ./hack/localcluster
	@mkdir -p _out; \
	$(LOWPRIO) $(BIN)/localcluster build --bin-dir $(BIN) >_out/build.log 2>&1 & tools=$$!; \
	$(MAKE) --no-print-directory lint test-unit; rc=$$?; \
	if [ $$rc -ne 0 ]; then kill -- -$$tools 2>/dev/null || kill $$tools 2>/dev/null; wait $$tools; exit $$rc; fi; \
	echo "waiting for the e2e tests' binaries (_out/build.log)"; \
	if ! wait $$tools; then cat _out/build.log; exit 1; fi; \
	echo "test-race runs beside test-e2e (_out/test-race.log)"; \
	$(LOWPRIO) $(MAKE) --no-print-directory test-race >_out/test-race.log 2>&1 & race=$$!; \
	$(MAKE) --no-print-directory test-e2e; rc=$$?; \
	if [ $$rc -ne 0 ]; then kill -- -$$race 2>/dev/null || kill $$race 2>/dev/null; fi; \
	wait $$race; raced=$$?; echo "== test-race"; cat _out/test-race.log; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$raced

test-unit:
	$(GO) test $(TEST_FLAGS) -timeout 20m $(UNIT_PKGS)
	cd hack/kustomize && $(GO) test $(TEST_FLAGS) ./...
	cd hack/genproto && $(GO) test $(TEST_FLAGS) ./...
	cd hack/helm && $(GO) test $(TEST_FLAGS) ./...
	# Builds the image for the host's platform: ~15 minutes the first time
	# (Kubernetes without cgo), about a minute with the build cache. The
	# cross-build of the release's other platform is `make test-image`.
	cd hack/image && $(GO) test $(TEST_FLAGS) -timeout 60m ./...

# The wiring, the loop, its stages, scale-down, drains, the binary and the
# providers run goroutines: they are tested with -race too. So is the
# simulator: the framework filters nodes in parallel over the snapshot
# and the caches the simulator keeps beside it.
RACE_PKGS := ./pkg/autoscaler/... ./pkg/pass/... ./pkg/loop/... ./pkg/observe/... ./pkg/load/... ./pkg/report/... ./pkg/stranded/... ./pkg/vet/... ./pkg/scaleup/... ./pkg/scaledown/... ./pkg/drain/... ./pkg/safety/... ./cmd/... ./cloudprovider/... ./simulator/...
test-race:
	CGO_ENABLED=1 $(GO) test $(TEST_FLAGS) -race -timeout 30m $(RACE_PKGS)

# The release image for every platform `make image` builds, read back and
# checked (the host's binary run): a cross-build, ~15 minutes more the
# first time, so not in `make test`, which builds the host's alone.
test-image:
	cd hack/image && $(GO) test $(TEST_FLAGS) -timeout 60m -run TestImageArchive ./... -args -platforms=linux/amd64,linux/arm64

# Every parser of outside input, fuzzed for FUZZTIME each (package:target).
# Their seeds run in `make test` as ordinary tests; a crasher the fuzzer
# finds is written to the package's testdata/fuzz/ and stays as a
# regression test once committed.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./cloudprovider/kwok:FuzzParseConfig \
	./cloudprovider/clusterapi:FuzzParseDRATemplate \
	./cloudprovider/clusterapi:FuzzAnnotations \
	./cloudprovider/externalgrpc/wire:FuzzTemplateFrom \
	./cloudprovider/externalgrpc/wire:FuzzReservationFrom \
	./cloudprovider/externalgrpc/wire:FuzzLegacy \
	./pkg/config:FuzzNodeGroupSpec \
	./pkg/config:FuzzRange \
	./pkg/config:FuzzFlags \
	./pkg/expander/priority:FuzzParse \
	./apis/autoscaling/v1alpha1:FuzzCapacityReservation \
	./apis/capacitybuffer/v1beta1:FuzzCapacityBuffer \
	./pkg/buffers:FuzzBuffer \
	./pkg/reservations:FuzzExpectedRuntime \
	./pkg/scaledown/drainability:FuzzSafeToEvict \
	./pkg/scaledown/eligibility:FuzzScaleDownDisabled \
	./simulator/framework:FuzzSchedulerConfig \
	./pkg/vet:FuzzPools
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
		log=$$(mktemp); $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; rc=$$?; \
		grep -E '^fuzz: elapsed: [0-9]+s, execs: [0-9]+' $$log | tail -1 | \
			sed -E 's/^fuzz: elapsed: ([0-9]+)s, execs: ([0-9]+).*/\2 \1/' | awk '{ printf "%d executions in %ds: %d/s\n", $$1, $$2, ($$2 > 0 ? $$1/$$2 : 0) }'; \
		tail -1 $$log; \
		if [ $$rc -ne 0 ]; then cat $$log; rm -f $$log; exit 1; fi; rm -f $$log; \
	done

# The differential test (pkg/differential) for longer than `make test`
# runs it (1,000 seeds there): SEEDS generated clusters from seed FIRST
# on, each decided with the simulation's shortcuts on and with none; a
# seed that decides differently prints itself, its repro command and its
# cluster, and goes into pkg/differential/testdata/regressions.txt.
SEEDS ?= 20000
FIRST ?= 1
diff-long:
	$(GO) test ./pkg/differential -count=1 -timeout 0 -run '^TestShortcutsAgreeWithThePlainFramework$$' -seeds=$(SEEDS) -first=$(FIRST)

# The generated references: docs/flags.md and docs/metrics.md (a test in
# hack/docs fails when they are stale), and the stage table in
# docs/design/architecture.md (from the wiring's stage declarations; a
# test in pkg/autoscaler fails when it is stale).
docs:
	$(GO) run ./hack/docs --dir docs
	$(GO) test ./pkg/autoscaler -count=1 -run '^TestArchitectureStageTable$$' -update-docs

# The manifests of the provider's overlay as `kubectl apply -k
# deploy/$(PROVIDER)` would build them (hack/kustomize is a module of its
# own, see its main.go).
deploy-build:
	@cd hack/kustomize && $(GO) run . ../../deploy/$(PROVIDER)

# The Helm chart (deploy/charts/dra-autoscaler) rendered for PROVIDER as
# `helm template` would, with HELM_SET's values (k=v,...; hack/helm is a
# module of its own).
HELM_SET ?=
chart-render:
	@cd hack/helm && $(GO) run ./cmd/render --set cloudProvider=$(PROVIDER) $(if $(HELM_SET),--set $(HELM_SET))

# The release image, linux/amd64 and linux/arm64, as an OCI layout in one
# tar file: _out/image/dra-autoscaler-$(VERSION).oci.tar (no container
# engine; hack/image is a module of its own). Push it with e.g.
# `skopeo copy --all oci-archive:<file> docker://<registry>/dra-autoscaler:$(VERSION)`.
image:
	cd hack/image && $(GO) run . --root ../.. --version $(VERSION)

# The control plane is built once, before the test binaries start, so they
# do not build it side by side.
# The e2e tests mostly wait (for the control plane, kwok's nodes, the
# autoscaler's passes): four at a time took test/e2e from 23 to 16
# minutes, but two timing-sensitive tests failed then (the nomination test,
# which now runs alone, and a check of Cluster API's node annotation, which
# now waits for it); three at a time is the middle way.
E2E_PARALLEL ?= 3
test-e2e: binaries
	$(GO) test $(TEST_FLAGS) -parallel $(E2E_PARALLEL) -timeout 40m $(E2E_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS)

# gofmt, the name check (one exported type name, one meaning: hack/namecheck,
# under a second), go vet and staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run ./hack/namecheck
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# CRDs of the APIs we serve, copied from the modules that define them (the
# ProvisioningRequest CRD is the one Kueue's admission check expects);
# pkg/provreq's tests fail when deploy/crds is stale.
PROVREQ_MOD := k8s.io/autoscaler/cluster-autoscaler/apis
CHART := deploy/charts/dra-autoscaler
crds:
	@mkdir -p deploy/crds
	install -m 0644 $$($(GO) list -m -f '{{.Dir}}' $(PROVREQ_MOD))/config/crd/*.yaml deploy/crds/
	$(MAKE) chart-copies
# The chart's copies of deploy/crds and of the kwok example groups
# (hack/helm's test fails when they differ).
chart-copies:
	install -m 0644 deploy/crds/*_*.yaml $(CHART)/crds/
	install -m 0644 deploy/kwok/kwok-provider.yaml $(CHART)/files/
# Deepcopy functions and the CRDs in deploy/crds from the types in apis/
# (controller-gen runs in its own module context: go.mod is not touched).
generate: generate-proto
	$(GO) run $(CONTROLLER_GEN) object paths=./apis/... crd paths=./apis/... output:crd:artifacts:config=deploy/crds
	$(MAKE) chart-copies

# The Go code of the externalgrpc provider's .proto files, without protoc
# (hack/genproto is a module of its own; its test fails when it is stale).
generate-proto:
	cd hack/genproto && $(GO) run . --root ../..

# Only what it runs: building everything (`go build ./...` links every
# command, ~40s warm) would double a warm `make demo`.
up:
	$(GO) build -o $(BIN)/localcluster ./hack/localcluster
	$(BIN)/localcluster up --state-dir $(STATE) --bin-dir $(BIN) --port-base $(PORT_BASE) $(if $(CAPI),--capi)

down:
	@if [ -x $(BIN)/localcluster ]; then $(BIN)/localcluster down --state-dir $(STATE); else echo "not running"; fi

# The README's run command: the local control plane, the autoscaler on the
# kwok provider's example groups and the scenes' (hack/demo/scenes-kwok.yaml),
# an inference workload it scales for, then the scenes (gangs, reservations,
# GPU slices, explain, scale-down). The autoscaler is left running on
# DEMO_ADDRESS (make down stops it). PROVIDER=clusterapi makes the first
# scene's groups Cluster API MachineDeployments and runs the autoscaler's
# clusterapi provider on them.
DEMO_ADDRESS ?= 127.0.0.1:16446
demo: up
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/dra-autoscaler ./cmd/dra-autoscaler
	$(GO) run ./hack/demo --kubeconfig $(STATE)/kubeconfig --state-dir $(STATE) --autoscaler $(BIN)/dra-autoscaler \
		--cloud-config deploy/kwok/kwok-provider.yaml --address $(DEMO_ADDRESS) --provider $(PROVIDER)

clean: down
	rm -rf _out
