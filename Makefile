# ckpt: the two commands a fresh machine with only Go needs are `make demo` and `make test`.
GO       ?= go
FUZZTIME ?= 5s
PYTHON   ?= /usr/bin/python3

.PHONY: all build demo test unit fuzz vet interop fixtures bench clean

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

# Each fuzz target runs briefly from its seed corpus (testdata); longer runs:
#   go test -fuzz FuzzUnpickle -fuzztime 10m ./pickle
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
	  dir=$$(dirname $$f); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/func //'); do \
	    echo "fuzz $$dir $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$dir >/dev/null || { $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$dir; exit 1; }; \
	  done; \
	done

## interop: the tests that load our output in real PyTorch, required to run
interop:
	CKPT_REQUIRE_INTEROP=1 $(GO) test -count=1 -run Interop ./...

## fixtures: regenerate testdata/fixtures with real torch.save
fixtures:
	$(PYTHON) scripts/gen_fixtures.py

clean:
	rm -rf bin
