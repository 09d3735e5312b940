"""Upstream quantizers re-expressed in torch, for quantize_interop_test.go.

Reads x.bin (bfloat16 [R, C]) from DIR, writes each scheme's codes and
scales as upstream computes them, and the upstream dequantization of
ckpt's own outputs (ckpt_*.bin) where given. Sources (read, not copied):
  fp8-block:   transformers src/transformers/integrations/finegrained_fp8.py,
               Fp8Quantize._quantize_one; dequant: DeepSeek-V3
               inference/kernel.py weight_dequant (x.float() * s per block);
               fused experts [E, out, in]: the same file's FP8Experts
               layout, Fp8Quantize (leading dims kept), Fp8Dequantize
  fp8-channel: compressed-tensors quantization/utils/helpers.py
               calculate_qparams; lifecycle/forward.py _quantize
  nvfp4:       compressed-tensors helpers.py generate_gparam and
               calculate_qparams (global_scale), forward.py _quantize,
               quant_args.py cast_to_fp4, compressors/nvfp4 pack_fp4_to_uint8
  mxfp4:       triton_kernels numerics_details/mxfp.py downcast_to_mxfp_torch
               (ROUND_UP), as transformers integrations/mxfp4.py calls it
               (axis=1 of [E, K, N]); dequant: mxfp4.py convert_moe_packed_tensors
"""
import os
import sys

import torch

d, R, C = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
x = torch.frombuffer(bytearray(open(os.path.join(d, "x.bin"), "rb").read()), dtype=torch.bfloat16).reshape(R, C)
F8 = torch.float8_e4m3fn
M = torch.finfo(F8).max


def save(name, t):
    open(os.path.join(d, name + ".bin"), "wb").write(t.contiguous().view(torch.uint8).numpy().tobytes())


def load(name, dtype, shape):
    return torch.frombuffer(bytearray(open(os.path.join(d, name + ".bin"), "rb").read()), dtype=dtype).reshape(shape)


# fp8-block, 32x32 blocks
bm = bn = 32
v = x.to(torch.float32).reshape(R // bm, bm, C // bn, bn)
amax = v.abs().amax(dim=(-3, -1))
safe = torch.where(amax > 0, amax, torch.ones_like(amax))
sc = M / safe
sc = torch.where(amax > 0, sc, torch.ones_like(sc))
save("fp8block_codes", torch.clamp(v * sc.unsqueeze(-1).unsqueeze(-3), min=-M, max=M).to(F8).reshape(R, C))
save("fp8block_scale", (1.0 / sc).to(torch.float32))
q = load("ckpt_fp8block_codes", F8, (R, C)).to(torch.float32).reshape(R // bm, bm, C // bn, bn)
s = load("ckpt_fp8block_scale", torch.float32, (R // bm, C // bn))
save("fp8block_deq", (q * s.unsqueeze(-1).unsqueeze(1)).reshape(R, C))

# fp8-block of fused experts [4, R/4, C] (FP8Experts), 32x32 blocks per
# expert: Fp8Quantize._quantize_one keeps the leading dimension; dequant:
# Fp8Dequantize.convert (reshape(-1, rows/bm, bm, cols/bn, bn) times the
# scales reshaped to (-1, rows/bm, cols/bn)).
E, r3 = 4, R // 4
v = x.to(torch.float32).reshape(E, r3, C).reshape(E, r3 // bm, bm, C // bn, bn)
amax = v.abs().amax(dim=(-3, -1))
safe = torch.where(amax > 0, amax, torch.ones_like(amax))
sc = M / safe
sc = torch.where(amax > 0, sc, torch.ones_like(sc))
save("fp8block3d_codes", torch.clamp(v * sc.unsqueeze(-1).unsqueeze(-3), min=-M, max=M).to(F8).reshape(E, r3, C))
save("fp8block3d_scale", (1.0 / sc).to(torch.float32))
q = load("ckpt_fp8block3d_codes", F8, (E, r3, C)).to(torch.float32).reshape(-1, r3 // bm, bm, C // bn, bn)
s = load("ckpt_fp8block3d_scale", torch.float32, (E, r3 // bm, C // bn)).reshape(-1, r3 // bm, C // bn)
save("fp8block3d_deq", (q * s.unsqueeze(-1).unsqueeze(2)).reshape(E, r3, C))

# fp8-channel
mn = torch.min(torch.amin(x, dim=1, keepdim=True), torch.zeros(1, dtype=x.dtype))
mx = torch.max(torch.amax(x, dim=1, keepdim=True), torch.zeros(1, dtype=x.dtype))
bit_range = torch.tensor(M).to(x.dtype) - torch.tensor(-M).to(x.dtype)
s = torch.max(mn.abs(), mx.abs()) / (float(bit_range) / 2)
s = torch.clamp(s, min=torch.finfo(torch.float32).eps)
save("fp8channel_codes", torch.clamp(x / s, -M, M).to(F8))
save("fp8channel_scale", s)

# nvfp4
mvp = torch.max(x.amin().clamp(max=0).abs(), x.amax().clamp(min=0).abs())
gs = (448.0 * 6.0 / mvp).to(torch.float32).reshape([1])
g = x.reshape(R, C // 16, 16)
gmvp = torch.max(g.amin(-1).clamp(max=0).abs(), g.amax(-1).clamp(min=0).abs())
gsc = torch.clamp(gs * (gmvp / 6.0), min=-M, max=M).to(F8)
gsc = torch.where(gsc.to(torch.float32) == 0, torch.tensor(0.125), gsc.to(torch.float32)).to(F8)
y = torch.clamp(g / (gsc.to(torch.float32) / gs).unsqueeze(-1), -6.0, 6.0)
sign = torch.sign(y)
a = torch.abs(y)
a[(a >= 0.0) & (a <= 0.25)] = 0.0
a[(a > 0.25) & (a < 0.75)] = 0.5
a[(a >= 0.75) & (a <= 1.25)] = 1.0
a[(a > 1.25) & (a < 1.75)] = 1.5
a[(a >= 1.75) & (a <= 2.5)] = 2.0
a[(a > 2.5) & (a < 3.5)] = 3.0
a[(a >= 3.5) & (a <= 5.0)] = 4.0
a[a > 5.0] = 6.0
y = (a * sign).to(x.dtype).reshape(R, C)
lut = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=y.dtype)
idx = torch.argmin(torch.abs(torch.abs(y).unsqueeze(-1) - lut), dim=-1) + (torch.signbit(y).to(torch.long) << 3)
save("nvfp4_codes", (idx[:, 0::2] | (idx[:, 1::2] << 4)).to(torch.uint8))
save("nvfp4_scale", gsc)
save("nvfp4_global", gs)

# mxfp4: [E, K, N] = [2, R/2, C], quantized along K
E, K, N = 2, R // 2, C
src = x.reshape(E, K, N).transpose(1, 2).to(torch.float32)  # [E, N, K]
grp = src.reshape(E, N, K // 32, 32)
ds = grp.abs().amax(-1, keepdim=True) / 6.0
dsr = ((ds.view(torch.int32) + 0x007FFFFF) & 0x7F800000).view(torch.float32)
qs = torch.where(dsr == 0, torch.tensor(0.0), 1.0 / dsr)
qt = (grp * qs).reshape(E, N, K).contiguous().view(torch.int32)
def rsu(v, s):
    return (v >> s) & ((1 << (32 - s)) - 1)
signs = qt & -0x80000000
exps = rsu(qt, 23) & 0xFF
mants = qt & 0x7FFFFF
mants = torch.where(exps < 127, (0x400000 | rsu(mants, 1)) >> (127 - exps - 1), mants)
exps = torch.maximum(exps, torch.tensor(126)) - 126
e2 = torch.minimum(rsu(((exps << 2) | rsu(mants, 21)) + 1, 1), torch.tensor(7))
e2 = (rsu(signs, 28) | e2).to(torch.uint8).reshape(E, N, K // 2, 2)
save("mxfp4_codes", (e2[..., 0] | (e2[..., 1] << 4)).reshape(E, N, K // 32, 16))
save("mxfp4_scale", (rsu(dsr.view(torch.int32), 23)).to(torch.uint8).squeeze(-1))
# transformers' convert_moe_packed_tensors on ckpt's blocks and scales
blocks = load("ckpt_mxfp4_codes", torch.uint8, (E, N, K // 32, 16))
scales = load("ckpt_mxfp4_scale", torch.uint8, (E, N, K // 32)).to(torch.int32) - 127
FP4 = torch.tensor([+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
b = blocks.reshape(-1, 16)
out = torch.empty(b.shape[0], 32, dtype=torch.float32)
out[:, 0::2] = FP4[(b & 0x0F).long()]
out[:, 1::2] = FP4[(b >> 4).long()]
out = torch.ldexp(out, scales.reshape(-1, 1))
save("mxfp4_deq", out.reshape(E, N, K).transpose(1, 2).contiguous())
