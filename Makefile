# flatcar-capo: `make demo` sets up and runs the main job on a built-in default image;
# `make test` sets up and runs every test (what CI runs). Both install what they need.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/flatcar-capo/flatcar-capo/pkg/cli.Version=$(VERSION)
BIN := bin/flatcar-capo
FUZZTIME ?= 8s
TEST_TIMEOUT ?= 60m

.PHONY: all build deps demo test test-go fuzz bench vet clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/flatcar-capo

deps:
	scripts/install-deps.sh test

demo: build
	scripts/install-deps.sh demo
	scripts/demo.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

test: deps vet test-go fuzz

test-go:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# Short runs of every go fuzz target: no panics on any input.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

bench: build
	scripts/install-deps.sh bench
	scripts/bench/run-all.sh

clean:
	rm -rf bin
