# Writes a pair of checkpoints with known differences into argv[1] and the
# statistics torch computes for them (float64) into expected.json, for
# cmd/ckpt's TestDiffInterop: a.pt (zip), b.pt (legacy), b.safetensors
# (written here from the raw bytes), and with torch 2.x b_dcp/
# (torch.distributed.checkpoint.save).
import json, os, struct, sys
import torch

out = sys.argv[1]
torch.manual_seed(1)
nan, inf = float("nan"), float("inf")
A = {}
for i in range(3):
    A[f"model.layers.{i}.mlp.weight"] = torch.randn(48, 32)
A["model.embed.weight"] = torch.randn(16, 32).to(torch.bfloat16)
A["model.norm.weight"] = torch.randn(32).half()
A["model.counts"] = torch.arange(20, dtype=torch.int64)
A["model.special"] = torch.tensor([1.0, nan, inf, -inf, 0.0, 2.0, nan, 3.0])
A["model.reshaped"] = torch.randn(6, 4)
A["only_a"] = torch.zeros(4)

B = {}
B["model.layers.0.mlp.weight"] = A["model.layers.0.mlp.weight"].clone()
B["model.layers.1.mlp.weight"] = A["model.layers.1.mlp.weight"] + 1e-3 * torch.randn(48, 32)
B["model.layers.2.mlp.weight"] = A["model.layers.2.mlp.weight"].to(torch.bfloat16)
B["model.embed.weight"] = (A["model.embed.weight"].float() + 0.01 * torch.randn(16, 32)).to(torch.bfloat16)
B["model.norm.weight"] = A["model.norm.weight"].clone()
B["model.norm.weight"][3] = 0  # relative error infinite there
B["model.counts"] = A["model.counts"].clone()
B["model.counts"][5] = 7
B["model.special"] = torch.tensor([1.0, nan, inf, 5.0, 0.0, nan, 1.0, 3.5])
B["model.reshaped"] = torch.randn(4, 6)
B["only_b"] = torch.ones(2)

torch.save(A, os.path.join(out, "a.pt"))
torch.save(B, os.path.join(out, "b.pt"), _use_new_zipfile_serialization=False)

# safetensors from the tensors' own bytes (torch 1.13 has no safetensors).
codes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}
def raw(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()
hdr, body = {}, b""
for k, t in B.items():
    b = raw(t)
    hdr[k] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [len(body), len(body) + len(b)]}
    body += b
h = json.dumps(hdr).encode()
with open(os.path.join(out, "b.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + body)

if int(torch.__version__.split(".")[0]) >= 2:
    import torch.distributed.checkpoint as dcp
    dcp.save({k: v for k, v in B.items()}, checkpoint_id=os.path.join(out, "b_dcp"))

def stats(a, b):
    x, y = a.double().flatten(), b.double().flatten()
    nx, ny = x.isnan(), y.isnan()
    nan_mis = int((nx != ny).sum())
    both = ~nx & ~ny
    inf_mis = int((both & (x.isinf() | y.isinf()) & (x != y)).sum())
    fin = x.isfinite() & y.isfinite()
    xf, yf = x[fin], y[fin]
    d = xf - yf
    rel = torch.where(d == 0, torch.zeros_like(d), d.abs() / yf.abs())
    nb = yf.norm()
    r = {
        "bitwise_equal": a.dtype == b.dtype and raw(a) == raw(b),
        "differing": int((both & (x != y)).sum()) + nan_mis,
        "nan_mismatch": nan_mis, "inf_mismatch": inf_mis,
        "max_abs": float(d.abs().max()) if len(d) else 0.0,
        "max_rel": float(rel.max()) if len(d) else 0.0,
        "rmse": float(d.pow(2).mean().sqrt()) if len(d) else 0.0,
        "cosine": float((xf * yf).sum() / (xf.norm() * nb)),
        "rel_frobenius": float(d.norm() / nb),
    }
    # Histogram of A-B by sign and binary exponent: torch.frexp gives
    # |d| = m * 2^e with 0.5 <= m < 1.
    nz = d[d != 0]
    _, e = torch.frexp(nz.abs())
    r["hist_zero"] = int((d == 0).sum())
    r["hist_neg"] = {str(int(k)): int(v) for k, v in zip(*torch.unique(e[nz < 0], return_counts=True))}
    r["hist_pos"] = {str(int(k)): int(v) for k, v in zip(*torch.unique(e[nz > 0], return_counts=True))}
    for k in ("max_rel", "rel_frobenius"):
        if r[k] == inf:
            r[k] = None
    return r

exp = {"tensors": {}, "only_in_a": ["only_a"], "only_in_b": ["only_b"], "problems": ["model.reshaped"],
       "torch": torch.__version__}
for k in A:
    if k in B and A[k].shape == B[k].shape:
        exp["tensors"][k] = stats(A[k], B[k])
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(exp, f, indent=1)
