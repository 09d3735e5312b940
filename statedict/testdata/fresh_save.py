"""Save, with the torch running this script, checkpoints using every dtype that torch has
(float8, uint16-64 and complex32 only where it has them), views, shared storages, Parameters,
nested containers, in the zip format and the legacy format, then report what torch.load sees.

  fresh_save.py DIR    writes DIR/fresh_zip.pt and DIR/fresh_legacy.pt (legacy: the dtypes
                       that format can hold) and prints
                       {"torch": version, "files": {path: {name: {"dtype", "shape", "hex"}}}}
"""
import io, json, sys
import torch

d = sys.argv[1]
g = torch.Generator().manual_seed(1)
base = torch.randn(6, 5, generator=g)
sd = {
    "w": torch.nn.Parameter(torch.randn(4, 3, generator=g)),
    "base": base,
    "view.rows": base[1:4],
    "view.t": base.t(),
    "view.step": base[::2, 1::2],
    "nested": {"list": [torch.arange(5), (torch.ones(2, dtype=torch.bool), torch.tensor(3.5))]},
    "empty": torch.zeros(0, 4),
    "scalar": torch.tensor(-1, dtype=torch.int16),
}
for name in ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
             "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e5m2", "float8_e4m3fn",
             "float8_e5m2fnuz", "float8_e4m3fnuz", "complex32"]:
    dt = getattr(torch, name, None)
    if dt is None:
        continue
    x = (torch.randn(3, 4, generator=g) * 4)
    try:
        if dt.is_complex:
            x = torch.complex(x, -x).to(dt)
        elif dt.is_floating_point:
            x = x.to(dt)
        else:
            x = x.abs().to(torch.int64).to(dt)
        torch.save(x, io.BytesIO())  # torch 1.13 has complex32 but cannot save it
    except (RuntimeError, TypeError, KeyError):
        continue
    sd["dtypes." + name] = x

legacy_ok = {k: v for k, v in sd.items() if not k.startswith("dtypes.") or
             k.split(".")[1] in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                                 "int8", "uint8", "complex64", "complex128")}
paths = {f"{d}/fresh_zip.pt": sd, f"{d}/fresh_legacy.pt": legacy_ok}
torch.save(paths[f"{d}/fresh_zip.pt"], f"{d}/fresh_zip.pt")
torch.save(legacy_ok, f"{d}/fresh_legacy.pt", _use_new_zipfile_serialization=False)


def raw(t):
    t = t.detach().contiguous().flatten()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def walk(v, name, out):
    if isinstance(v, torch.Tensor):
        out[name] = {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape), "hex": raw(v).hex()}
    elif isinstance(v, dict):
        for k, x in v.items():
            walk(x, f"{name}.{k}" if name else str(k), out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            walk(x, f"{name}.{i}", out)


res = {"torch": torch.__version__, "files": {}}
for p in paths:
    res["files"][p] = {}
    walk(torch.load(p, map_location="cpu", weights_only=False), "", res["files"][p])
json.dump(res, sys.stdout)
