"""Interop check for tensor-parallel output (run by TestInteropTensorParallel).

    tp_interop.py SOURCE.pt WORLD RULES_JSON FILE...

RULES_JSON maps tensor names to the dimension they were split on. Each FILE
(rank r's safetensors, in rank order) must hold every tensor of SOURCE (a
torch.save; its tensors by dotted name), equal bit for bit to
torch.chunk(t, WORLD, dim)[r] (an empty tensor of the right shape when
torch.chunk gives fewer than WORLD chunks), or to t for the others.
"""

import json
import sys

import torch
from safetensors.torch import load_file


def flatten(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, torch.Tensor):
        out[prefix] = obj
    return out


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8)


def main():
    src, world, rules, files = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4:]
    sd = flatten(torch.load(src, weights_only=True), "", {})
    bad = []
    for r, f in enumerate(files):
        got = load_file(f)
        if set(got) != set(sd):
            bad.append(f"{f}: names differ")
            continue
        for n, t in sd.items():
            want = t
            if n in rules:
                d = rules[n]
                parts = torch.chunk(t, world, d)
                if r < len(parts):
                    want = parts[r]
                else:
                    shape = list(t.shape)
                    shape[d] = 0
                    want = t.new_empty(shape)
            g = got[n]
            if g.dtype != want.dtype or g.shape != want.shape or not torch.equal(raw(g), raw(want)):
                bad.append(f"{f}: {n}: {g.dtype}{list(g.shape)}, torch.chunk gives {want.dtype}{list(want.shape)}")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print(f"{len(files)} ranks x {len(sd)} tensors equal to torch.chunk")


if __name__ == "__main__":
    main()
