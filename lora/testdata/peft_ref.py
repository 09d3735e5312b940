"""Reference for ckpt merge: PEFT's LoRA merge, followed in pure torch.

PEFT is not packaged in the torch 2.x chroot, so this follows its code
(huggingface/peft at 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40):
  - scaling: LoraLayer.update_layer (src/peft/tuners/lora/layer.py):
    lora_alpha / r, or lora_alpha / math.sqrt(r) with use_rslora;
  - rank_pattern / alpha_pattern: get_pattern_key (src/peft/utils/other.py),
    re.match(rf"(.*\\.)?({key})$", module), first key in order;
  - Linear.get_delta_weight: transpose(B @ A, fan_in_fan_out) * scaling;
    Linear.merge: W += delta, bias += lora_B.bias * scaling (lora_bias);
  - Embedding.get_delta_weight: transpose(B @ A, True) * scaling with
    lora_embedding_A / lora_embedding_B;
  - DoRA, DoraLinearVariant.merge_safe (variants.py) with
    DoraLinearLayer.get_weight_norm (dora.py): norm = ||transpose(W, fifo) +
    transpose(delta, fifo)|| over dim 1, W' = transpose((m / norm).view(-1, 1),
    fifo) * (W + delta); DoraEmbeddingVariant likewise over W.T + delta.T;
  - add_weighted_adapter(combination_type="cat") (lora/model.py): A_i scaled by
    weight_i * scaling_i, concatenated along the rank, B_i concatenated, and
    the combined adapter's scaling 1;
  - saved names: get_peft_model_state_dict (src/peft/utils/save_and_load.py):
    "base_model.model." + module + ".lora_A.weight", adapter name removed,
    lora_embedding_A/B and lora_magnitude_vector without ".weight",
    modules_to_save and trained biases under the base's own names.
The forward pass of base + adapter (unmerged) follows Linear.forward,
Embedding.forward and DoraLinearLayer.forward.

usage: peft_ref.py make DIR      base, adapters and expected merges under DIR
       peft_ref.py forward DIR CASE MERGED   forward pass of merged vs base+adapter
       peft_ref.py fp8 QDIR ADAPTER OUT      a block-FP8 base merged: QDIR/model.safetensors
                                             dequantized as DeepSeek-V3's weight_dequant
                                             (inference/kernel.py: each 128x128, or
                                             config.json's weight_block_size, block of
                                             x.float() times its weight_scale_inv, stored
                                             in the default dtype, bfloat16 there), then a
                                             plain LoRA ADAPTER merged as Linear.merge; OUT
                                             holds the merged weights and their bounds
"""
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

torch.manual_seed(0)
D, V, H, LAYERS = 16, 50, 32, 2
PREFIX = "base_model.model."


def transpose(w, fifo):
    return w.T if fifo else w


class Conv1D(torch.nn.Module):
    """transformers' Conv1D: weight (in, out), y = x @ W + b (fan_in_fan_out)."""

    def __init__(self, nin, nout):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nin, nout) * 0.2)
        self.bias = torch.nn.Parameter(torch.randn(nout) * 0.1)

    def forward(self, x):
        return x @ self.weight + self.bias


def base_state():
    sd = {"embed.weight": torch.randn(V, D), "lm_head.weight": torch.randn(V, D) * 0.2}
    for i in range(LAYERS):
        p = f"layers.{i}."
        sd[p + "attn.q_proj.weight"] = torch.randn(D, D) * 0.2
        sd[p + "attn.q_proj.bias"] = torch.randn(D) * 0.1
        sd[p + "attn.v_proj.weight"] = torch.randn(D, D) * 0.2
        sd[p + "attn.v_proj.bias"] = torch.randn(D) * 0.1
        sd[p + "mlp.c_fc.weight"] = torch.randn(D, H) * 0.2  # Conv1D: (in, out)
        sd[p + "mlp.c_fc.bias"] = torch.randn(H) * 0.1
        sd[p + "mlp.c_proj.weight"] = torch.randn(D, H) * 0.2
        sd[p + "mlp.c_proj.bias"] = torch.randn(D) * 0.1
    return {k: v.contiguous() for k, v in sd.items()}


# Each module of the model: kind and (in, out).
def module_kind(name):
    if name == "embed":
        return "embedding", V, D
    if name.endswith("c_fc"):
        return "conv1d", D, H
    if name.endswith("c_proj"):
        return "linear", H, D
    if name == "lm_head":
        return "linear", D, V
    return "linear", D, D


def modules_matching(cfg):
    names = ["embed", "lm_head"] + [f"layers.{i}.{m}" for i in range(LAYERS)
                                    for m in ("attn.q_proj", "attn.v_proj", "mlp.c_fc", "mlp.c_proj")]
    tm = cfg["target_modules"]
    if isinstance(tm, str):
        return [n for n in names if re.fullmatch(tm, n)]
    return [n for n in names if n in tm or any(n.endswith("." + t) for t in tm)]


def pattern(pats, module, default):
    for key in pats:  # get_pattern_key: first match in order
        if re.match(rf"(.*\.)?({key})$", module):
            return pats[key]
    return default


def scaling(cfg, module):
    r = pattern(cfg.get("rank_pattern", {}), module, cfg["r"])
    alpha = pattern(cfg.get("alpha_pattern", {}), module, cfg["lora_alpha"])
    s = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
    return r, s


CASES = {
    "plain": [dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])],
    "rslora": [dict(r=4, lora_alpha=16, use_rslora=True, target_modules=["q_proj", "v_proj", "c_proj"])],
    "patterns": [dict(r=4, lora_alpha=8, target_modules=r".*\.(q_proj|v_proj|c_proj)",
                      rank_pattern={"layers.1.attn.q_proj": 2, "c_proj": 6},
                      alpha_pattern={"v_proj": 3, "layers\\.0\\..*q_proj": 5})],
    "fifo": [dict(r=4, lora_alpha=4, fan_in_fan_out=True, target_modules=["c_fc"])],
    "dora": [dict(r=4, lora_alpha=8, use_dora=True, target_modules=["q_proj", "c_proj"])],
    "embed": [dict(r=3, lora_alpha=6, target_modules=["embed"])],
    "save": [dict(r=4, lora_alpha=8, target_modules=["v_proj"], modules_to_save=["lm_head"], bias="all")],
    "lorabias": [dict(r=4, lora_alpha=8, target_modules=["q_proj"], lora_bias=True)],
    "two": [dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], weight=0.7),
            dict(r=2, lora_alpha=4, use_rslora=True, target_modules=["v_proj", "c_proj"], weight=-0.35, bin=True)],
}


def make_adapter(cfg, base):
    """Random trained-looking weights for cfg, with PEFT's saved names; returns (saved, parts)."""
    saved, parts = {}, {}
    for m in modules_matching(cfg):
        kind, nin, nout = module_kind(m)
        r, s = scaling(cfg, m)
        A = torch.randn(r, nin) * 0.3
        B = torch.randn(nout, r) * 0.3
        p = dict(A=A, B=B, s=s, kind=kind)
        if kind == "embedding":
            saved[PREFIX + m + ".lora_embedding_A"] = A
            saved[PREFIX + m + ".lora_embedding_B"] = B
        else:
            saved[PREFIX + m + ".lora_A.weight"] = A
            saved[PREFIX + m + ".lora_B.weight"] = B
        if cfg.get("use_dora"):
            W = base[m + ".weight"]
            fifo = kind == "conv1d"
            # a trained magnitude: the initial norm, perturbed
            mag = torch.linalg.norm(transpose(W, fifo) + s * (B @ A), dim=1) * (1 + 0.1 * torch.rand(nout))
            saved[PREFIX + m + ".lora_magnitude_vector"] = mag
            p["mag"] = mag
        if cfg.get("lora_bias"):
            bb = torch.randn(nout) * 0.2
            saved[PREFIX + m + ".lora_B.bias"] = bb
            p["bias"] = bb
        parts[m] = p
    repl = {}
    for m in cfg.get("modules_to_save") or []:
        t = base[m + ".weight"] + torch.randn_like(base[m + ".weight"]) * 0.05
        saved[PREFIX + m + ".weight"] = t
        repl[m + ".weight"] = t
    if cfg.get("bias") == "all":
        k = "layers.0.attn.q_proj.bias"
        t = base[k] + 0.5
        saved[PREFIX + k] = t
        repl[k] = t
    return {k: v.contiguous() for k, v in saved.items()}, parts, repl


def peft_config(cfg):
    c = {k: v for k, v in cfg.items() if k not in ("weight", "bin")}
    c.update(peft_type="LORA", task_type="CAUSAL_LM", base_model_name_or_path="tiny", inference_mode=True,
             lora_dropout=0.0, init_lora_weights=True, layers_to_transform=None, layers_pattern=None,
             revision=None, megatron_config=None, megatron_core="megatron.core", loftq_config={},
             layer_replication=None, runtime_config={"ephemeral_gpu_offload": False})
    c.setdefault("fan_in_fan_out", False)
    c.setdefault("bias", "none")
    c.setdefault("use_rslora", False)
    c.setdefault("use_dora", False)
    c.setdefault("modules_to_save", None)
    c.setdefault("rank_pattern", {})
    c.setdefault("alpha_pattern", {})
    return c


def merged(base, adapters):
    """PEFT's merge of the adapters (each (cfg, parts, repl)) into base; bound: |terms| per element."""
    out = {k: v.clone() for k, v in base.items()}
    bound = {k: v.abs().clone() for k, v in base.items()}
    if len(adapters) > 1:
        # add_weighted_adapter(combination_type="cat"): one adapter, scaling 1
        mods = {}
        for cfg, parts, _ in adapters:
            for m, p in parts.items():
                mods.setdefault(m, []).append((cfg["weight"] * p["s"] * p["A"], p["B"], p["kind"]))
        for m, ls in mods.items():
            A = torch.cat([a for a, _, _ in ls], 0)
            B = torch.cat([b for _, b, _ in ls], 1)
            fifo = ls[0][2] != "linear"
            k = m + ".weight"
            out[k] += transpose(B @ A, fifo)
            bound[k] += transpose(B.abs() @ A.abs(), fifo)
        return out, bound
    cfg, parts, repl = adapters[0]
    for m, p in parts.items():
        k = m + ".weight"
        W, A, B, s = base[k], p["A"], p["B"], p["s"]
        fifo = p["kind"] != "linear"  # Conv1D (fan_in_fan_out) and Embedding transpose
        delta = transpose(B @ A, fifo) * s  # get_delta_weight
        if "mag" in p:
            norm = torch.linalg.norm(transpose(W, fifo) + transpose(delta, fifo), dim=1)
            f = transpose((p["mag"] / norm).view(-1, 1), fifo)
            out[k] = f * (W + delta)
            bound[k] = f.abs() * (W.abs() + abs(s) * transpose(B.abs() @ A.abs(), fifo)) + out[k].abs()
        else:
            out[k] = W + delta
            bound[k] = W.abs() + abs(s) * transpose(B.abs() @ A.abs(), fifo)
        if "bias" in p:
            kb = m + ".bias"
            out[kb] = base[kb] + p["bias"] * s
            bound[kb] = base[kb].abs() + (p["bias"] * s).abs()
    for k, t in repl.items():
        out[k] = t.clone()
        bound[k] = t.abs()
    return out, bound


def make(d):
    base = base_state()
    save_file(base, os.path.join(d, "model.safetensors"))
    for case, cfgs in CASES.items():
        adapters = []
        for i, cfg in enumerate(cfgs):
            saved, parts, repl = make_adapter(cfg, base)
            ad = os.path.join(d, case, f"a{i}")
            os.makedirs(ad)
            with open(os.path.join(ad, "adapter_config.json"), "w") as f:
                json.dump(peft_config(cfg), f, indent=2)
            if cfg.get("bin"):
                torch.save(saved, os.path.join(ad, "adapter_model.bin"))
            else:
                save_file(saved, os.path.join(ad, "adapter_model.safetensors"))
            cfg = dict(cfg, weight=cfg.get("weight", 1.0))
            adapters.append((cfg, parts, repl))
        out, bound = merged(base, adapters)
        changed = {k: v for k, v in out.items() if not torch.equal(v, base[k])}
        save_file(changed, os.path.join(d, case, "expected.safetensors"))
        save_file({k: bound[k].contiguous() for k in changed}, os.path.join(d, case, "bound.safetensors"))
        with open(os.path.join(d, case, "weights.json"), "w") as f:
            json.dump([c.get("weight", 1.0) for c in cfgs], f)


def lora_forward(base, adapters, ids):
    """The model's forward with the adapters unmerged (PEFT's forward)."""
    def lin(m, x, W, b, fifo=False):
        y = x @ W + b if fifo else F.linear(x, W, b)
        for cfg, saved in adapters:
            w = cfg.get("weight", 1.0)
            A = saved.get(PREFIX + m + ".lora_A.weight")
            if A is None:
                continue
            B = saved[PREFIX + m + ".lora_B.weight"]
            _, s = scaling(cfg, m)
            lora = (x @ A.T) @ B.T
            mag = saved.get(PREFIX + m + ".lora_magnitude_vector")
            if mag is not None:  # DoraLinearLayer.forward
                norm = torch.linalg.norm(transpose(W, fifo) + s * (B @ A), dim=1)
                sc = (mag / norm).view(1, -1)
                basey = x @ W if fifo else F.linear(x, W)
                y = y + (sc - 1) * basey + sc * lora * s
            else:
                y = y + w * lora * s
            bb = saved.get(PREFIX + m + ".lora_B.bias")
            if bb is not None:
                y = y + bb * s
        return y

    def p(k):
        for cfg, saved in adapters:
            if PREFIX + k in saved:
                return saved[PREFIX + k]
        return base[k]

    h = F.embedding(ids, base["embed.weight"])
    for cfg, saved in adapters:
        A = saved.get(PREFIX + "embed.lora_embedding_A")
        if A is not None:
            _, s = scaling(cfg, "embed")
            h = h + (F.embedding(ids, A.T) @ saved[PREFIX + "embed.lora_embedding_B"].T) * s * cfg.get("weight", 1.0)
    for i in range(LAYERS):
        pre = f"layers.{i}."
        q = lin(pre + "attn.q_proj", h, p(pre + "attn.q_proj.weight"), p(pre + "attn.q_proj.bias"))
        v = lin(pre + "attn.v_proj", h, p(pre + "attn.v_proj.weight"), p(pre + "attn.v_proj.bias"))
        h = h + 0.1 * q + v
        m = F.gelu(lin(pre + "mlp.c_fc", h, p(pre + "mlp.c_fc.weight"), p(pre + "mlp.c_fc.bias"), fifo=True))
        h = h + lin(pre + "mlp.c_proj", m, p(pre + "mlp.c_proj.weight"), p(pre + "mlp.c_proj.bias"))
    return lin("lm_head", h, p("lm_head.weight"), None)


def forward(d, case, merged_path):
    base = load_file(os.path.join(d, "model.safetensors"))
    adapters = []
    weights = json.load(open(os.path.join(d, case, "weights.json")))
    for i, w in enumerate(weights):
        ad = os.path.join(d, case, f"a{i}")
        cfg = json.load(open(os.path.join(ad, "adapter_config.json")))
        st = os.path.join(ad, "adapter_model.safetensors")
        saved = load_file(st) if os.path.exists(st) else torch.load(os.path.join(ad, "adapter_model.bin"), weights_only=True)
        adapters.append((dict(cfg, weight=w), saved))
    ids = torch.randint(0, V, (3, 7))
    want = lora_forward(base, adapters, ids)
    got = lora_forward(load_file(merged_path), [], ids)
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    if not err <= 1e-5 * max(scale, 1):
        sys.exit(f"{case}: forward of the merged model differs from base + adapter by {err} (outputs up to {scale})")
    print(f"{case}: forward max abs difference {err:.3g} of outputs up to {scale:.3g}")


def fp8(qdir, adapter, out):
    q = load_file(os.path.join(qdir, "model.safetensors"))
    with open(os.path.join(qdir, "config.json")) as f:
        br, bc = json.load(f)["quantization_config"].get("weight_block_size", [128, 128])
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        cfg = json.load(f)
    ad = load_file(os.path.join(adapter, "adapter_model.safetensors"))
    s = cfg["lora_alpha"] / cfg["r"]
    res = {}
    for k, x in q.items():
        if x.dtype != torch.float8_e4m3fn:
            continue
        sc = q[k + "_scale_inv"]
        rows, cols = x.shape
        full = sc.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
        W = (x.float() * full).to(torch.bfloat16)  # weight_dequant
        res[k + ".dequantized"] = W
        m = PREFIX + k[: -len(".weight")]
        A, B = ad.get(m + ".lora_A.weight"), ad.get(m + ".lora_B.weight")
        if A is None:
            continue
        Wf = W.float()  # Linear.get_delta_weight and merge in float32, cast back
        res[k] = (Wf + (B @ A) * s).to(W.dtype)
        res[k + ".bound"] = Wf.abs() + abs(s) * (B.abs() @ A.abs())
    save_file(res, out)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "forward":
        forward(*sys.argv[2:5])
    elif sys.argv[1] == "fp8":
        fp8(*sys.argv[2:5])
    else:
        sys.exit(__doc__)
