"""bench/merge.sh's helper (torch 2.x with safetensors).

merge_ref.py gen DIR GB     DIR/model.safetensors: a Llama-shaped bf16 base of about GB
                            gigabytes (hidden 2048, MLP 5504), and DIR/lora/: a rank-16
                            PEFT adapter on all seven projections of every layer
merge_ref.py merge DIR OUT  the PEFT-style merge on the CPU, as merge_and_unload does it
                            (the whole base in memory): W += transpose(B @ A) * scaling
                            in float32 (Linear.get_delta_weight casts bf16 to float32 on the
                            CPU), back to bf16, then safetensors.torch.save_file
"""
import json, os, sys, torch
from safetensors.torch import load_file, save_file

HID, MLP, R = 2048, 5504, 16
PROJ = {"self_attn.q_proj": (HID, HID), "self_attn.k_proj": (HID, HID), "self_attn.v_proj": (HID, HID),
        "self_attn.o_proj": (HID, HID), "mlp.gate_proj": (MLP, HID), "mlp.up_proj": (MLP, HID), "mlp.down_proj": (HID, MLP)}


def gen(d, gb):
    per_layer = sum(o * i for o, i in PROJ.values()) * 2
    layers = max(1, round(gb * 1e9 / per_layer))
    g = torch.Generator().manual_seed(0)
    base, ad = {}, {}
    for l in range(layers):
        for p, (o, i) in PROJ.items():
            m = f"model.layers.{l}.{p}"
            base[m + ".weight"] = (torch.randn(o, i, generator=g) * 0.02).to(torch.bfloat16)
            ad[f"base_model.model.{m}.lora_A.weight"] = (torch.randn(R, i, generator=g) * 0.01).to(torch.bfloat16)
            ad[f"base_model.model.{m}.lora_B.weight"] = (torch.randn(o, R, generator=g) * 0.01).to(torch.bfloat16)
    save_file(base, os.path.join(d, "model.safetensors"))
    os.makedirs(os.path.join(d, "lora"), exist_ok=True)
    save_file(ad, os.path.join(d, "lora", "adapter_model.safetensors"))
    cfg = dict(peft_type="LORA", r=R, lora_alpha=32, target_modules=[p.split(".")[1] for p in PROJ], lora_dropout=0.0,
               bias="none", fan_in_fan_out=False, use_rslora=False, use_dora=False, task_type="CAUSAL_LM")
    with open(os.path.join(d, "lora", "adapter_config.json"), "w") as f:
        json.dump(cfg, f)
    print(layers, "layers")


def merge(d, out):
    torch.set_num_threads(os.cpu_count())
    base = load_file(os.path.join(d, "model.safetensors"))
    ad = load_file(os.path.join(d, "lora", "adapter_model.safetensors"))
    s = 32 / R
    for k, W in base.items():
        m = "base_model.model." + k[: -len(".weight")]
        A = ad.get(m + ".lora_A.weight")
        if A is None:
            continue
        delta = (ad[m + ".lora_B.weight"].float() @ A.float()) * s
        W += delta.to(W.dtype)
    save_file(base, out, metadata={"format": "pt"})


if __name__ == "__main__":
    {"gen": lambda: gen(sys.argv[2], float(sys.argv[3])), "merge": lambda: merge(sys.argv[2], sys.argv[3])}[sys.argv[1]]()
