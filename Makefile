# ckpt: the two commands a fresh machine with only Go needs are `make demo` and `make test`.
GO       ?= go
FUZZTIME ?= 5s
# fuzz-long: each parser target for FUZZLONG, seeded with testdata/hostile
# (7 targets x 10m: more than the hour issue #13 asks for before resolving)
FUZZLONG ?= 10m
FUZZPARSERS ?= ^(pickle/FuzzUnpickle|statedict/FuzzNewReader|statedict/FuzzPickleBounded|statedict/FuzzDCPMetadata|safetensors/FuzzParse|safetensors/FuzzParseHeader|convert/FuzzConvert)$$
PYTHON   ?= /usr/bin/python3
CLANGXX  ?= clang++

.PHONY: all build demo test unit fuzz fuzz-long hostile vet interop interop-torch2 fixtures bench clean kernels gpu-bundle

all: build

build:
	$(GO) build -buildvcs=auto -o bin/ckpt ./cmd/ckpt

## demo: inspect a bundled training checkpoint
demo:
	$(GO) run ./cmd/ckpt inspect testdata/fixtures/training.pt

## test: vet, unit and interop tests (interop skips without torch unless CKPT_REQUIRE_INTEROP=1), short fuzz runs
test: vet unit fuzz
	@echo "== make test: passed (vet; unit and interop tests as tallied above; fuzz targets $(FUZZTIME) each)"

vet:
	@echo "== vet: gofmt -l and go vet ./..."
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# What the interop tests will do, said before they run.
INTEROP_STATUS = py=$${CKPT_PYTHON:-$(PYTHON)}; \
	if v=$$($$py -c 'import torch, numpy; print(torch.__version__)' 2>/dev/null); then \
	  echo "== interop tests: against torch $$v ($$py)"; \
	elif [ -n "$${CKPT_REQUIRE_INTEROP:-}" ]; then \
	  echo "== interop tests: $$py cannot import torch and numpy, and CKPT_REQUIRE_INTEROP is set: they will FAIL"; \
	else \
	  echo "== interop tests: SKIPPED: $$py cannot import torch and numpy (apt-get install python3-torch python3-numpy; CKPT_REQUIRE_INTEROP=1 makes this an error)"; \
	fi

unit:
	@$(INTEROP_STATUS)
	@echo "== unit tests: go test ./... (a first run compiles the dependencies first: a minute of silence)"
	$(GO) test -count=1 -json ./... | $(GO) run ./internal/testsummary -label "unit and interop"

# Each fuzz target runs briefly from its seed corpus (testdata); see
# scripts/fuzz.sh for longer runs and how Go 1.26's fuzz-coordinator race
# (golang/go#75804) is told apart from a finding.
fuzz:
	@echo "== fuzz: every Fuzz target for $(FUZZTIME) from its seed corpus (scripts/fuzz.sh)"
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## fuzz-long: the parser targets for FUZZLONG each (default 10m), the hostile corpus among their seeds
fuzz-long:
	GO=$(GO) FUZZTIME=$(FUZZLONG) FUZZONLY='$(FUZZPARSERS)' scripts/fuzz.sh

## hostile: regenerate testdata/hostile (the hostile-input corpus and expect.tsv) from internal/hostile
hostile:
	$(GO) run ./internal/hostile/gen

## interop: the tests that load our output in real PyTorch, required to run
interop:
	CKPT_REQUIRE_INTEROP=1 $(GO) test -count=1 -run Interop ./...

## interop-torch2: the interop tests again against torch 2.x and the safetensors library, from a
## Debian trixie chroot that scripts/torch2-chroot.sh builds once (root, deb.debian.org)
interop-torch2:
	scripts/torch2-chroot.sh
	CKPT_PYTHON=$(CURDIR)/scripts/torch2-python CKPT_REQUIRE_INTEROP=all $(GO) test -count=1 -json -run 'Interop|Lazy' ./... \
	  | $(GO) run ./internal/testsummary -label "torch 2.x interop"

## fixtures: regenerate testdata/fixtures with real torch.save (1.13, then 2.x from the trixie chroot)
fixtures:
	$(PYTHON) scripts/gen_fixtures.py
	scripts/torch2-chroot.sh
	scripts/torch2-python scripts/gen_fixtures.py

## kernels: rebuild kernels/xxh64c.ptx from kernels/xxh64c.cu with clang (no CUDA toolkit needed); commit the result
kernels:
	$(CLANGXX) -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -O3 -S \
	  -o kernels/xxh64c.ptx kernels/xxh64c.cu

## gpu-bundle: cross-build for a linux/amd64 GPU machine without Go (CGO_ENABLED=0: the driver is
## bound at run time through purego) the ckpt binary and the -tags gpu test binaries, into
## bin/gpu-bundle (git-ignored; carry it to the device machine, where bench/gpu_proof.sh runs them)
GPU_BUNDLE ?= bin/gpu-bundle
GPU_TEST_PKGS ?= devicecopy cmd/ckpt kernels
gpu-bundle:
	rm -rf $(GPU_BUNDLE) && mkdir -p $(GPU_BUNDLE)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags='-s -w' -o $(GPU_BUNDLE)/ckpt ./cmd/ckpt
	for p in $(GPU_TEST_PKGS); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -c -tags gpu -trimpath -ldflags='-s -w' \
	    -o $(GPU_BUNDLE)/$$(echo $$p | tr / _).test ./$$p || exit 1; \
	done
	git rev-parse HEAD > $(GPU_BUNDLE)/COMMIT
	git status --porcelain >> $(GPU_BUNDLE)/COMMIT
	du -sh $(GPU_BUNDLE)

clean:
	rm -rf bin
