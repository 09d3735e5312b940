// Package ggml implements the numeric codecs of ggml's tensor types (the
// element types of GGUF files): the type table, and conversion of block
// data to and from float32, bit for bit equal to ggml's reference C code
// (ggml-quants.c, ggml-impl.h) as vendored by github.com/ollama/ollama
// v0.17.4. The GGUF container itself is read and written elsewhere;
// this package only knows blocks.
//
// # Types
//
// Type carries ggml's enum ggml_type ids. The ids in ggml.h at that
// version, and what this package does with each:
//
//	id  name     block  bytes  Dequantize  Quantize
//	 0  f32          1      4  yes         yes
//	 1  f16          1      2  yes         yes
//	 2  q4_0        32     18  yes         yes
//	 3  q4_1        32     20  yes         yes
//	 6  q5_0        32     22  yes         yes
//	 7  q5_1        32     24  yes         yes
//	 8  q8_0        32     34  yes         yes
//	 9  q8_1        32     36  yes (1)     yes
//	10  q2_K       256     84  yes         yes
//	11  q3_K       256    110  yes         yes
//	12  q4_K       256    144  yes         yes
//	13  q5_K       256    176  yes         yes
//	14  q6_K       256    210  yes         yes
//	15  q8_K       256    292  yes         yes
//	16  iq2_xxs    256     66  yes         no
//	17  iq2_xs     256     74  yes         no
//	18  iq3_xxs    256     98  yes         no
//	19  iq1_s      256     50  yes         no
//	20  iq4_nl      32     18  yes         yes (3)
//	21  iq3_s      256    110  yes         no
//	22  iq2_s      256     82  yes         no
//	23  iq4_xs     256    136  yes         yes (3)
//	24  i8           1      1  yes (2)     no
//	25  i16          1      2  yes (2)     no
//	26  i32          1      4  yes (2)     no
//	27  i64          1      8  yes (2)     no
//	28  f64          1      8  yes (2)     no
//	29  iq1_m      256     56  yes         no
//	30  bf16         1      2  yes         yes
//	34  tq1_0      256     54  yes         yes
//	35  tq2_0      256     66  yes         yes
//	39  mxfp4       32     17  yes         yes
//
// (1) ggml has no Q8_1 dequantizer (Q8_1 is an intermediate format of its
// dot products); here it decodes as qs*d, ignoring the stored sum.
// (2) ggml does not convert these to float; here they are converted with
// float32 rounding to nearest even, as a C cast does.
// (3) quantize_row_iq4_nl_ref and quantize_row_iq4_xs_ref, without an
// importance matrix (llama-quantize uses one for IQ types).
//
// Removed ids, which ggml no longer reads and this package reports as
// ErrUnknownType: 4 (Q4_2), 5 (Q4_3), 31-33 (Q4_0_4_4, Q4_0_4_8,
// Q4_0_8_8: repacked Q4_0, now done at load time) and 36-38 (IQ4_NL_4_4,
// IQ4_NL_4_8, IQ4_NL_8_8). GGML_TYPE_COUNT is 40 at v0.17.4, as in the
// upstream ggml-org/llama.cpp ggml.h checked when this was written
// (commit 004eaba8). Later upstream versions are reported to add
// GGML_TYPE_NVFP4 = 40 (llama.cpp PR #19769, 2026); that was not verified
// against the source, and ids from 40 on are ErrUnknownType here.
//
// # Exactness
//
// Dequantize and Quantize follow ggml's reference routines
// (dequantize_row_*, quantize_row_*_ref, GGML_FP16_TO_FP32,
// GGML_FP32_TO_FP16, GGML_FP32_TO_BF16) operation for operation in
// float32, without fused multiply-adds, so the results are the same bits
// as the C compiled without contraction: what ggml's release builds give
// on x86-64, where ggml-quants.c is compiled for the baseline
// instruction set (no FMA). (gcc contracts by default where FMA is in
// the baseline, e.g. arm64, so a ggml built there may differ from these
// results in the last bit of some values; this package gives the x86-64
// bits on every platform.) The tests compile ggml's C from the module
// cache (-O2 -DNDEBUG -ffp-contract=off) and compare on random blocks and
// data (internal/ggmlref). Where the C is undefined (a float converted
// to an int out of range, which inputs with infinities, NaNs or extreme
// dynamic range reach) the Go follows what x86-64 does. The nearest_int
// assertion of ggml's debug builds is not reproduced: subnormal groups,
// which trip it, get the release builds' result.
//
// Validate applies ggml's own checks for data read from a file (no NaN
// or infinite values or block scales), so a reader can refuse a bad
// tensor before decoding it; Dequantize itself accepts any bytes.
//
// Block data is little-endian, as in GGUF files of either byte order for
// the quantized types; DequantizeBigEndian and QuantizeBigEndian serve
// the plain types of big-endian files.
//
// # Performance
//
// The codecs work on whole blocks with no allocation (Quantize and
// Dequantize allocate nothing but a 256 KiB F16 table, once, for long
// F16 rows). On amd64, Q8_0 and Q4_K dequantization and Q8_0
// quantization use SSE2 assembly doing the same float32 operations four
// lanes at a time (Q8_0 blocks with a NaN, an infinity or a zero or
// subnormal maximum are left to the Go code); elsewhere, or with -tags
// purego, the Go code runs. BenchmarkVsC compares with ggml's
// C compiled -O3 and -O2.
//
// The lookup tables of the IQ, TQ and MXFP4 types are ggml's format data,
// generated from ggml-common.h by internal/gen (go generate); they carry
// ggml's MIT license.
package ggml
