# Test helper (run by the Go tests in the torch 2.6 chroot, scripts/torch2-python):
# writes quantized releases the way their tools lay them out, and the values
# the upstream dequantizers give for them.
#
#   quantize.py fp8 DIR [e4m3|e5m2] [BH] [BW] [torch_dtype]
#   quantize.py ct DIR [torch_dtype]
#
# Each DIR gets release/model.safetensors + release/config.json (the release) and
# expected.safetensors (NAME.f32 = the upstream dequantization in float32 or
# in the scale's dtype where upstream computes there, NAME.out = that value
# in the model's dtype).
#
# Block FP8, as deepseek-ai/DeepSeek-V3 inference/kernel.py weight_dequant
# computes it (https://github.com/deepseek-ai/DeepSeek-V3/blob/main/inference/kernel.py:
# x.to(float32) * s for block (pid_m, pid_n), edges masked, stored in the
# default dtype, which inference/fp8_cast_bf16.py sets to bfloat16), and
# quantized as transformers' integrations/finegrained_fp8.py act_quant does
# (s = amax / 448 per block, codes = x / s).
#
# compressed-tensors float-quantized, as
# vllm-project/compressed-tensors src/compressed_tensors/quantization/lifecycle/forward.py
# _dequantize computes it: x_q.to(scale.dtype) * scale, broadcast per
# tensor / channel / group, per block over the padded weight, then cut.
# Groups with activation ordering (weight_g_idx) as _process_quantization
# (same file, strategy group) applies g_idx: columns sorted by
# argsort(g_idx), cut into groups of group_size, x_q.to(scale.dtype) *
# scale per group, output.to(scale.dtype), columns put back by
# argsort(perm); quantized the way GPTQ's act-order assigns groups (the
# columns in a permuted order, group_size at a time).
import json, os, sys
import torch
from safetensors.torch import save_file

F8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
DT = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def model(shapes):
    torch.manual_seed(0)
    out = {}
    for name, (o, i) in shapes.items():
        lin = torch.nn.Linear(i, o, bias=False)
        w = lin.weight.detach().float()
        # a few outliers per weight, so that blocks differ in range
        w[0, 0] = 3.5
        w[-1, -1] = -0.004
        out[name] = w
    return out


def block_scales(w, bh, bw, fmax):
    M, N = w.shape
    s = torch.empty((M + bh - 1) // bh, (N + bw - 1) // bw)
    for r in range(s.shape[0]):
        for c in range(s.shape[1]):
            s[r, c] = w[r * bh:(r + 1) * bh, c * bw:(c + 1) * bw].abs().max().clamp(min=1e-12) / fmax
    return s


def expand(s, bh, bw, M, N):
    return s.repeat_interleave(bh, 0).repeat_interleave(bw, 1)[:M, :N]


def weight_dequant(x, s, bh, bw):
    # DeepSeek's weight_dequant: float32 product per block
    M, N = x.shape
    return x.to(torch.float32) * expand(s, bh, bw, M, N)


def fp8(d, fmt="e4m3", bh=128, bw=128, tdtype="bfloat16"):
    f8 = F8[fmt]
    fmax = torch.finfo(f8).max
    shapes = {
        "model.layers.0.self_attn.q_proj.weight": (300, 200),  # ragged both ways
        "model.layers.0.mlp.down_proj.weight": (256, 384),  # whole blocks
        "model.layers.0.mlp.up_proj.weight": (130, 70),  # one ragged block column
    }
    ws = model(shapes)
    st, exp = {}, {}
    for n, w in ws.items():
        s = block_scales(w, bh, bw, fmax)
        q = (w / expand(s, bh, bw, *w.shape)).clamp(-fmax, fmax).to(f8)
        st[n] = q
        st[n + "_scale_inv"] = s
        y = weight_dequant(q, s, bh, bw)
        exp[n + ".f32"] = y
        exp[n + ".out"] = y.to(DT[tdtype]).clone()
    st["model.norm.weight"] = torch.ones(200, dtype=DT[tdtype])
    st["lm_head.weight"] = torch.randn(16, 200).to(DT[tdtype])
    exp["model.norm.weight.out"] = st["model.norm.weight"]
    exp["lm_head.weight.out"] = st["lm_head.weight"]
    save_file(st, os.path.join(d, "release", "model.safetensors"))
    save_file(exp, os.path.join(d, "expected.safetensors"))
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "torch_dtype": tdtype,
           "quantization_config": {"quant_method": "fp8", "fmt": fmt, "activation_scheme": "dynamic",
                                   "weight_block_size": [bh, bw]}}
    json.dump(cfg, open(os.path.join(d, "release", "config.json"), "w"), indent=2)


def ct_dequant(q, s, strategy, arg):
    # compressed-tensors _dequantize: x_q.to(scale.dtype) * scale
    M, N = q.shape
    if strategy == "tensor":
        return q.to(s.dtype) * s
    if strategy == "channel":
        return q.to(s.dtype) * s
    if strategy == "group":
        g = arg
        return (q.to(s.dtype).unflatten(-1, (N // g, g)) * s.unsqueeze(-1)).flatten(-2)
    bh, bw = arg
    pm, pn = -(-M // bh) * bh, -(-N // bw) * bw
    x = torch.zeros(pm, pn, dtype=q.dtype)
    x[:M, :N] = q
    xb = x.reshape(pm // bh, bh, pn // bw, bw).transpose(1, 2)
    y = xb.to(s.dtype) * s.unsqueeze(-1).unsqueeze(-1)
    return y.transpose(1, 2).reshape(pm, pn)[:M, :N]


def ct_dequant_gidx(q, s, g_idx, group_size):
    # _process_quantization, strategy group, do_dequantize, g_idx set
    perm = torch.argsort(g_idx)
    x = q.index_select(-1, perm)
    x = x.unflatten(-1, (-(-x.shape[-1] // group_size), group_size))
    out = (x.to(s.dtype) * s.unsqueeze(-1)).flatten(start_dim=-2).to(s.dtype)
    return out.index_select(-1, torch.argsort(perm))


def gidx_quantize(w, gs, fmax, f8, sdt):
    M, N = w.shape
    order = torch.randperm(N)  # the act-order: columns by (made-up) activation size
    g_idx = torch.empty(N, dtype=torch.int32)
    g_idx[order] = torch.arange(N, dtype=torch.int32) // gs
    s = torch.stack([w[:, g_idx == g].abs().amax(dim=1) for g in range(N // gs)], dim=1) / fmax
    q = (w / s[:, g_idx.long()]).clamp(-fmax, fmax).to(f8)
    return q, s.to(sdt), g_idx


def ct(d, tdtype="bfloat16"):
    f8 = torch.float8_e4m3fn
    fmax = torch.finfo(f8).max
    p = "model.layers.0."
    mods = {  # module: (shape, strategy, arg, scale dtype)
        p + "self_attn.q_proj": ((300, 200), "block", (128, 128), torch.float32),
        p + "self_attn.o_proj": ((96, 128), "group", 32, torch.bfloat16),
        p + "self_attn.v_proj": ((64, 96), "tensor", None, torch.float32),
        p + "mlp.up_proj": ((72, 64), "channel", None, torch.bfloat16),
        p + "mlp.down_proj": ((64, 72), "channel", None, torch.float16),
    }
    ws = model({m + ".weight": sh for m, (sh, _, _, _) in mods.items()})
    st, exp = {}, {}
    for m, (sh, strat, arg, sdt) in mods.items():
        w = ws[m + ".weight"]
        M, N = w.shape
        if strat == "tensor":
            s = (w.abs().max() / fmax).reshape(1)
            q = (w / s).clamp(-fmax, fmax).to(f8)
        elif strat == "channel":
            s = w.abs().amax(dim=1, keepdim=True) / fmax
            q = (w / s).clamp(-fmax, fmax).to(f8)
        elif strat == "group":
            s = w.abs().unflatten(-1, (N // arg, arg)).amax(-1) / fmax
            q = (w.unflatten(-1, (N // arg, arg)) / s.unsqueeze(-1)).flatten(-2).clamp(-fmax, fmax).to(f8)
        else:
            s = block_scales(w, arg[0], arg[1], fmax)
            q = (w / expand(s, arg[0], arg[1], M, N)).clamp(-fmax, fmax).to(f8)
        s = s.to(sdt)
        st[m + ".weight"] = q
        st[m + ".weight_scale"] = s
        y = ct_dequant(q, s, strat, arg)
        exp[m + ".weight.f32"] = y.to(torch.float32).contiguous()
        exp[m + ".weight.out"] = y.to(DT[tdtype]).clone()
    for m, sdt, gs in ((p + "mlp.gate_proj", torch.bfloat16, 16), (p + "mlp.shared_proj", torch.float32, 32)):
        w = model({m + ".weight": (40, 128)})[m + ".weight"]
        q, s, g_idx = gidx_quantize(w, gs, fmax, f8, sdt)
        st[m + ".weight"], st[m + ".weight_scale"], st[m + ".weight_g_idx"] = q, s, g_idx
        y = ct_dequant_gidx(q, s, g_idx, gs)
        exp[m + ".weight.f32"] = y.to(torch.float32).contiguous()
        exp[m + ".weight.out"] = y.to(DT[tdtype]).clone()
    st[p + "self_attn.v_proj.input_scale"] = torch.tensor([0.25])
    st[p + "self_attn.k_proj.weight"] = torch.randn(64, 96).to(DT[tdtype])  # ignored: stays
    st["lm_head.weight"] = torch.randn(16, 64).to(DT[tdtype])
    exp[p + "self_attn.k_proj.weight.out"] = st[p + "self_attn.k_proj.weight"]
    exp["lm_head.weight.out"] = st["lm_head.weight"]
    w8 = lambda strategy, **kw: dict({"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
                                      "strategy": strategy}, **kw)
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
          "config_groups": {
              "group_0": {"targets": ["re:.*q_proj$"], "weights": w8("block", block_structure=[128, 128])},
              "group_1": {"targets": ["re:.*mlp\\..*_proj"], "weights": w8("channel")},
              "group_2": {"targets": [p + "self_attn.o_proj"], "weights": w8("group", group_size=32)},
              "group_4": {"targets": [p + "mlp.gate_proj"], "weights": w8("group", group_size=16, actorder="group")},
              "group_5": {"targets": [p + "mlp.shared_proj"], "weights": w8("group", group_size=32, actorder="weight")},
              "group_3": {"targets": ["Linear"], "weights": w8("tensor"),
                          "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}},
          },
          "ignore": ["lm_head", "re:.*k_proj$"]}
    cfg = {"architectures": ["LlamaForCausalLM"], "torch_dtype": tdtype, "quantization_config": qc}
    save_file(st, os.path.join(d, "release", "model.safetensors"))
    save_file(exp, os.path.join(d, "expected.safetensors"))
    json.dump(cfg, open(os.path.join(d, "release", "config.json"), "w"), indent=2)


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(d, "release"), exist_ok=True)
    if mode == "fp8":
        a = sys.argv[3:]
        fp8(d, a[0] if a else "e4m3", int(a[1]) if len(a) > 1 else 128, int(a[2]) if len(a) > 2 else 128,
            a[3] if len(a) > 3 else "bfloat16")
    elif mode == "ct":
        ct(d, sys.argv[3] if len(sys.argv) > 3 else "bfloat16")
