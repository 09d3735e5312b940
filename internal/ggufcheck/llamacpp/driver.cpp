// driver.cpp: runs a GGUF model through llama.cpp (as vendored by
// github.com/ollama/ollama v0.17.4, compiled from the Go module cache by
// build.sh; no llama.cpp code is stored here) and writes the logits of
// every position, float32 little-endian, n_tokens x n_vocab, to stdout.
//
//   llamacpp-logits MODEL.gguf TOKEN...
//
// One sequence from position 0, one batch, CPU, F32 KV cache, no flash
// attention, so that the numbers are plain float32 arithmetic.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: llamacpp-logits MODEL.gguf TOKEN...\n");
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "llama.cpp refused to load %s\n", argv[1]); return 1; }
    int n = argc - 2;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n < 256 ? 256 : n;
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "no llama.cpp context\n"); return 1; }
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = atoi(argv[2 + i]);
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int i = 0; i < n; i++) {
        const float * l = llama_get_logits_ith(ctx, i);
        if (!l) { fprintf(stderr, "no logits for %d\n", i); return 1; }
        fwrite(l, sizeof(float), nv, stdout);
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
