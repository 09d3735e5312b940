// ggufref: the C side of bench/gguf.sh. A plain loop over ggml's own
// reference routines (ggml-quants.c, compiled from the Go module cache by
// bench/gguf.sh; no ggml code is stored here), doing the work of
// `ckpt convert` with file I/O included:
//
//   ggufref deq TYPE IN OFFSET OUT   blocks of TYPE from IN[OFFSET:] -> float32 in OUT
//   ggufref q   TYPE IN OFFSET OUT   float32 from IN[OFFSET:] -> blocks of TYPE in OUT
//
// TYPE is q8_0 or q4_k. Chunks of 1M elements are read with read(2),
// converted, written with write(2); OUT is fsynced before exit, as ckpt
// fsyncs its output. One thread, as ggml's reference routines are.

#include "ggml-quants.h"
#include "ggml-impl.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list ap;
    fprintf(stderr, "ggml_abort %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

// ggml.c symbols ggml-quants.c references from functions not called here.
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }

static size_t readall(int fd, void * buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *) buf + got, n - got);
        if (k < 0) { perror("read"); exit(1); }
        if (k == 0) break;
        got += (size_t) k;
    }
    return got;
}

static void writeall(int fd, const void * buf, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, buf, n);
        if (k <= 0) { perror("write"); exit(1); }
        buf = (const char *) buf + k;
        n -= (size_t) k;
    }
}

int main(int argc, char ** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: ggufref deq|q q8_0|q4_k IN OFFSET OUT\n");
        return 2;
    }
    int deq = strcmp(argv[1], "deq") == 0;
    int q8 = strcmp(argv[2], "q8_0") == 0;
    if (!q8 && strcmp(argv[2], "q4_k") != 0) { fprintf(stderr, "type %s\n", argv[2]); return 2; }
    const int64_t blck = q8 ? QK8_0 : QK_K;
    const size_t bsize = q8 ? sizeof(block_q8_0) : sizeof(block_q4_K);
    const int64_t chunk = 1 << 20; // elements per step
    int in = open(argv[3], O_RDONLY);
    if (in < 0) { perror(argv[3]); return 1; }
    if (lseek(in, atoll(argv[4]), SEEK_SET) < 0) { perror("lseek"); return 1; }
    int out = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) { perror(argv[5]); return 1; }
    size_t qbytes = (size_t) (chunk / blck) * bsize;
    void * qbuf = malloc(qbytes);
    float * fbuf = malloc((size_t) chunk * sizeof(float));
    for (;;) {
        if (deq) {
            size_t n = readall(in, qbuf, qbytes);
            if (n == 0) break;
            int64_t k = (int64_t) (n / bsize) * blck;
            if (q8) dequantize_row_q8_0(qbuf, fbuf, k); else dequantize_row_q4_K(qbuf, fbuf, k);
            writeall(out, fbuf, (size_t) k * sizeof(float));
        } else {
            size_t n = readall(in, fbuf, (size_t) chunk * sizeof(float));
            if (n == 0) break;
            int64_t k = (int64_t) (n / sizeof(float)) / blck * blck;
            if (q8) quantize_row_q8_0_ref(fbuf, qbuf, k); else quantize_row_q4_K_ref(fbuf, qbuf, k);
            writeall(out, qbuf, (size_t) (k / blck) * bsize);
        }
    }
    if (fsync(out) != 0) { perror("fsync"); return 1; }
    close(out);
    return 0;
}
