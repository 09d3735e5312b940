# ref_gptoss.py: the logits of a Hugging Face gpt-oss model
# (GptOssForCausalLM), written out in plain torch from transformers'
# models/gpt_oss/modeling_gpt_oss.py as the reference for what llama.cpp
# computes from ckpt's GGUF: RMSNorm; q/k/v/o with biases; rotary
# embeddings in the half-split layout (_apply_rotary_emb), YaRN inverse
# frequencies and attention factor as modeling_rope_utils'
# _compute_yarn_parameters computes them (truncate as the config says);
# grouped-query attention with a learned sink logit per head
# (eager_attention_forward: the sinks join the softmax and are dropped);
# sliding-window attention on the layers layer_types calls
# sliding_attention; the top-k router (softmax over the top values) and
# experts with gate/up interleaved (gate_up[..., ::2], [..., 1::2]),
# clamped at swiglu_limit, glu = gate * sigmoid(1.702 * gate),
# (up + 1) * glu. transformers itself is not needed. The weights are
# float32 safetensors in transformers' layout (experts [E, in, out]).
#
#   python3 ref_gptoss.py MODEL_DIR TOKEN... > logits (float32, n_tokens x vocab)
import json, math, struct, sys
import torch

d, toks = sys.argv[1], [int(t) for t in sys.argv[2:]]
cfg = json.load(open(d + "/config.json"))
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
W = {}
for k, e in hdr.items():
    if k == "__metadata__":
        continue
    s, t = e["data_offsets"]
    assert e["dtype"] == "F32", (k, e["dtype"])
    W[k] = torch.frombuffer(bytearray(raw[8 + n + s:8 + n + t]), dtype=torch.float32).reshape(e["shape"])

H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
topk, limit, alpha = cfg["num_experts_per_tok"], cfg.get("swiglu_limit", 7.0), 1.702
window = cfg["sliding_window"]

inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
scaling = 1.0
rs = cfg.get("rope_scaling")
if rs and rs.get("rope_type") == "yarn":
    factor = rs["factor"]
    orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    scaling = rs.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
    fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def corr_dim(rot):
        return (hd * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(theta))

    low, high = corr_dim(fast), corr_dim(slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hd - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(hd // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extra = 1 - ramp
    pos_freqs = theta ** (torch.arange(0, hd, 2).to(dtype=torch.float) / hd)
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra

T = len(toks)
pos = torch.arange(T, dtype=torch.float32)
freqs = torch.outer(pos, inv_freq)
cos, sin = freqs.cos() * scaling, freqs.sin() * scaling


def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x):
    a, b = torch.chunk(x, 2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


types = cfg.get("layer_types") or ["sliding_attention" if l % 2 == 0 else "full_attention" for l in range(L)]
i = torch.arange(T)
causal = i[None, :] > i[:, None]
masks = {
    "full_attention": torch.zeros(T, T).masked_fill(causal, float("-inf")),
    "sliding_attention": torch.zeros(T, T).masked_fill(causal | (i[:, None] - i[None, :] >= window), float("-inf")),
}

x = W["model.embed_tokens.weight"][torch.tensor(toks)]
for l in range(L):
    p = "model.layers.%d." % l
    h = rms(x, W[p + "input_layernorm.weight"])

    def proj(name):
        return h @ W[p + "self_attn." + name + ".weight"].T + W[p + "self_attn." + name + ".bias"]

    q = rope(proj("q_proj").view(T, nh, hd).transpose(0, 1))
    k = rope(proj("k_proj").view(T, nkv, hd).transpose(0, 1))
    v = proj("v_proj").view(T, nkv, hd).transpose(0, 1)
    k, v = k.repeat_interleave(nh // nkv, dim=0), v.repeat_interleave(nh // nkv, dim=0)
    w = q @ k.transpose(1, 2) * hd ** -0.5 + masks[types[l]]
    sinks = W[p + "self_attn.sinks"].reshape(nh, 1, 1).expand(nh, T, 1)
    c = torch.cat([w, sinks], dim=-1)
    c = c - c.max(dim=-1, keepdim=True).values
    a = torch.softmax(c, dim=-1)[..., :-1] @ v
    x = x + a.transpose(0, 1).reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T + W[p + "self_attn.o_proj.bias"]

    h = rms(x, W[p + "post_attention_layernorm.weight"])
    logits = h @ W[p + "mlp.router.weight"].T + W[p + "mlp.router.bias"]
    top, idx = torch.topk(logits, topk, dim=-1)
    top = torch.softmax(top, dim=1)
    out = torch.zeros_like(h)
    gu_w, gu_b = W[p + "mlp.experts.gate_up_proj"], W[p + "mlp.experts.gate_up_proj_bias"]
    dn_w, dn_b = W[p + "mlp.experts.down_proj"], W[p + "mlp.experts.down_proj_bias"]
    for t in range(T):
        for j in range(topk):
            e = int(idx[t, j])
            gu = h[t] @ gu_w[e] + gu_b[e]
            gate, up = gu[::2].clamp(max=limit), gu[1::2].clamp(min=-limit, max=limit)
            glu = gate * torch.sigmoid(gate * alpha)
            out[t] += ((up + 1) * glu @ dn_w[e] + dn_b[e]) * top[t, j]
    x = x + out

logits = rms(x, W["model.norm.weight"]) @ W["lm_head.weight"].T
sys.stdout.buffer.write(logits.contiguous().numpy().astype("<f4").tobytes())
