# Inputs and the torch reference for bench/quant_deq.sh (run with
# scripts/torch2-python, torch 2.6 on the CPU).
#
#   gen DIR GB       DIR/fp8: a block-FP8 shard (DeepSeek-V3 layout: float8_e4m3fn
#                    [7168, 2048] weights, weight_scale_inv [56, 16], config.json with
#                    weight_block_size [128, 128]) of about GB decimal gigabytes;
#                    DIR/mxfp4: one gpt-oss-20b layer's experts (gate_up_proj_blocks
#                    [32, 5760, 90, 16], down_proj_blocks [32, 2880, 90, 16] and their
#                    _scales, config.json quant_method mxfp4), or MXFP4_LAYERS such
#                    layers (env; 0.42 GB each: 10 make a shard of gpt-oss's size,
#                    4.2 GB, 15.9 GB as bfloat16).
#   genbf16 DIR GB   DIR/bf16: a BF16 model of about GB decimal gigabytes for the
#                    quantize runs (bfloat16 [7168, 2048] weights, N(0, 0.02)).
#   fp8 DIR OUT      DeepSeek's weight_dequant (inference/kernel.py), as its CPU
#                    equivalent: x.float() * s per 128x128 block, to bfloat16, saved.
#   mxfp4 DIR OUT    transformers' convert_moe_packed_tensors (integrations/mxfp4.py)
#                    to bfloat16, saved.
import json, math, os, sys
import torch
from safetensors.torch import save_file, load_file


def gen(d, gb):
    g = torch.Generator().manual_seed(0)
    os.makedirs(d + "/fp8", exist_ok=True)
    per = 7168 * 2048
    n = max(1, int(gb * 1e9 / per))
    sd = {}
    for i in range(n):
        codes = torch.randint(0, 256, (7168, 2048), dtype=torch.uint8, generator=g)
        codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN codes
        sd[f"model.layers.{i}.mlp.w.weight"] = codes.view(torch.float8_e4m3fn)
        sd[f"model.layers.{i}.mlp.w.weight_scale_inv"] = torch.rand(56, 16, generator=g) / 448
    save_file(sd, d + "/fp8/model.safetensors")
    json.dump({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
              "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}, open(d + "/fp8/config.json", "w"))
    os.makedirs(d + "/mxfp4", exist_ok=True)
    sd = {}
    for layer in range(int(os.environ.get("MXFP4_LAYERS", "1"))):
        p = f"model.layers.{layer}.mlp.experts."
        for name, rows in (("gate_up_proj", 5760), ("down_proj", 2880)):
            sd[p + name + "_blocks"] = torch.randint(0, 256, (32, rows, 90, 16), dtype=torch.uint8, generator=g)
            sd[p + name + "_scales"] = torch.randint(118, 130, (32, rows, 90), dtype=torch.uint8, generator=g)
    save_file(sd, d + "/mxfp4/model.safetensors")
    json.dump({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4",
              "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}},
              open(d + "/mxfp4/config.json", "w"))


def gen_bf16(d, gb):
    g = torch.Generator().manual_seed(1)
    os.makedirs(d + "/bf16", exist_ok=True)
    per = 7168 * 2048 * 2
    sd = {f"model.layers.{i}.mlp.w.weight": (torch.randn(7168, 2048, generator=g) * 0.02).to(torch.bfloat16)
          for i in range(max(1, int(gb * 1e9 / per)))}
    save_file(sd, d + "/bf16/model.safetensors")
    json.dump({"torch_dtype": "bfloat16"}, open(d + "/bf16/config.json", "w"))


def weight_dequant(x, s, bs=128):
    m, n = x.shape
    s = s.repeat_interleave(bs, 0)[:m].repeat_interleave(bs, 1)[:, :n]
    return (x.to(torch.float32) * s).to(torch.bfloat16)


FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16, rows_per_chunk=32768 * 1024):
    scales = scales.to(torch.int32) - 127
    lut = torch.tensor(FP4_VALUES, dtype=dtype)
    *prefix_shape, G, B = blocks.shape
    rows_total = math.prod(prefix_shape) * G
    blocks = blocks.reshape(rows_total, B)
    scales = scales.reshape(rows_total, 1)
    out = torch.empty(rows_total, B * 2, dtype=dtype)
    for r0 in range(0, rows_total, rows_per_chunk):
        r1 = min(r0 + rows_per_chunk, rows_total)
        blk, exp = blocks[r0:r1], scales[r0:r1]
        sub = out[r0:r1]
        sub[:, 0::2] = lut[(blk & 0x0F).to(torch.long)]
        sub[:, 1::2] = lut[(blk >> 4).to(torch.long)]
        torch.ldexp(sub, exp, out=sub)
    out = out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)
    return out.transpose(1, 2).contiguous()


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    torch.set_num_threads(os.cpu_count())
    if cmd == "gen":
        gen(d, float(sys.argv[3]))
        return
    if cmd == "genbf16":
        gen_bf16(d, float(sys.argv[3]))
        return
    sd = load_file(d + "/model.safetensors")
    out = {}
    if cmd == "fp8":
        for k, v in sd.items():
            if k.endswith(".weight"):
                out[k] = weight_dequant(v, sd[k + "_scale_inv"])
    else:
        for k, v in sd.items():
            if k.endswith("_blocks"):
                base = k[: -len("_blocks")]
                out[base] = convert_moe_packed_tensors(v, sd[base + "_scales"])
    save_file(out, sys.argv[3])


main()
