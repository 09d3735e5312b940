// driver.c: a test driver for ckpt's ggml package. It is compiled at test
// time together with ggml's own ggml-quants.c (from the Go module cache,
// never committed here) and runs ggml's reference codecs on data the Go
// tests send, so that the Go codecs can be compared bit for bit.
//
// Usage:
//   driver sizes                       lines "id block_size type_size"
//   driver deq TYPE N   < blocks       > N float32 (little-endian host)
//   driver q TYPE N     < N float32    > blocks
//   driver valid TYPE NBLOCKS < blocks > one '1' or '0' per block
//   driver bench deq|q TYPE MB ITERS   one line: best seconds per pass over MB
//
// This file contains no ggml code; it calls ggml's functions and uses its
// headers. The stubs below stand in for ggml.c symbols ggml-quants.c
// references.

#include "ggml-quants.h"
#include "ggml-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list ap;
    fprintf(stderr, "ggml_abort %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

struct tinfo { int id; int64_t blck; size_t size; };

#define T(id, blck, blk) { id, blck, sizeof(blk) }
static const struct tinfo tinfos[] = {
    { GGML_TYPE_F32, 1, 4 }, { GGML_TYPE_F16, 1, 2 }, { GGML_TYPE_BF16, 1, 2 },
    { GGML_TYPE_F64, 1, 8 }, { GGML_TYPE_I8, 1, 1 }, { GGML_TYPE_I16, 1, 2 },
    { GGML_TYPE_I32, 1, 4 }, { GGML_TYPE_I64, 1, 8 },
    T(GGML_TYPE_Q4_0, QK4_0, block_q4_0), T(GGML_TYPE_Q4_1, QK4_1, block_q4_1),
    T(GGML_TYPE_Q5_0, QK5_0, block_q5_0), T(GGML_TYPE_Q5_1, QK5_1, block_q5_1),
    T(GGML_TYPE_Q8_0, QK8_0, block_q8_0), T(GGML_TYPE_Q8_1, QK8_1, block_q8_1),
    T(GGML_TYPE_Q2_K, QK_K, block_q2_K), T(GGML_TYPE_Q3_K, QK_K, block_q3_K),
    T(GGML_TYPE_Q4_K, QK_K, block_q4_K), T(GGML_TYPE_Q5_K, QK_K, block_q5_K),
    T(GGML_TYPE_Q6_K, QK_K, block_q6_K), T(GGML_TYPE_Q8_K, QK_K, block_q8_K),
    T(GGML_TYPE_IQ2_XXS, QK_K, block_iq2_xxs), T(GGML_TYPE_IQ2_XS, QK_K, block_iq2_xs),
    T(GGML_TYPE_IQ3_XXS, QK_K, block_iq3_xxs), T(GGML_TYPE_IQ1_S, QK_K, block_iq1_s),
    T(GGML_TYPE_IQ4_NL, QK4_NL, block_iq4_nl), T(GGML_TYPE_IQ3_S, QK_K, block_iq3_s),
    T(GGML_TYPE_IQ2_S, QK_K, block_iq2_s), T(GGML_TYPE_IQ4_XS, QK_K, block_iq4_xs),
    T(GGML_TYPE_IQ1_M, QK_K, block_iq1_m), T(GGML_TYPE_TQ1_0, QK_K, block_tq1_0),
    T(GGML_TYPE_TQ2_0, QK_K, block_tq2_0), T(GGML_TYPE_MXFP4, QK_MXFP4, block_mxfp4),
};
#define NTYPES (sizeof(tinfos)/sizeof(tinfos[0]))

static const struct tinfo * info(int id) {
    for (size_t i = 0; i < NTYPES; i++) {
        if (tinfos[i].id == id) return &tinfos[i];
    }
    fprintf(stderr, "driver: unknown type %d\n", id);
    exit(2);
}

size_t ggml_type_size(enum ggml_type type) { return info(type)->size; }
size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    const struct tinfo * t = info(type);
    return t->size * (size_t)(ne / t->blck);
}
const char * ggml_type_name(enum ggml_type type) { (void)type; return "?"; }

typedef void (*deq_fn)(const void *, float *, int64_t);
typedef void (*q_fn)(const float *, void *, int64_t);

static void deq_f32(const void * x, float * y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void deq_f16(const void * x, float * y, int64_t n) {
    const ggml_fp16_t * h = x;
    for (int64_t i = 0; i < n; i++) y[i] = GGML_FP16_TO_FP32(h[i]);
}
static void deq_bf16(const void * x, float * y, int64_t n) {
    const ggml_bf16_t * h = x;
    for (int64_t i = 0; i < n; i++) y[i] = GGML_BF16_TO_FP32(h[i]);
}
static void deq_f64(const void * x, float * y, int64_t n) {
    const double * v = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)v[i];
}
static void deq_i8(const void * x, float * y, int64_t n) {
    const int8_t * v = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)v[i];
}
static void deq_i16(const void * x, float * y, int64_t n) {
    const int16_t * v = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)v[i];
}
static void deq_i32(const void * x, float * y, int64_t n) {
    const int32_t * v = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)v[i];
}
static void deq_i64(const void * x, float * y, int64_t n) {
    const int64_t * v = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)v[i];
}
static void q_f32(const float * x, void * y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void q_f16(const float * x, void * y, int64_t n) {
    ggml_fp16_t * h = y;
    for (int64_t i = 0; i < n; i++) h[i] = GGML_FP32_TO_FP16(x[i]);
}
static void q_bf16(const float * x, void * y, int64_t n) {
    ggml_bf16_t * h = y;
    for (int64_t i = 0; i < n; i++) h[i] = GGML_FP32_TO_BF16(x[i]);
}

#define D(id, f) case id: return (deq_fn)(f)
static deq_fn deq_for(int id) {
    switch (id) {
        D(GGML_TYPE_F32, deq_f32); D(GGML_TYPE_F16, deq_f16); D(GGML_TYPE_BF16, deq_bf16);
        D(GGML_TYPE_F64, deq_f64); D(GGML_TYPE_I8, deq_i8); D(GGML_TYPE_I16, deq_i16);
        D(GGML_TYPE_I32, deq_i32); D(GGML_TYPE_I64, deq_i64);
        D(GGML_TYPE_Q4_0, dequantize_row_q4_0); D(GGML_TYPE_Q4_1, dequantize_row_q4_1);
        D(GGML_TYPE_Q5_0, dequantize_row_q5_0); D(GGML_TYPE_Q5_1, dequantize_row_q5_1);
        D(GGML_TYPE_Q8_0, dequantize_row_q8_0);
        D(GGML_TYPE_Q2_K, dequantize_row_q2_K); D(GGML_TYPE_Q3_K, dequantize_row_q3_K);
        D(GGML_TYPE_Q4_K, dequantize_row_q4_K); D(GGML_TYPE_Q5_K, dequantize_row_q5_K);
        D(GGML_TYPE_Q6_K, dequantize_row_q6_K); D(GGML_TYPE_Q8_K, dequantize_row_q8_K);
        D(GGML_TYPE_IQ2_XXS, dequantize_row_iq2_xxs); D(GGML_TYPE_IQ2_XS, dequantize_row_iq2_xs);
        D(GGML_TYPE_IQ2_S, dequantize_row_iq2_s); D(GGML_TYPE_IQ3_XXS, dequantize_row_iq3_xxs);
        D(GGML_TYPE_IQ3_S, dequantize_row_iq3_s); D(GGML_TYPE_IQ1_S, dequantize_row_iq1_s);
        D(GGML_TYPE_IQ1_M, dequantize_row_iq1_m); D(GGML_TYPE_IQ4_NL, dequantize_row_iq4_nl);
        D(GGML_TYPE_IQ4_XS, dequantize_row_iq4_xs); D(GGML_TYPE_TQ1_0, dequantize_row_tq1_0);
        D(GGML_TYPE_TQ2_0, dequantize_row_tq2_0); D(GGML_TYPE_MXFP4, dequantize_row_mxfp4);
    }
    fprintf(stderr, "driver: no dequantizer for type %d\n", id);
    exit(2);
}

#define Q(id, f) case id: return (q_fn)(f)
static q_fn q_for(int id) {
    switch (id) {
        Q(GGML_TYPE_F32, q_f32); Q(GGML_TYPE_F16, q_f16); Q(GGML_TYPE_BF16, q_bf16);
        Q(GGML_TYPE_Q4_0, quantize_row_q4_0_ref); Q(GGML_TYPE_Q4_1, quantize_row_q4_1_ref);
        Q(GGML_TYPE_Q5_0, quantize_row_q5_0_ref); Q(GGML_TYPE_Q5_1, quantize_row_q5_1_ref);
        Q(GGML_TYPE_Q8_0, quantize_row_q8_0_ref); Q(GGML_TYPE_Q8_1, quantize_row_q8_1_ref);
        Q(GGML_TYPE_Q2_K, quantize_row_q2_K_ref); Q(GGML_TYPE_Q3_K, quantize_row_q3_K_ref);
        Q(GGML_TYPE_Q4_K, quantize_row_q4_K_ref); Q(GGML_TYPE_Q5_K, quantize_row_q5_K_ref);
        Q(GGML_TYPE_Q6_K, quantize_row_q6_K_ref); Q(GGML_TYPE_Q8_K, quantize_row_q8_K_ref);
        Q(GGML_TYPE_TQ1_0, quantize_row_tq1_0_ref); Q(GGML_TYPE_TQ2_0, quantize_row_tq2_0_ref);
        Q(GGML_TYPE_MXFP4, quantize_row_mxfp4_ref); Q(GGML_TYPE_IQ4_NL, quantize_row_iq4_nl_ref);
        Q(GGML_TYPE_IQ4_XS, quantize_row_iq4_xs_ref);
    }
    fprintf(stderr, "driver: no quantizer for type %d\n", id);
    exit(2);
}

static void * xmalloc(size_t n) {
    void * p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "driver: out of memory\n"); exit(2); }
    return p;
}

static void read_all(void * p, size_t n) {
    if (fread(p, 1, n, stdin) != n) { fprintf(stderr, "driver: short input\n"); exit(2); }
}

static void write_all(const void * p, size_t n) {
    if (fwrite(p, 1, n, stdout) != n || fflush(stdout) != 0) { fprintf(stderr, "driver: write failed\n"); exit(2); }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// bench times ITERS passes of a codec over MB megabytes of float32 data
// (for deq: the blocks quantized from that data with the reference
// quantizer) and prints the best pass in seconds.
static int bench(const char * op, int id, int mb, int iters) {
    const struct tinfo * t = info(id);
    int64_t n = (int64_t)mb * (1 << 20) / 4;
    n -= n % t->blck;
    float * x = xmalloc((size_t)n * 4);
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    }
    size_t nb = t->size * (size_t)(n / t->blck);
    void * q = xmalloc(nb);
    if (strcmp(op, "deq") == 0) {
        q_for(id)(x, q, n);
    }
    double best = 1e30;
    volatile float sink = 0;
    for (int it = 0; it < iters; it++) {
        double t0 = now();
        if (strcmp(op, "deq") == 0) {
            deq_for(id)(q, x, n);
        } else {
            q_for(id)(x, q, n);
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
        sink += x[it % n];
    }
    printf("%.9f %lld\n", best, (long long)n);
    free(x);
    free(q);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc == 2 && strcmp(argv[1], "sizes") == 0) {
        for (size_t i = 0; i < NTYPES; i++) {
            printf("%d %lld %zu\n", tinfos[i].id, (long long)tinfos[i].blck, tinfos[i].size);
        }
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "valid") == 0) {
        // One '1' (valid) or '0' per block, from ggml_validate_row_data
        // on that block alone.
        int id = atoi(argv[2]);
        int64_t nblocks = atoll(argv[3]);
        const struct tinfo * t = info(id);
        unsigned char * q = xmalloc(t->size * (size_t)nblocks);
        read_all(q, t->size * (size_t)nblocks);
        char * out = xmalloc((size_t)nblocks);
        for (int64_t i = 0; i < nblocks; i++) {
            out[i] = ggml_validate_row_data(id, q + t->size * (size_t)i, t->size) ? '1' : '0';
        }
        write_all(out, (size_t)nblocks);
        free(q);
        free(out);
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "bench") == 0) {
        return bench(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    }
    if (argc != 4) {
        fprintf(stderr, "usage: driver sizes | deq TYPE N | q TYPE N | valid TYPE NBLOCKS | bench deq|q TYPE MB ITERS\n");
        return 2;
    }
    int id = atoi(argv[2]);
    int64_t n = atoll(argv[3]);
    const struct tinfo * t = info(id);
    if (n < 0 || n % t->blck != 0) { fprintf(stderr, "driver: bad count\n"); return 2; }
    size_t nb = t->size * (size_t)(n / t->blck);
    float * x = xmalloc((size_t)n * 4);
    void * q = xmalloc(nb);
    if (strcmp(argv[1], "deq") == 0) {
        deq_fn f = deq_for(id);
        read_all(q, nb);
        f(q, x, n);
        write_all(x, (size_t)n * 4);
    } else if (strcmp(argv[1], "q") == 0) {
        q_fn f = q_for(id);
        read_all(x, (size_t)n * 4);
        memset(q, 0, nb);
        f(x, q, n);
        write_all(q, nb);
    } else {
        fprintf(stderr, "driver: unknown op %s\n", argv[1]);
        return 2;
    }
    free(x);
    free(q);
    return 0;
}
