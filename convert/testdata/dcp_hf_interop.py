"""Interop check for torch >= 2.8's safetensors DCP layout (run by
TestInteropDCPSafetensors with torch 2.x and the safetensors library).

No torch 2.8 is at hand, so this stands in for its HuggingFaceStorageWriter,
HuggingFaceStorageReader and consolidate_safetensors_files with the
safetensors library and the layout facts read from upstream's source
(docs/dcp-write.md, "Safetensors DCP"):

    dcp_hf_interop.py check DIR ORIG
        Every *.safetensors file of DIR must load with the safetensors
        library (safe_open and safetensors.torch.load_file); its metadata
        must hold DCP_SHARDING_INFO (JSON: name -> {"saved_offsets": [...]}),
        DCP_VERSION "1.0" and format "pt". Each tensor is placed at its
        saved_offsets in a global tensor whose shape is the largest
        offset+size per dimension, as torch's reader and consolidator size
        it; the placed chunks must not overlap and must cover the tensor.
        The result must equal every tensor of ORIG (torch.load,
        weights_only) that safetensors can hold: dtype, shape and bytes.

    dcp_hf_interop.py make DIR
        Writes DIR/sharded, the files a two-rank save_distributed save of
        a small model writes (shard-00001-model-00001-of-00001.safetensors
        and shard-00002-..., each saved with safetensors.torch.save_file and
        the metadata above), DIR/consolidated (model-00001-of-00001 with the
        full tensors, zero offsets, and model.safetensors.index.json), and
        DIR/full.pt, the tensors whole (torch.save).
"""

import glob
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


def check(d, orig):
    files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
    if not files:
        fail(f"no safetensors files in {d}")
    chunks = {}
    for f in files:
        load_file(f)  # the library's own full load
        with safe_open(f, framework="pt") as sf:
            md = sf.metadata() or {}
            if md.get("DCP_VERSION") != "1.0" or md.get("format") != "pt" or "DCP_SHARDING_INFO" not in md:
                fail(f"{f}: metadata {md}")
            info = json.loads(md["DCP_SHARDING_INFO"])
            if set(info) != set(sf.keys()):
                fail(f"{f}: DCP_SHARDING_INFO lists {sorted(info)}, the file holds {sorted(sf.keys())}")
            for k in sf.keys():
                chunks.setdefault(k, []).append((info[k]["saved_offsets"], sf.get_tensor(k)))
    ref = torch.load(orig, map_location="cpu", weights_only=True)
    want = {k: v for k, v in ref.items() if isinstance(v, torch.Tensor) and not v.is_quantized and v.layout == torch.strided}
    if set(chunks) != set(want):
        fail(f"tensors {sorted(chunks)}, want {sorted(want)}")
    for k, cs in chunks.items():
        nd = cs[0][1].dim()
        size = [max(o[d] + t.shape[d] for o, t in cs) for d in range(nd)]
        full = torch.zeros(size, dtype=cs[0][1].dtype)
        seen = torch.zeros(size, dtype=torch.int32)
        for o, t in cs:
            if len(o) != nd or t.dtype != full.dtype:
                fail(f"{k}: chunk at {o} {t.dtype}{list(t.shape)}")
            box = tuple(slice(o[d], o[d] + t.shape[d]) for d in range(nd))
            full[box] = t
            seen[box] += 1
        if nd and full.numel() and not bool((seen == 1).all()):
            fail(f"{k}: chunks overlap or leave a gap: coverage {seen.tolist()}")
        if not same(full, want[k].contiguous()):
            fail(f"{k}: assembled {full.dtype}{list(full.shape)} differs from {want[k].dtype}{list(want[k].shape)}")
    print(f"ok: {len(files)} files, {len(chunks)} tensors")


def make(d):
    g = torch.Generator().manual_seed(1)
    full = {
        "embed.weight": torch.randn(10, 4, generator=g),
        "attn.q.weight": torch.randn(6, 8, generator=g).bfloat16(),
        "attn.o.weight": torch.randn(4, 5, generator=g).half(),
        "norm.weight": torch.randn(4, generator=g, dtype=torch.float64),
        "ids": torch.arange(7, dtype=torch.int64),
    }
    # Rank r's share, as a tensor-parallel model's DTensors hold it:
    # embed and q sharded on dimension 0 (torch.chunk), o on dimension 1
    # (uneven: 3 + 2), norm replicated (DCP dedups it to rank 0), ids on rank 1.
    def share(r):
        out = {}
        for name, dim in (("embed.weight", 0), ("attn.q.weight", 0), ("attn.o.weight", 1)):
            parts = torch.chunk(full[name], 2, dim)
            start = sum(p.shape[dim] for p in parts[:r])
            offs = [0] * full[name].dim()
            offs[dim] = start
            out[name] = (parts[r].contiguous(), offs)
        if r == 0:
            out["norm.weight"] = (full["norm.weight"], [0])
        else:
            out["ids"] = (full["ids"], [0])
        return out
    os.makedirs(f"{d}/sharded")
    os.makedirs(f"{d}/consolidated")
    for r in range(2):
        s = share(r)
        info = {k: {"saved_offsets": o} for k, (_, o) in s.items()}
        save_file({k: t for k, (t, _) in s.items()}, f"{d}/sharded/shard-{r + 1:05d}-model-00001-of-00001.safetensors",
                  metadata={"DCP_SHARDING_INFO": json.dumps(info), "DCP_VERSION": "1.0", "format": "pt"})
    name = "model-00001-of-00001.safetensors"
    info = {k: {"saved_offsets": [0] * v.dim()} for k, v in full.items()}
    save_file(full, f"{d}/consolidated/{name}",
              metadata={"DCP_SHARDING_INFO": json.dumps(info), "DCP_VERSION": "1.0", "format": "pt"})
    index = {"metadata": {"total_size": sum(v.numel() * v.element_size() for v in full.values())},
             "weight_map": {k: name for k in full}}
    with open(f"{d}/consolidated/model.safetensors.index.json", "w") as f:
        json.dump(index, f, indent=2)
    torch.save(full, f"{d}/full.pt")


if __name__ == "__main__":
    {"check": check, "make": make}[sys.argv[1]](*sys.argv[2:])
