# ckpt: the two commands a fresh machine with only Go needs are `make demo` and `make test`.
GO       ?= go
FUZZTIME ?= 5s
# fuzz-long: each parser target for FUZZLONG, seeded with testdata/hostile
# (6 targets x 10m: the hour issue #13 asks for before resolving)
FUZZLONG ?= 10m
FUZZPARSERS ?= ^(pickle/FuzzUnpickle|statedict/FuzzNewReader|statedict/FuzzPickleBounded|safetensors/FuzzParse|safetensors/FuzzParseHeader|convert/FuzzConvert)$$
PYTHON   ?= /usr/bin/python3
CLANGXX  ?= clang++

.PHONY: all build demo test unit fuzz fuzz-long hostile vet interop interop-torch2 fixtures bench clean kernels

all: build

build:
	$(GO) build -o bin/ckpt ./cmd/ckpt

## demo: inspect a bundled training checkpoint
demo:
	$(GO) run ./cmd/ckpt inspect testdata/fixtures/training.pt

## test: vet, unit and interop tests (interop skips without torch unless CKPT_REQUIRE_INTEROP=1), short fuzz runs
test: vet unit fuzz

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# Each fuzz target runs briefly from its seed corpus (testdata); see
# scripts/fuzz.sh for longer runs and how Go 1.26's fuzz-coordinator race
# (golang/go#75804) is told apart from a finding.
fuzz:
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
	CKPT_PYTHON=$(CURDIR)/scripts/torch2-python CKPT_REQUIRE_INTEROP=all $(GO) test -count=1 -run 'Interop|Lazy' ./...

## fixtures: regenerate testdata/fixtures with real torch.save (1.13, then 2.x from the trixie chroot)
fixtures:
	$(PYTHON) scripts/gen_fixtures.py
	scripts/torch2-chroot.sh
	scripts/torch2-python scripts/gen_fixtures.py

## kernels: rebuild kernels/xxh64c.ptx from kernels/xxh64c.cu with clang (no CUDA toolkit needed); commit the result
kernels:
	$(CLANGXX) -x cuda --cuda-device-only --cuda-gpu-arch=sm_70 -nocudainc -nocudalib -O3 -S \
	  -o kernels/xxh64c.ptx kernels/xxh64c.cu

clean:
	rm -rf bin
