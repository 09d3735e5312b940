# ckpt: the two commands a fresh machine with only Go needs are `make demo` and `make test`.
GO       ?= go
FUZZTIME ?= 5s
# fuzz-long: each parser target for FUZZLONG, seeded with testdata/hostile
# (7 targets x 10m: more than the hour issue #13 asks for before resolving)
FUZZLONG ?= 10m
FUZZPARSERS ?= ^(pickle/FuzzUnpickle|pickle/FuzzGlobals|gguf/FuzzParse|statedict/FuzzNewReader|statedict/FuzzPickleBounded|dcp/FuzzMetadata|dcp/FuzzSavedOffsets|statedict/FuzzDCPCheckpoint|statedict/FuzzHFDCPShardingInfo|safetensors/FuzzParse|safetensors/FuzzParseHeader|convert/FuzzConvert)$$
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
	@if git grep -n -E '^(<<<<<<<|>>>>>>>)( |$$)' -- . ':!*.pt' ':!*.bin' 2>/dev/null; then \
	  echo "merge conflict markers committed (above)"; exit 1; fi
	$(GO) vet ./...
	@echo "== vet: go vet for macOS and Windows as well"
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...

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

## kernels: rebuild kernels/xxh64c.ptx from kernels/xxh64c.cu with clang (PTX ISA pinned to 6.3, which
## ptxas 11.8 and every driver since CUDA 10.0 accept, whatever CUDA installation clang finds), then
## kernels/xxh64c.fatbin with NVIDIA's ptxas and fatbinary (Debian non-free nvidia-cuda-toolkit 11.8:
## see docs/gpu.md): one cubin per KERNEL_ARCHS plus the PTX, which the driver JITs for newer GPUs.
## ptxas warnings (spills included) are errors; its register/spill report goes to
## kernels/xxh64c.ptxas.txt. Commit all three; CI rebuilds them and fails when they differ.
KERNEL_ARCHS ?= 75 80 86 89 90
PTXAS      ?= ptxas
FATBINARY  ?= fatbinary
kernels:
	$(CLANGXX) -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -O3 -S \
	  -Xclang -target-feature -Xclang +ptx63 -Wno-unknown-cuda-version \
	  -o kernels/xxh64c.ptx kernels/xxh64c.cu
	@command -v $(PTXAS) >/dev/null && command -v $(FATBINARY) >/dev/null || { \
	  echo "make kernels: $(PTXAS)/$(FATBINARY) not found: kernels/xxh64c.fatbin cannot be rebuilt and would no longer match the PTX;"; \
	  echo "  install NVIDIA's CUDA 11.8 tools (docs/gpu.md: apt-get install nvidia-cuda-toolkit from Debian non-free, or PTXAS=/path FATBINARY=/path)"; \
	  exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  printf '# ptxas -v per architecture for kernels/xxh64c.ptx (make kernels; %s)\n' "$$($(PTXAS) --version | tail -1)" > kernels/xxh64c.ptxas.txt && \
	  images= && for a in $(KERNEL_ARCHS); do \
	    $(PTXAS) -arch=sm_$$a -O3 -v -Werror --warn-on-spills --warn-on-local-memory-usage \
	      -o $$tmp/sm_$$a.cubin kernels/xxh64c.ptx > $$tmp/log 2>&1 || { cat $$tmp/log; exit 1; }; \
	    if grep -qi warning $$tmp/log; then cat $$tmp/log; echo "ptxas warned for sm_$$a"; exit 1; fi; \
	    echo "sm_$$a: $$(grep -o 'Used [0-9]* registers' $$tmp/log), $$(grep -o '[0-9]* bytes stack frame, [0-9]* bytes spill stores, [0-9]* bytes spill loads' $$tmp/log)" >> kernels/xxh64c.ptxas.txt; \
	    images="$$images --image3=kind=elf,sm=$$a,file=$$tmp/sm_$$a.cubin"; \
	  done && \
	  $(FATBINARY) --create=kernels/xxh64c.fatbin -64 --compress=false $$images --image3=kind=ptx,sm=75,file=kernels/xxh64c.ptx && \
	  cat kernels/xxh64c.ptxas.txt

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
