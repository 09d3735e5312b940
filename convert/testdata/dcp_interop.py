"""Interop check for DCP conversion (run by TestInteropDCP with torch 2.x).

    dcp_interop.py DCP_DIR OUTDIR FILE...

Consolidates DCP_DIR with torch's own dcp_to_torch_save into OUTDIR, then
loads each FILE (ckpt's .pth with weights_only=True, or .safetensors, or a
sharded index.json) and requires every tensor of torch's result, by dotted
name, to be present with the same dtype, shape and bytes, and nothing else;
a .pth must also equal torch's whole object (nesting, key order, lists,
tuples, values).
"""

import json
import os
import sys

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def flatten(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, torch.Tensor):
        out[prefix] = obj
    return out


def load(path):
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path)
    if path.endswith(".index.json"):
        from safetensors.torch import load_file

        idx = json.load(open(path))
        out = {}
        for f in sorted(set(idx["weight_map"].values())):
            out.update(load_file(os.path.join(os.path.dirname(path), f)))
        return out
    return flatten(torch.load(path, weights_only=True), "", {})


def raw(t):
    t = t.contiguous()
    return t.view(torch.uint8).flatten() if t.dim() else t.reshape(1).view(torch.uint8)


def same(x, y, where):
    """Deep equality, dict key order, container types and tensor bits included."""
    if type(x) is not type(y):
        return f"{where}: {type(x).__name__} vs torch {type(y).__name__}"
    if isinstance(x, dict):
        if list(x) != list(y):
            return f"{where}: keys {list(x)} vs torch {list(y)}"
        for k in x:
            if d := same(x[k], y[k], f"{where}.{k}"):
                return d
    elif isinstance(x, (list, tuple)):
        if len(x) != len(y):
            return f"{where}: {len(x)} items vs torch {len(y)}"
        for i, (p, q) in enumerate(zip(x, y)):
            if d := same(p, q, f"{where}.{i}"):
                return d
    elif isinstance(x, torch.Tensor):
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(raw(x), raw(y)):
            return f"{where}: tensor differs"
    elif x != y:
        return f"{where}: {x!r} vs torch {y!r}"
    return None


def main():
    src, outdir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    ref_path = os.path.join(outdir, "torch.pt")
    dcp_to_torch_save(src, ref_path)
    whole = torch.load(ref_path, weights_only=False)
    ref = flatten(whole, "", {})
    bad = []
    for f in files:
        if f.endswith((".pt", ".pth")):
            # The .pth keeps the nested state dict dcp_to_torch_save rebuilds.
            if d := same(torch.load(f, weights_only=True), whole, "root"):
                bad.append(f"{f}: {d}")
        got = load(f)
        if set(got) != set(ref):
            bad.append(f"{f}: names differ: extra {sorted(set(got) - set(ref))}, missing {sorted(set(ref) - set(got))}")
            continue
        for n, r in ref.items():
            g = got[n]
            if g.dtype != r.dtype or g.shape != r.shape or not torch.equal(raw(g), raw(r)):
                bad.append(f"{f}: {n}: {g.dtype}{list(g.shape)} vs torch {r.dtype}{list(r.shape)}")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print(f"{len(files)} files x {len(ref)} tensors equal to dcp_to_torch_save")


if __name__ == "__main__":
    main()
