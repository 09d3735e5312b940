package quant

import "fmt"

// ggml's MXFP4 (GGML type 39) holds the same values as gpt-oss's layout in
// another byte order. ggml-common.h: block_mxfp4 {uint8_t e; uint8_t
// qs[QK_MXFP4/2]} with QK_MXFP4 = 32, 17 bytes a group; ggml-quants.c
// dequantize_row_mxfp4: y[j] = kvalues_mxfp4[qs[j] & 0x0F] * d and
// y[j+16] = kvalues_mxfp4[qs[j] >> 4] * d with d =
// GGML_E8M0_TO_FP32_HALF(e) = 2^(e-128) and kvalues_mxfp4 the E2M1 values
// doubled: element j of a group is in the low nibble of qs[j] and
// element j+16 in its high nibble, the value fp4 * 2^(e-127). gpt-oss
// keeps element 2j in the low nibble of byte j and 2j+1 in its high
// nibble, with the same E8M0 exponent in `_scales`. llama.cpp's
// convert_hf_to_gguf.py (GptOssModel.transform_nibble_layout and
// repack_mxfp4) rearranges the nibbles so and puts the exponent byte
// first, as MXFP4GGML does.

// MXFP4GGMLBlockBytes is the size of one ggml block_mxfp4 (32 elements).
const MXFP4GGMLBlockBytes = 17

// MXFP4GGML writes n 32-element groups in ggml's block_mxfp4 layout
// into dst (17*n bytes) from gpt-oss's blocks (16*n bytes: two E2M1
// codes a byte, the even element in the low nibble) and scales (n E8M0
// bytes). No value changes: ggml's dequantization of dst equals
// MXFP4Layout.DequantRows of the source wherever an exponent is below
// 255 (the E8M0 NaN, which transformers reads as Inf and ggml as
// 2^127: callers refuse it, as ggml's validation does). A length that
// does not match is ErrCodecBuffer.
func MXFP4GGML(dst, blocks, scales []byte) error {
	n := len(scales)
	if len(blocks) != 16*n || len(dst) != MXFP4GGMLBlockBytes*n {
		return fmt.Errorf("%w: %d groups need %d block bytes and %d output bytes, got %d and %d", ErrCodecBuffer, n, 16*n, MXFP4GGMLBlockBytes*n, len(blocks), len(dst))
	}
	for g := 0; g < n; g++ {
		out := dst[g*MXFP4GGMLBlockBytes : (g+1)*MXFP4GGMLBlockBytes]
		in := blocks[g*16 : g*16+16]
		out[0] = scales[g]
		// Element k is nibble k%2 of in[k/2]; qs[j] = element j |
		// element j+16 << 4.
		for j := 0; j < 8; j++ {
			lo, hi := in[j], in[8+j]
			out[1+2*j] = lo&0x0f | (hi&0x0f)<<4
			out[2+2*j] = lo>>4 | hi&0xf0
		}
	}
	return nil
}
