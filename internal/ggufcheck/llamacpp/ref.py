# ref.py: the logits of a Hugging Face Llama (LlamaForCausalLM: RMSNorm,
# rotary embeddings in Hugging Face's half-split layout with llama3 rope
# scaling, grouped-query attention, SwiGLU), written out in plain torch
# from transformers' modeling_llama as the reference for what llama.cpp
# computes from ckpt's GGUF. transformers itself is not needed.
#
#   python3 ref.py MODEL_DIR TOKEN... > logits (float32, n_tokens x vocab)
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
    assert e["dtype"] == "F32"
    W[k] = torch.frombuffer(bytearray(raw[8 + n + s:8 + n + t]), dtype=torch.float32).reshape(e["shape"])

H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
hd = cfg.get("head_dim", H // nh)
eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)

inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
rs = cfg.get("rope_scaling")
if rs and rs.get("rope_type") == "llama3":
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wl, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    inv_freq = torch.where(medium, smoothed, scaled)

T = len(toks)
pos = torch.arange(T, dtype=torch.float32)
freqs = torch.outer(pos, inv_freq)
emb = torch.cat((freqs, freqs), dim=-1)
cos, sin = emb.cos(), emb.sin()

def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

def rot(x):
    a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-b, a), dim=-1)

x = W["model.embed_tokens.weight"][torch.tensor(toks)]
mask = torch.full((T, T), float("-inf")).triu(1)
for l in range(L):
    p = "model.layers.%d." % l
    h = rms(x, W[p + "input_layernorm.weight"])
    def proj(name):
        y = h @ W[p + "self_attn." + name + ".weight"].T
        b = W.get(p + "self_attn." + name + ".bias")
        return y + b if b is not None else y
    q = proj("q_proj").view(T, nh, hd).transpose(0, 1)
    k = proj("k_proj").view(T, nkv, hd).transpose(0, 1)
    v = proj("v_proj").view(T, nkv, hd).transpose(0, 1)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(nh // nkv, dim=0), v.repeat_interleave(nh // nkv, dim=0)
    a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1) @ v
    o = a.transpose(0, 1).reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T
    x = x + (o + W[p + "self_attn.o_proj.bias"] if p + "self_attn.o_proj.bias" in W else o)
    h = rms(x, W[p + "post_attention_layernorm.weight"])
    g = h @ W[p + "mlp.gate_proj.weight"].T
    u = h @ W[p + "mlp.up_proj.weight"].T
    x = x + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
logits = rms(x, W["model.norm.weight"]) @ head.T
sys.stdout.buffer.write(logits.contiguous().numpy().astype("<f4").tobytes())
