"""Generates quant/testdata/*.safetensors: small quantized weights in the
exact layouts upstream tools write, with the values upstream's own
dequantization code gives, re-expressed in pure torch (bitsandbytes, mlx,
AutoAWQ, AutoGPTQ and compressed-tensors are not installed in the torch
2.6 chroot; each function cites the upstream file it follows).

    scripts/torch2-python scripts/gen_quant_fixtures.py

Every fixture holds the stored tensors under their upstream names, then
`expected` (float32: upstream's dequantization computed in float32, the
value ckpt's codecs must give bit for bit) and, where upstream's own
output dtype is narrower, `expected_native` (upstream's output in that
dtype, e.g. bfloat16: ckpt's float32 rounded to it must equal it).
Parameters are in the safetensors metadata. Deterministic (seeded).
"""

import json
import math
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quant", "testdata")
torch.manual_seed(32)


def save(name, tensors, **meta):
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata={k: str(v) for k, v in meta.items()})


def pack_le(q, bits):
    """Dense little-endian bit stream of each row of q (ints in [0, 2^bits)),
    as int32 words: element i at bit i*bits, fields straddle words. This is
    compressed-tensors' pack_to_int32 (compressors/pack_quantized/helpers.py),
    AutoGPTQ's pack for 2/3/4/8 bits along its packed dimension
    (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py pack), and mlx's
    packing (mlx/backend/cpu/quantized.cpp extract_bits for 3/5/6 bits,
    shifts of bits*(j % (32/bits)) for 2/4/8)."""
    rows, cols = q.shape
    nwords = math.ceil(cols * bits / 32)
    out = torch.zeros(rows, nwords, dtype=torch.int64)
    for r in range(rows):
        acc = 0
        for i in range(cols):
            acc |= int(q[r, i]) << (i * bits)
        for w in range(nwords):
            out[r, w] = (acc >> (32 * w)) & 0xFFFFFFFF
    return to_int32(out)


def to_int32(words):
    """Unsigned 32-bit words (in int64) as the int32 tensors upstream stores."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack_le(words, bits, cols):
    """The reverse of pack_le (compressed-tensors unpack_from_int32 without
    the offset; AutoGPTQ's shift-and-mask unpacking)."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    rows, nwords = w.shape
    out = torch.zeros(rows, cols, dtype=torch.int64)
    for r in range(rows):
        acc = 0
        for k in range(nwords):
            acc |= int(w[r, k]) << (32 * k)
        for i in range(cols):
            out[r, i] = (acc >> (i * bits)) & ((1 << bits) - 1)
    return out


# --- MXFP4 (gpt-oss) -------------------------------------------------------
# transformers src/transformers/integrations/mxfp4.py convert_moe_packed_tensors
# https://github.com/huggingface/transformers/blob/main/src/transformers/integrations/mxfp4.py
FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def convert_moe_packed_tensors(blocks, scales, dtype):
    scales = scales.to(torch.int32) - 127
    lut = torch.tensor(FP4_VALUES, dtype=dtype)
    *prefix_shape, G, B = blocks.shape
    rows_total = math.prod(prefix_shape) * G
    blocks = blocks.reshape(rows_total, B)
    scales = scales.reshape(rows_total, 1)
    out = torch.empty(rows_total, B * 2, dtype=dtype)
    out[:, 0::2] = lut[(blocks & 0x0F).to(torch.long)]
    out[:, 1::2] = lut[(blocks >> 4).to(torch.long)]
    torch.ldexp(out, scales, out=out)
    out = out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)
    return out.transpose(1, 2).contiguous()


def gen_mxfp4():
    E, R, G = 2, 6, 3
    blocks = torch.randint(0, 256, (E, R, G, 16), dtype=torch.uint8)
    scales = torch.randint(112, 140, (E, R, G), dtype=torch.uint8)
    scales[0, 0, 0] = 0  # 2^-127: subnormal products
    scales[1, 5, 2] = 255  # 2^128 in float32 is +Inf: Inf and NaN (0 * Inf)
    save(
        "mxfp4",
        {
            "gate_up_proj_blocks": blocks,
            "gate_up_proj_scales": scales,
            "expected": convert_moe_packed_tensors(blocks, scales, torch.float32),
            "expected_native": convert_moe_packed_tensors(blocks, scales, torch.bfloat16),
        },
    )


# --- NVFP4 (compressed-tensors nvfp4-pack-quantized) ------------------------
# compressed-tensors src/compressed_tensors/compressors/nvfp4/base.py decompress,
# compressors/nvfp4/helpers.py unpack_fp4_from_uint8 / pack_fp4_to_uint8,
# quantization/lifecycle/forward.py dequantize -> forward_helpers.py _dequantize
# https://github.com/vllm-project/compressed-tensors
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def unpack_fp4_from_uint8(a, m, n, dtype=torch.bfloat16):
    a_flat = a.flatten()
    high = (a_flat & 0xF0) >> 4
    low = a_flat & 0x0F
    combined = torch.stack((low, high), dim=1).flatten()
    signs = (combined & 0x08).to(torch.bool)
    abs_vals = (combined & 0x07).to(torch.long)
    values = E2M1[abs_vals] * torch.where(signs, -1.0, 1.0)
    return values.reshape(m, n).to(dtype=dtype)


def ct_dequantize(x_q, scale, zero_point=None, dtype=None, global_scale=None, group_size=None):
    """forward_helpers.py _process_group + _dequantize (column order)."""
    if global_scale is not None:
        scale = scale / global_scale
    if scale.ndim == 2 and group_size is not None:
        x = x_q.unflatten(-1, (x_q.shape[-1] // group_size, group_size))
        scale = scale.unsqueeze(-1)
        zero_point = zero_point.unsqueeze(-1) if zero_point is not None else None
    else:
        x = x_q
    v = x.to(scale.dtype)
    if zero_point is not None:
        v = v - zero_point.to(scale.dtype)
    v = v * scale
    if dtype is not None:
        v = v.to(dtype)
    return v.reshape(x_q.shape)


def gen_nvfp4():
    out, inn = 8, 64
    w = torch.randn(out, inn) * 0.05
    # quantization as llm-compressor/compressed-tensors calibrate it:
    # global = 448*6/amax, group scale = fp8(amax_g/6 * global)
    global_scale = torch.tensor([448.0 * 6.0], dtype=torch.float32) / w.abs().max()
    amax_g = w.reshape(out, inn // 16, 16).abs().amax(-1)
    scale = (amax_g / 6.0 * global_scale).to(torch.float8_e4m3fn)
    eff = scale.to(torch.float32) / global_scale
    x = (w.reshape(out, inn // 16, 16) / eff.unsqueeze(-1)).reshape(out, inn)
    idx = torch.argmin((x.abs().unsqueeze(-1) - E2M1).abs(), dim=-1) + (torch.signbit(x).long() << 3)
    idx = idx.reshape(-1, 2)
    packed = (idx[:, 0] | (idx[:, 1] << 4)).to(torch.uint8).reshape(out, inn // 2)
    m, n = packed.shape
    unpacked = unpack_fp4_from_uint8(packed, m, n * 2)
    scale_f = scale.to(unpacked.dtype)
    native = ct_dequantize(unpacked, scale_f, dtype=unpacked.dtype, global_scale=global_scale, group_size=16)
    expected = ct_dequantize(unpacked, scale_f, dtype=torch.float32, global_scale=global_scale, group_size=16)
    save(
        "nvfp4",
        {
            "weight_packed": packed,
            "weight_scale": scale,
            "weight_global_scale": global_scale,
            "expected": expected,
            "expected_native": native,
        },
    )


# --- compressed-tensors pack-quantized / int-quantized ----------------------
# compressors/pack_quantized/base.py decompress, pack_quantized/helpers.py
# pack_to_int32/unpack_from_int32 (offset 2^(bits-1), zero points packed
# along dim 0), compressors/naive_quantized/base.py (int8 as is).
def gen_packed():
    cases = [
        # name, bits, group (0 = channel), symmetric, scale dtype, packed
        ("w4g32sym", 4, 32, True, torch.bfloat16, True),
        ("w4g16asym", 4, 16, False, torch.bfloat16, True),
        ("w8chsym", 8, 0, True, torch.float16, True),
        ("w3g32asym", 3, 32, False, torch.float32, True),
        ("w8int", 8, 0, False, torch.bfloat16, False),
    ]
    out, inn = 9, 64
    t, meta = {}, {}
    for name, bits, group, sym, sdt, packed in cases:
        w = torch.randn(out, inn)
        gs = group or inn
        wg = w.reshape(out, inn // gs, gs)
        qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if sym:
            scale = (wg.abs().amax(-1) / qmax).to(sdt)
            zp = torch.zeros_like(scale, dtype=torch.int8)
        else:
            lo, hi = wg.amin(-1).clamp(max=0), wg.amax(-1).clamp(min=0)
            scale = ((hi - lo) / (qmax - qmin)).to(sdt)
            zp = torch.clamp(torch.round(qmin - lo / scale.float()), qmin, qmax).to(torch.int8)
        q = torch.clamp(torch.round(wg / scale.float().unsqueeze(-1) + zp.unsqueeze(-1)), qmin, qmax)
        q = q.reshape(out, inn).to(torch.int8)
        off = 1 << (bits - 1)
        if packed:
            t[name + ".weight_packed"] = pack_le(q.to(torch.int64) + off, bits)
            t[name + ".weight_shape"] = torch.tensor([out, inn], dtype=torch.int64)
            if not sym:  # packed_dim=0: the columns of zp packed down the rows
                t[name + ".weight_zero_point"] = pack_le((zp.to(torch.int64) + off).t(), bits).t()
            # decompress: unpack_from_int32 then dequantize
            qu = (unpack_le(t[name + ".weight_packed"], bits, inn) - off).to(torch.int8)
            zpu = None
            if not sym:
                zpu = (unpack_le(t[name + ".weight_zero_point"].t(), bits, out) - off).t().to(torch.int8)
        else:
            t[name + ".weight"] = q
            qu, zpu = q, None
            if not sym:
                t[name + ".weight_zero_point"] = zp
                zpu = zp
        t[name + ".weight_scale"] = scale
        native = ct_dequantize(qu, scale, zpu, dtype=scale.dtype, group_size=gs if group else None)
        expected = ct_dequantize(qu, scale.float(), zpu, dtype=torch.float32, group_size=gs if group else None)
        t[name + ".expected"] = expected
        t[name + ".expected_native"] = native
        meta[name] = json.dumps({"bits": bits, "group_size": group, "symmetric": sym, "packed": packed})
    save("packed", t, cases=json.dumps(meta))


# --- compressed-tensors activation ordering (weight_g_idx) ------------------
# quantization/lifecycle/forward.py _process_quantization, GROUP strategy
# with g_idx (no -1 in it): perm = argsort(g_idx), the columns taken in
# that order, unflattened into groups of group_size, _dequantize per group
# (x_q - zp in the scale's dtype, times the scale), flattened, cast to the
# output dtype, and put back by index_select(-1, argsort(perm)). dequantize
# infers the GROUP strategy from a scale [out, G] with G > 1 (args=None, as
# pack-quantized's and int-quantized's decompress_weight call it, passing
# weight_g_idx). A g_idx holding -1 is column order (is_column_order).
# Quantized as GPTQ's act-order leaves it (llm-compressor's GPTQModifier
# with actorder): the i-th column in activation order goes to group i //
# group_size.
def ct_dequantize_gidx(x_q, scale, zero_point, g_idx, group_size, dtype):
    if (g_idx == -1).any():
        return ct_dequantize(x_q, scale, zero_point, dtype=dtype, group_size=group_size)
    perm = torch.argsort(g_idx)
    x = x_q.index_select(-1, perm).unflatten(-1, (x_q.shape[-1] // group_size, group_size))
    v = x.to(scale.dtype)
    if zero_point is not None:
        v = v - zero_point.unsqueeze(-1).to(scale.dtype)
    v = (v * scale.unsqueeze(-1)).flatten(start_dim=-2).to(dtype)
    return v.index_select(-1, torch.argsort(perm))


def gen_packed_gidx():
    torch.manual_seed(3211)
    cases = [
        # name, bits, group, symmetric, scale dtype, packed, g_idx dtype, column order (-1)
        ("w4g16asym", 4, 16, False, torch.bfloat16, True, torch.int32, False),
        ("w4g32sym", 4, 32, True, torch.float16, True, torch.int64, False),
        ("w8g16int", 8, 16, False, torch.bfloat16, False, torch.int32, False),
        ("w4g16unset", 4, 16, True, torch.bfloat16, True, torch.int32, True),
    ]
    out, inn = 7, 64
    t, meta = {}, {}
    for name, bits, gs, sym, sdt, packed, gdt, unset in cases:
        w = torch.randn(out, inn)
        order = torch.randperm(inn)  # activation order: the column taken k-th is order[k]
        g_idx = torch.empty(inn, dtype=torch.int64)
        g_idx[order] = torch.arange(inn) // gs
        if unset:
            g_idx = torch.full((inn,), -1, dtype=torch.int64)
        grp = g_idx if not unset else torch.arange(inn) // gs
        G = inn // gs
        wg = torch.stack([w[:, grp == g] for g in range(G)], dim=1)  # [out, G, gs]
        qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if sym:
            scale = (wg.abs().amax(-1) / qmax).to(sdt)
            zp = torch.zeros_like(scale, dtype=torch.int8)
        else:
            lo, hi = wg.amin(-1).clamp(max=0), wg.amax(-1).clamp(min=0)
            scale = ((hi - lo) / (qmax - qmin)).to(sdt)
            zp = torch.clamp(torch.round(qmin - lo / scale.float()), qmin, qmax).to(torch.int8)
        q = torch.clamp(torch.round(w / scale.float()[:, grp] + zp[:, grp]), qmin, qmax).to(torch.int8)
        off = 1 << (bits - 1)
        if packed:
            t[name + ".weight_packed"] = pack_le(q.to(torch.int64) + off, bits)
            t[name + ".weight_shape"] = torch.tensor([out, inn], dtype=torch.int64)
            zpu = None
            if not sym:
                t[name + ".weight_zero_point"] = pack_le((zp.to(torch.int64) + off).t(), bits).t()
                zpu = (unpack_le(t[name + ".weight_zero_point"].t(), bits, out) - off).t().to(torch.int8)
            qu = (unpack_le(t[name + ".weight_packed"], bits, inn) - off).to(torch.int8)
        else:
            t[name + ".weight"] = q
            qu, zpu = q, None
            if not sym:
                t[name + ".weight_zero_point"] = zp
                zpu = zp
        t[name + ".weight_scale"] = scale
        t[name + ".weight_g_idx"] = g_idx.to(gdt)
        t[name + ".expected"] = ct_dequantize_gidx(qu, scale.float(), zpu, g_idx, gs, torch.float32)
        t[name + ".expected_native"] = ct_dequantize_gidx(qu, scale, zpu, g_idx, gs, scale.dtype)
        meta[name] = json.dumps({"bits": bits, "group_size": gs, "symmetric": sym, "packed": packed})
    save("packed_gidx", t, cases=json.dumps(meta))


# --- GPTQ ---------------------------------------------------------------------
# AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py (pack; the torch
# dequantization of forward: zeros + 1, scales[g_idx] * (weight - zeros[g_idx]))
# https://github.com/AutoGPTQ/AutoGPTQ ; GPTQModel gptqmodel/nn_modules/qlinear/
# __init__.py dequantize_weight (v2: zeros as stored).
def gen_gptq():
    inn, out, group = 96, 16, 32
    t, meta = {}, {}
    for name, bits, v2, act in [
        ("b4v1", 4, False, False),
        ("b4v1act", 4, False, True),
        ("b8v2", 8, True, False),
        ("b3v1", 3, False, True),
        ("b2v2", 2, True, False),
    ]:
        maxq = 2**bits - 1
        groups = inn // group
        w = torch.randn(out, inn)
        g_idx = torch.arange(inn, dtype=torch.int32) // group
        if act:
            g_idx = g_idx[torch.randperm(inn)]
        scales = (torch.rand(groups, out) * 0.02 + 0.01).to(torch.float16)
        zeros = torch.randint(1, maxq + 1, (groups, out))  # v1 stores z-1: keep z >= 1
        q = torch.clamp(
            torch.round(w.t() / scales.float()[g_idx.long()] + zeros[g_idx.long()]), 0, maxq
        ).to(torch.int64)  # [in, out]
        qweight = pack_le(q.t(), bits).t()  # packed down the input dim
        stored_z = zeros if v2 else zeros - 1
        qzeros = pack_le(stored_z, bits)  # packed along the output dim
        t[name + ".qweight"] = qweight
        t[name + ".qzeros"] = qzeros
        t[name + ".scales"] = scales
        t[name + ".g_idx"] = g_idx
        # dequantization (torch reference)
        wq = unpack_le(qweight.t(), bits, inn).t()  # [in, out]
        z = unpack_le(qzeros, bits, out)
        if not v2:
            z = z + 1
        gi = g_idx.long()
        native = scales[gi] * (wq - z[gi]).to(torch.int16)  # int16 * f16 -> f16
        expected = scales.float()[gi] * (wq - z[gi]).float()
        t[name + ".expected"] = expected.t()
        t[name + ".expected_native"] = native.t()
        meta[name] = json.dumps({"bits": bits, "group_size": group, "v2": v2, "act_order": act})
    save("gptq", t, cases=json.dumps(meta))


# --- AWQ GEMM -----------------------------------------------------------------
# AutoAWQ awq/modules/linear/gemm.py from_linear (pack with order
# [0, 2, 4, 6, 1, 3, 5, 7]) and awq/utils/packing_utils.py (unpack_awq,
# reverse_awq_order, dequantize_gemm) https://github.com/casper-hansen/AutoAWQ
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def awq_pack(intw):  # [rows, cols] -> [rows, cols/8]
    rows, cols = intw.shape
    out = torch.zeros(rows, cols // 8, dtype=torch.int64)
    for c in range(cols // 8):
        for i in range(8):
            out[:, c] |= intw[:, c * 8 + AWQ_ORDER[i]].to(torch.int64) << (i * 4)
    return to_int32(out)


def dequantize_gemm(qweight, qzeros, scales, bits, group_size):
    shifts = torch.arange(0, 32, bits)
    iweights = torch.bitwise_right_shift(qweight[:, :, None], shifts[None, None, :]).to(torch.int8)
    iweights = iweights.view(iweights.shape[0], -1)
    izeros = torch.bitwise_right_shift(qzeros[:, :, None], shifts[None, None, :]).to(torch.int8)
    izeros = izeros.view(izeros.shape[0], -1)
    reverse_order_tensor = torch.arange(iweights.shape[-1], dtype=torch.int32).view(-1, 32 // bits)
    reverse_order_tensor = reverse_order_tensor[:, AWQ_REVERSE_ORDER].view(-1)
    izeros = izeros[:, reverse_order_tensor] & (2**bits - 1)
    iweights = iweights[:, reverse_order_tensor] & (2**bits - 1)
    scales = scales.repeat_interleave(group_size, dim=0)
    izeros = izeros.repeat_interleave(group_size, dim=0)
    return (iweights - izeros) * scales


def gen_awq():
    inn, out, group = 64, 24, 32
    w = torch.randn(inn, out)
    groups = inn // group
    scales = (torch.rand(groups, out) * 0.02 + 0.01).to(torch.float16)
    zeros = torch.randint(0, 16, (groups, out))
    q = torch.clamp(torch.round(w / scales.float().repeat_interleave(group, 0) + zeros.repeat_interleave(group, 0)), 0, 15).to(torch.int64)
    qweight, qzeros = awq_pack(q), awq_pack(zeros)
    native = dequantize_gemm(qweight, qzeros, scales, 4, group)
    expected = dequantize_gemm(qweight, qzeros, scales.float(), 4, group)
    save(
        "awq",
        {"qweight": qweight, "qzeros": qzeros, "scales": scales, "expected": expected.t(), "expected_native": native.t()},
        group_size=group,
    )


# --- bitsandbytes ------------------------------------------------------------
# bitsandbytes/functional.py get_4bit_type, create_dynamic_map, quantize_4bit
# (compress_statistics: offset = absmax.mean(), quantize_blockwise(absmax -
# offset, blocksize=256)), dequantize_4bit (nested: dequantize_blockwise +
# offset), QuantState.as_dict(packed=True); backends/default/ops.py
# quantize_4bit / _dequantize_4bit_compute (first element in the HIGH nibble,
# code[q] * absmax[block] in float32, then .to(dtype)),
# _dequantize_blockwise_compute, _ops.py int8_vectorwise_dequant
# (A * SCB * 7.874015718698502e-3). https://github.com/bitsandbytes-foundation/bitsandbytes
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]
FP4 = [0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0, -0, -0.0625, -8.0, -12.0, -4.0, -6.0, -2.0, -3.0]


def get_4bit_type(name):
    data = torch.tensor(NF4 if name == "nf4" else FP4)
    data.div_(data.abs().max())
    return data


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(2 ** (i + non_sign_bits - max_exponent_bits) + 1)
        boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    data += [0] * (256 - len(data))
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def blockwise(a, code, blocksize):  # nearest code per element, absmax per block
    n = a.numel()
    nb = math.ceil(n / blocksize)
    pad = torch.nn.functional.pad(a.reshape(-1), (0, nb * blocksize - n))
    absmax = pad.reshape(nb, blocksize).abs().amax(-1).clamp(min=1e-38)
    scaled = (pad.reshape(nb, blocksize) / absmax[:, None]).reshape(-1)[:n]
    q = torch.argmin((scaled[:, None] - code[None, :]).abs(), dim=-1)
    return q, absmax


def gen_bnb():
    t, meta = {}, {}
    for name, shape, qt, nested, dt in [
        ("nf4", (8, 40), "nf4", False, torch.bfloat16),
        ("fp4nested", (7, 30), "fp4", True, torch.float16),
        ("nf4nested", (24, 64), "nf4", True, torch.bfloat16),
    ]:
        blocksize = 64
        w = torch.randn(shape)
        code = get_4bit_type(qt)
        q, absmax = blockwise(w, code, blocksize)
        if q.numel() % 2:
            q = torch.cat([q, torch.zeros(1, dtype=q.dtype)])
        q8 = q.to(torch.uint8)
        packed = ((q8[::2] << 4) | q8[1::2]).unsqueeze(1)
        p = "w_" + name + ".weight"
        t[p] = packed
        state = {"quant_type": qt, "blocksize": blocksize, "dtype": str(dt).strip("torch."), "shape": list(shape)}
        if nested:
            dyn = create_dynamic_map()
            offset = absmax.mean()
            qa, nabs = blockwise(absmax - offset, dyn, 256)
            t[p + ".absmax"] = qa.to(torch.uint8)
            t[p + ".nested_absmax"] = nabs
            t[p + ".nested_quant_map"] = dyn
            state.update({"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": offset.item()})
            # dequantize_4bit: dequantize_blockwise(absmax, state2) + offset
            n2 = qa.numel()
            a2 = dyn[qa.long()]
            a2 = torch.cat([(a2[i:i + 256] * nabs[i // 256]) for i in range(0, n2, 256)]).to(torch.float32)
            a2 += torch.tensor(offset.item())
            absmax_used = a2
        else:
            t[p + ".absmax"] = absmax
            absmax_used = absmax
        t[p + ".quant_map"] = code
        t[p + ".quant_state.bitsandbytes__" + qt] = torch.tensor(list(json.dumps(state).encode()), dtype=torch.uint8)
        n = math.prod(shape)
        out_dq = torch.empty(packed.numel() * 2, dtype=torch.int64)
        out_dq[1::2] = (packed.reshape(-1) & 0xF).long()
        out_dq[::2] = (packed.reshape(-1) >> 4).long()
        vals = code[out_dq][:n]
        expected = torch.cat([vals[i:i + blocksize] * absmax_used[i // blocksize] for i in range(0, n, blocksize)])
        t[name + ".expected"] = expected.reshape(shape)
        t[name + ".expected_native"] = expected.reshape(shape).to(dt)
        meta[name] = json.dumps({"nested": nested})
    # LLM.int8: weight int8 [out, in] + SCB f32 [out]
    w = torch.randn(8, 40)
    scb = w.abs().amax(-1)
    q = torch.round(w * 127 / scb[:, None]).to(torch.int8)
    t["int8.weight"] = q
    t["int8.SCB"] = scb
    t["int8.expected"] = q * scb.view(-1, 1) * 7.874015718698502e-3
    save("bnb", t, cases=json.dumps(meta))


# --- MLX affine ------------------------------------------------------------------
# ml-explore/mlx mlx/ops.cpp quantize/dequantize (affine: w = scale * q + bias,
# groups along the last axis), mlx/backend/cpu/quantized.cpp (packing: dense
# little-endian bit stream; 3/5/6 bits as 8/8/4 elements in 3/5/3 bytes);
# mlx-lm mlx_lm/utils.py saves weight/scales/biases. https://github.com/ml-explore/mlx
def gen_mlx():
    t, meta = {}, {}
    rows, cols = 4, 128
    for bits, group, dt in [(2, 32, torch.float16), (3, 64, torch.bfloat16), (4, 64, torch.bfloat16),
                            (5, 32, torch.float16), (6, 128, torch.bfloat16), (8, 32, torch.float32),
                            (4, 128, torch.float16)]:
        name = "b%dg%d" % (bits, group)
        w = torch.randn(rows, cols)
        wg = w.reshape(rows, cols // group, group)
        lo, hi = wg.amin(-1), wg.amax(-1)
        scale = ((hi - lo) / (2**bits - 1)).to(dt)
        bias = lo.to(dt)
        q = torch.clamp(torch.round((wg - bias.float()[..., None]) / scale.float()[..., None]), 0, 2**bits - 1)
        q = q.reshape(rows, cols).to(torch.int64)
        # mlx stores U32; this safetensors (0.4.5) has no U32, so I32, the same bytes
        t[name + ".weight"] = pack_le(q, bits)
        t[name + ".scales"] = scale
        t[name + ".biases"] = bias
        qg = q.reshape(rows, cols // group, group).float()
        t[name + ".expected"] = (qg * scale.float()[..., None] + bias.float()[..., None]).reshape(rows, cols)
        meta[name] = json.dumps({"bits": bits, "group_size": group})
    save("mlx", t, cases=json.dumps(meta))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    gen_mxfp4()
    gen_nvfp4()
    gen_packed()
    gen_gptq()
    gen_awq()
    gen_bnb()
    gen_mlx()
    gen_packed_gidx()  # seeds itself: the fixtures above stay as they were
