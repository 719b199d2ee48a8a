# flatcar-capo: `make demo` sets up and runs the main job on a built-in default image;
# `make test` sets up and runs every test (what CI runs). Both install what they need.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/flatcar-capo/flatcar-capo/pkg/cli.Version=$(VERSION)
BIN := bin/flatcar-capo
FUZZTIME ?= 8s
TEST_TIMEOUT ?= 90m
# STRICT=1 (what .ci/run does): a test that would skip (missing tool, not root) fails instead.
ifeq ($(STRICT),1)
export FLATCAR_CAPO_STRICT_TESTS := 1
endif
# The real tier: plain `go test ./...` is the fast one (pure Go: every test that needs a VM,
# root, a tool or a service skips, internal/testing/testutil.RealEnv); every target that runs real parts
# sets the switch, so they run (and, under STRICT=1, fail when something is missing).
REAL_TARGETS := test-go race fuzz fuzz-oracles test-packer-guest test-image node-proof capo-proof bench
$(REAL_TARGETS): export FLATCAR_CAPO_REAL_TESTS := 1
# go test -json of every run of `make test`, summed up at its end by bin/testsummary.
TESTLOG := bin/testlog
SUMMARY := bin/testsummary
export TEST_JSON_DIR := $(CURDIR)/$(TESTLOG)
export TEST_SUMMARY := $(CURDIR)/$(SUMMARY)
# The goroutine-heavy code, run again under the race detector: all of qcow2 and squashfs (-short
# keeps inputs small), and the in-process tests of convert, fetch and upload's fan-out (their
# command tests run a binary the race detector does not see).
RACE_PKGS := ./pkg/qcow2/ ./pkg/squashfs/
RACE_RUN := ^(TestConvertInProcess|TestFetchPipelineInProcess|TestStalledBodyFails|TestFake.*)$$
RACE_RUN_PKGS := ./pkg/convert/ ./pkg/fetch/ ./pkg/glance/

.PHONY: all build cross image image-packer dist dist-check test-image deps demo test test-unit test-go test-packer-guest node-proof capo-proof race fuzz fuzz-oracles bench vet clean

all: build

# Static, as the image's: without cgo the dynamic loader's ~1 ms goes from every command's start-up.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/flatcar-capo

# The container image: an OCI index (amd64 + arm64) of the static binary, CA certificates and a
# non-root user, written in Go (no Docker daemon) and reproducible: bin/image (OCI layout) and
# bin/image.tar (oci-archive: `podman load -i bin/image.tar`), with the OCI source/version/revision
# labels: flatcar-capo:latest (entrypoint flatcar-capo); and bin/image-shell.tar, flatcar-capo:shell,
# the same plus a static busybox as /bin/sh for CI runners that pipe the job script into `sh`
# (GitLab). The layout bin/image names both. Debian's busybox-static is amd64 here; BUSYBOX_ARM64=PATH
# (a static arm64 busybox) adds arm64 to the shell image. It prints each name, index digest, archive.
IMAGE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUSYBOX ?= /bin/busybox
BUSYBOX_ARM64 ?=
IMAGE_LABELS = --version '$(VERSION)' --revision '$(REVISION)'
cross:
	for a in amd64 arm64; do CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS) -buildid=' -o bin/linux-$$a/flatcar-capo ./cmd/flatcar-capo || exit 1; done

image: cross
	@test -x $(BUSYBOX) || { echo "image: no static busybox at $(BUSYBOX) (scripts/install-deps.sh installs busybox-static)"; exit 1; }
	SOURCE_DATE_EPOCH=$(IMAGE_EPOCH) $(GO) run ./scripts/image -o bin/image --binary amd64=bin/linux-amd64/flatcar-capo --binary arm64=bin/linux-arm64/flatcar-capo \
	  $(IMAGE_LABELS) --shell amd64=$(BUSYBOX) $(if $(BUSYBOX_ARM64),--shell arm64=$(BUSYBOX_ARM64))

# What a release publishes, in bin/dist: the static binaries flatcar-capo-linux-{amd64,arm64}, the
# image archives flatcar-capo-image.tar and flatcar-capo-shell-image.tar and their SHA256SUMS. The
# same commit gives the same bytes (make dist-check proves it).
DIST ?= bin/dist
DIST_FILES := flatcar-capo-linux-amd64 flatcar-capo-linux-arm64 flatcar-capo-image.tar flatcar-capo-shell-image.tar
dist: image
	rm -rf $(DIST) && mkdir -p $(DIST)
	cp bin/linux-amd64/flatcar-capo $(DIST)/flatcar-capo-linux-amd64
	cp bin/linux-arm64/flatcar-capo $(DIST)/flatcar-capo-linux-arm64
	cp bin/image.tar $(DIST)/flatcar-capo-image.tar
	cp bin/image-shell.tar $(DIST)/flatcar-capo-shell-image.tar
	cd $(DIST) && sha256sum $(DIST_FILES) > SHA256SUMS && cat SHA256SUMS

# make dist twice: here, and in a fresh clone of HEAD at another path with an empty Go build
# cache; the two SHA256SUMS must be equal. Needs a clean tree (the clone has no uncommitted work).
dist-check: dist
	@test -z "$$(git status --porcelain)" || { echo "dist-check: commit or stash your changes first (the second build is a clone of HEAD)"; exit 1; }
	set -e; tmp=$$(mktemp -d /tmp/flatcar-capo-dist-check-XXXXXX); trap 'chmod -R u+w "$$tmp"; rm -rf "$$tmp"' EXIT; \
	  git clone -q --no-hardlinks . "$$tmp/src"; \
	  GOCACHE="$$tmp/gocache" $(MAKE) --no-print-directory -C "$$tmp/src" dist >/dev/null; \
	  if cmp -s $(DIST)/SHA256SUMS "$$tmp/src/bin/dist/SHA256SUMS"; then echo "dist-check: reproducible (same SHA256SUMS from a fresh clone and build cache)"; \
	  else diff $(DIST)/SHA256SUMS "$$tmp/src/bin/dist/SHA256SUMS"; echo "dist-check: the two builds differ"; exit 1; fi

# The same plus what the Packer method runs: packer >= 1.10 with its QEMU plugin and Debian's QEMU
# with its libraries and firmware (amd64 only): bin/image-packer(.tar).
image-packer:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS) -buildid=' -o bin/linux-amd64/flatcar-capo ./cmd/flatcar-capo
	scripts/image/packer-tree.sh bin/image-packer-tree >/dev/null
	SOURCE_DATE_EPOCH=$(IMAGE_EPOCH) $(GO) run ./scripts/image -o bin/image-packer --binary amd64=bin/linux-amd64/flatcar-capo $(IMAGE_LABELS) \
	  --ref flatcar-capo:packer --extra bin/image-packer-tree --env PACKER_PLUGIN_PATH=/usr/local/lib/packer/plugins

# Podman runs the image offline as a non-root user with a read-only root filesystem and builds
# with the sysext method against the local stand-ins and the real Glance (its own target: it
# installs podman and takes a few minutes).
test-image: image image-packer
	scripts/install-deps.sh image
	$(GO) test -tags image -count=1 -timeout 40m -run "^(TestContainerImage(Packer)?|TestGitLabJobsInShellImage|TestKubernetesExamplesInImage)$$" -v ./scripts/image/

deps:
	scripts/install-deps.sh test

# install-deps first: on a fresh machine the build's Go module downloads need its ca-certificates.
demo:
	scripts/install-deps.sh demo
	$(MAKE) --no-print-directory build
	scripts/demo.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# Every test run goes on after a failure, so one run shows all of them; the last line is
# "N passed, N failed, N skipped" and the exit code is non-zero if anything failed.
test: deps vet
	@rm -rf $(TESTLOG); status=0; \
	$(MAKE) --no-print-directory test-go || status=1; \
	$(MAKE) --no-print-directory race || status=1; \
	$(MAKE) --no-print-directory fuzz || status=1; \
	$(SUMMARY) -total $(TESTLOG)/*.json || status=1; \
	exit $$status

# The fast tier, what plain `go test ./...` runs (no FLATCAR_CAPO_REAL_TESTS): the pure-Go tests,
# no VM, no root, no apt. Every test that needs a tool, root or a service skips; STRICT is off
# here (it would fail those skips: the fast tier leaves them out by design).
test-unit:
	FLATCAR_CAPO_REAL_TESTS= FLATCAR_CAPO_STRICT_TESTS= $(GO) test -count=1 ./...

$(SUMMARY): scripts/testsummary/main.go
	$(GO) build -o $@ ./scripts/testsummary

# The longest test packages go first (go test starts them in the order named, two at a time on two
# cores): with pkg/imagebuild alone in one slot, the others no longer end with the stand-in boots
# running by themselves. The node proof (test/nodeproof, the sysext method) goes last: by then the
# Kubernetes build install-deps started in the background is done on a fresh machine too, and its
# two guests run beside pkg/imagebuild's tail instead of beside every other package.
TEST_FIRST := ./pkg/imagebuild/ ./pkg/cli/ ./internal/testing/standin/ ./pkg/glance/ ./internal/testing/qemuboot/
TEST_LAST := ./test/nodeproof/
# flatcar-capo is linked once for every test package (testutil.binaryEnv, FLATCAR_CAPO_TEST_BINARY), in a world-readable
# directory named after this shell's pid (the privilege-dropping tests run it as nobody;
# testutil removes it if this run is killed).
test-go: $(SUMMARY)
	@mkdir -p $(TESTLOG)
	set -o pipefail; bindir=$$(mktemp -d /tmp/flatcar-capo-bin-$$$$-XXXXXX) && chmod 755 $$bindir && \
	  trap 'rm -rf "$$bindir"' EXIT && $(GO) build -o $$bindir/flatcar-capo ./cmd/flatcar-capo && \
	  FLATCAR_CAPO_TEST_BINARY=$$bindir/flatcar-capo $(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FIRST) \
	    $$($(GO) list ./... | grep -v -x -F "$$($(GO) list $(TEST_LAST))") $(TEST_LAST) 2>&1 | $(SUMMARY) -save $(TESTLOG)/go.json

race: $(SUMMARY)
	@mkdir -p $(TESTLOG)
	set -o pipefail; { s=0; $(GO) test -race -short -json -count=1 -timeout 20m $(RACE_PKGS) || s=1; \
	  $(GO) test -race -short -json -count=1 -timeout 10m -run '$(RACE_RUN)' $(RACE_RUN_PKGS) || s=1; exit $$s; } 2>&1 \
	  | $(SUMMARY) -save $(TESTLOG)/race.json

# Short runs of every go fuzz target: no panics on any input.
fuzz: $(SUMMARY)
	@mkdir -p $(TESTLOG)
	scripts/fuzz.sh $(FUZZTIME)

# The packer package's own full guest build + boot (pkg/imagebuild's end-to-end test covers the same
# path with both packers in `make test`): for work on packer/ or pkg/packer.
test-packer-guest: deps
	$(GO) test -tags guest -count=1 -timeout 30m -run TestBuildStandinAndBootResult -v ./pkg/packer/

# Issue 26's proof: real Kubernetes (built from the Go module proxy by install-kubernetes.sh,
# cached) on a built image, booted offline with the control-plane Ignition CABPK makes of our
# manifests; kubeadm init must run by itself and the node be Ready with kube-system Running, then a
# second guest joins as a worker. `make test` runs it for the sysext method; this runs both
# methods (NODE_PROOF_METHODS="sysext" for one), prints NODE-PROOF-BEGIN/END <method> blocks and
# keeps the images in bin/node-proof/<method>/. NODE_PROOF_FAULT="init join" fails the first kubeadm
# init/join after it wrote its files: kubeadm.service's retry must reset and still bring the node up.
NODE_PROOF_TIMEOUT ?= 240m
NODE_PROOF_METHODS ?= sysext packer
node-proof: deps
	scripts/install-kubernetes.sh >/dev/null
	@mkdir -p bin/node-proof
	set -o pipefail; NODE_PROOF_DIR=$(CURDIR)/bin/node-proof NODE_PROOF_METHODS="$(NODE_PROOF_METHODS)" FLATCAR_CAPO_STRICT_TESTS=1 \
	  $(GO) test -count=1 -timeout $(NODE_PROOF_TIMEOUT) -run '^TestNodeProof$$' -v ./test/nodeproof/ 2>&1 | tee bin/node-proof/node-proof.log

# Issue 46's proof: a real Nova + Neutron + Placement (Debian 12, Zed) in a network namespace
# boots the stand-in guest from Glance with a config drive and user-data
# (internal/testing/novatest); then the real CAPO manager, beside the CAPI, CABPK, KCP and ORC
# managers in that namespace, creates a `manifests` cluster's servers from a `build` image that
# `upload` put in Glance (test/capoproof; its logs in bin/capo-proof/capo-loop). Needs root and
# scripts/install-openstack-compute.sh (install-deps.sh capo-proof); not part of make test (-p 1:
# one cloud at a time). Keeps every service's log and the guest's console in bin/capo-proof/ and
# prints the CAPO-PROOF-BEGIN/END blocks.
CAPO_PROOF_TIMEOUT ?= 250m
# CAPO_PROOF_RUN picks the tests (e.g. '^TestCAPOCreatesServers$$' for the loop alone).
CAPO_PROOF_RUN ?= ^(TestComputeBootsServer|TestCAPOCreatesServers|TestPushedImageRunsTheManager|TestAPIServerAdmitsManifests|TestBuildPreloadsTheManager|TestManifestsAreUpstreams)$$
capo-proof:
	scripts/install-openstack-compute.sh
	scripts/install-kubernetes.sh >/dev/null
	ORC_MANAGER=1 scripts/install-capi.sh
	scripts/install-occm.sh >/dev/null
	@rm -rf bin/capo-proof; mkdir -p bin/capo-proof/logs
	set -o pipefail; CAPO_PROOF_DIR=$(CURDIR)/bin/capo-proof FLATCAR_CAPO_CAPO_PROOF=1 FLATCAR_CAPO_STRICT_TESTS=1 \
	  $(GO) test -count=1 -p 1 -timeout $(CAPO_PROOF_TIMEOUT) -run '$(CAPO_PROOF_RUN)' -v \
	  ./internal/testing/novatest/ ./internal/testing/occmtest/ ./test/capoproof/ 2>&1 | tee bin/capo-proof/capo-proof.log
	@sed -n '/^CAPO-PROOF-BEGIN$$/,/^CAPO-PROOF-END$$/p' bin/capo-proof/capo-proof.log

# Differential oracles that compare us with a reference reader known to misread some inputs:
# run by hand when evaluating that reader again, not in `make test`.
fuzz-oracles:
	FUZZ_EXCLUDE='^$$' FUZZ_ONLY=FuzzGPTReadersAgree scripts/fuzz.sh 60s

bench: build
	scripts/install-deps.sh bench
	scripts/bench/run-all.sh

clean:
	rm -rf bin
