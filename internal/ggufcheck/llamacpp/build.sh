#!/usr/bin/env bash
# Builds OUTDIR/llamacpp-logits: driver.cpp linked with llama.cpp and ggml's
# CPU backend as vendored by github.com/ollama/ollama v0.17.4, compiled from
# the Go module cache (nothing of them is stored in this repository). The
# objects stay in OUTDIR/obj, so a second run only relinks. C++ is compiled
# -O0 (the models the test runs are tiny; -O0 halves the build, about 150
# files), C -O1. internal/ggufcheck's TestLlamaCppRunsLlama and TestLlamaCppRunsGptOss run the driver
# named by CKPT_LLAMACPP_LOGITS.
#
#   internal/ggufcheck/llamacpp/build.sh OUTDIR
set -euo pipefail
OUT=$(mkdir -p "${1:?usage: build.sh OUTDIR}" && cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
go mod download github.com/ollama/ollama
O=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
A=x86
case "$(uname -m)" in aarch64|arm64) A=arm ;; esac
cat > "$OUT/Makefile" <<MK
L=$O/llama/llama.cpp
G=$O/ml/backend/ggml/ggml
CPPFLAGS=-DNDEBUG -DGGML_USE_CPU -D_GNU_SOURCE -DGGML_VERSION=0x0 -DGGML_COMMIT=0x0 -I\$(L)/include -I\$(L)/src -I\$(G)/include -I\$(G)/src -I\$(G)/src/ggml-cpu
SRCS=\$(wildcard \$(L)/src/*.cpp) \$(wildcard \$(L)/src/models/*.cpp) \$(wildcard \$(G)/src/*.c) \$(wildcard \$(G)/src/*.cpp) \\
  \$(wildcard \$(G)/src/ggml-cpu/*.c) \$(wildcard \$(G)/src/ggml-cpu/*.cpp) \$(wildcard \$(G)/src/ggml-cpu/arch/$A/*.c) \$(wildcard \$(G)/src/ggml-cpu/arch/$A/*.cpp)
OBJS=\$(patsubst /%,obj/%.o,\$(SRCS))
llamacpp-logits: $HERE/driver.cpp \$(OBJS)
	g++ \$(CPPFLAGS) -O0 -std=c++17 -o \$@ \$^ -lpthread -ldl -lm
obj/%.c.o: /%.c
	@mkdir -p \$(dir \$@)
	gcc \$(CPPFLAGS) -O1 -std=gnu11 -w -c \$< -o \$@.tmp && mv \$@.tmp \$@
obj/%.cpp.o: /%.cpp
	@mkdir -p \$(dir \$@)
	g++ \$(CPPFLAGS) -O0 -std=c++17 -w -c \$< -o \$@.tmp && mv \$@.tmp \$@
MK
make -C "$OUT" -j"$(nproc)" -s llamacpp-logits
echo "$OUT/llamacpp-logits"
