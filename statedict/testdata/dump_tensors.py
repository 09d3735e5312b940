"""Dump every dense tensor of each torch checkpoint named on the command line as torch sees it: name -> hex of
its logical elements in C order (tensor.contiguous() bytes, little-endian).
Prints {path: {name: hex}}. Names follow ckpt's rule: dict keys by str(key), list/tuple items by index, joined with '.'."""
import json, sys
import torch


def raw(t):
    t = t.detach().contiguous().flatten()
    try:
        return t.view(torch.uint8).numpy().tobytes()
    except (RuntimeError, TypeError):
        return t.numpy().tobytes()


def walk(v, name, out):
    if isinstance(v, torch.Tensor):
        if v.layout == torch.strided and not v.is_quantized:
            out[name] = raw(v).hex()
        return
    if isinstance(v, dict):
        items = ((str(k), x) for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        items = ((str(i), x) for i, x in enumerate(v))
    else:
        return
    for k, x in items:
        walk(x, f"{name}.{k}" if name else k, out)


res = {}
for path in sys.argv[1:]:
    res[path] = {}
    walk(torch.load(path, map_location="cpu", weights_only=False), "", res[path])
json.dump(res, sys.stdout)
