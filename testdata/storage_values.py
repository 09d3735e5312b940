"""Prints, as JSON, the bytes of every storage value torch.load returns from
each file given (the ground truth of TestLoadStorageValues): {file: {name:
hex}}, names as ckpt joins dict keys ("" for a storage at the root)."""
import json
import sys

import torch


def raw(s):
    # untyped(): the bytes under a TypedStorage, in torch 1.13 and 2.x alike
    # (the attribute behind it was renamed: _storage, _untyped_storage).
    u = s.untyped() if isinstance(s, torch.storage.TypedStorage) else s
    return bytes(u.tolist()).hex()


def walk(x, name, out):
    if isinstance(x, (torch.storage.TypedStorage, torch.UntypedStorage)):
        out[name] = raw(x)
    elif isinstance(x, dict):
        for k, v in x.items():
            walk(v, f"{name}.{k}" if name else str(k), out)
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            walk(v, f"{name}.{i}" if name else str(i), out)


res = {}
for f in sys.argv[1:]:
    vals = {}
    walk(torch.load(f, map_location="cpu"), "", vals)
    res[f] = vals
print(json.dumps(res))
