"""Interop checks for package convert, driven by interop_test.go.

  interop.py make DIR        write DIR/orig.pt (tied weights, parameters, views, dtypes,
                             NaN/Inf) and DIR/cast.pt (values that stress rounding)
  interop.py check DIR       compare DIR/orig.pt with DIR/back.pt in torch; check
                             DIR/out.safetensors with json + numpy only
  interop.py cast DIR        compare DIR/cast_bf16.pt and DIR/cast_f16.pt with torch's .to()
  interop.py flat REF PTH ST  ckpt's .pth and safetensors outputs of REF hold the tensors
                             torch.load gives for REF (weights_only; independent reader)
  interop.py cpuload FILE REF  torch.load(FILE, weights_only=True), no map_location; equal to REF
  interop.py newdtypes REF FILE...  each FILE (ckpt's .pt output) loads with weights_only=True,
                             warnings as errors, equal to REF (float8, uint16-64: torch 2.x)
  interop.py stlib DIR FILE... the safetensors library (safetensors.torch.load_file, safe_open)
                             loads each FILE with warnings as errors; together they hold
                             DIR/orig.pt's tensors (tied aliases once), with ckpt's metadata
"""
import collections, json, struct, sys
import numpy as np
import torch

def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)

def load_ours(path, **kw):
    """torch.load of a file ckpt wrote: any warning torch gives is a failure."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return torch.load(path, **kw)

def make(d):
    g = torch.Generator().manual_seed(0)
    emb = torch.nn.Parameter(torch.randn(5, 4, generator=g))
    base = torch.randn(6, 4, generator=g)
    sd = collections.OrderedDict()
    sd["embed.weight"] = emb
    sd["lm_head.weight"] = emb                    # tied parameter
    sd["block.w"] = base
    sd["block.w_alias"] = base                    # tied plain tensor
    sd["block.rows"] = base[2:4]                  # partial view
    sd["block.t"] = base.t()                      # non-contiguous view
    sd["half"] = torch.randn(3, 3, generator=g).half()
    sd["bf16"] = torch.randn(7, generator=g).bfloat16()
    sd["f64"] = torch.randn(2, 2, generator=g, dtype=torch.float64)
    sd["special"] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.4e38])
    sd["ids"] = torch.arange(10, dtype=torch.int64)
    sd["mask"] = torch.tensor([True, False, True])
    sd["i8"] = torch.tensor([-128, 0, 127], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 255], dtype=torch.uint8)
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 3)
    sd["opt.state.0.step"] = torch.tensor(7.0)
    torch.save(sd, f"{d}/orig.pt")
    # Values around rounding boundaries for half and bfloat16.
    f32 = torch.cat([
        torch.randn(4000, generator=g) * 10.0 ** torch.randint(-8, 8, (4000,), generator=g),
        torch.tensor([65504.0, 65519.0, 65520.0, 1e-8, 5.96e-8, 2.98e-8, 1 + 2**-11, 1 + 2**-8, 1 + 3 * 2**-8,
                      float("nan"), float("inf"), -float("inf"), -0.0, 3.4e38, 1.1754942e-38, 1e-45]),
        (torch.randint(0, 2**31 - 1, (4000,), generator=g, dtype=torch.int64)).to(torch.int32).view(torch.float32),
    ])
    f64 = torch.randn(3000, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-10, 10, (3000,), generator=g)
    f64 = torch.cat([f64, (1 + torch.tensor([2**-11 + 2**-40, 2**-8 + 2**-35, 2**-24 - 2**-60], dtype=torch.float64))])
    torch.save({"f32": f32, "f64": f64, "f16": f32.half(), "ids": torch.arange(5), "opt.state.0.step": torch.tensor(3.0)}, f"{d}/cast.pt")

def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    if a.dtype.is_floating_point:
        return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)) if a.element_size() == 1 else \
            bool(torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(torch.nan_to_num(a, 0.0, 1.0, -1.0), torch.nan_to_num(b, 0.0, 1.0, -1.0)) and torch.equal(torch.signbit(a), torch.signbit(b)))
    return torch.equal(a, b)

ST_DTYPES = {"F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "I64": ("<i8", 8),
             "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1), "U8": ("u1", 1), "BOOL": ("?", 1)}

def check_safetensors(path, orig):
    """An independent reader: the specification's rules with json + numpy."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    if n > 100_000_000 or 8 + n > len(raw):
        fail(f"header length {n}")
    if (8 + n) % 8:
        fail(f"header not padded to 8: {n}")
    text = raw[8:8 + n].decode("utf-8")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate keys")
    hdr = dict(pairs)
    meta = dict(hdr.pop("__metadata__", []))
    if meta.get("format") != "pt":
        fail(f"metadata {meta}")
    data = raw[8 + n:]
    spans = sorted((tuple(dict(v)["data_offsets"]), k) for k, v in hdr.items())
    pos = 0
    for (b, e), k in spans:
        if b != pos or e < b:
            fail(f"offsets of {k} do not tile: {b},{e} at {pos}")
        pos = e
    if pos != len(data):
        fail(f"data ends at {pos}, file data is {len(data)} bytes")
    digests = json.loads(meta["ckpt.digests"])
    if sorted(digests) != sorted(hdr):
        fail("digests do not cover exactly the tensors")
    for k, v in hdr.items():
        v = dict(v)
        np_dtype, size = ST_DTYPES[v["dtype"]]
        shape = v["shape"]
        b, e = v["data_offsets"]
        if e - b != int(np.prod(shape, dtype=np.int64)) * size:
            fail(f"{k}: size {e - b} for shape {shape}")
        arr = np.frombuffer(data[b:e], dtype=np_dtype).reshape(shape)
        want = orig[k].contiguous()
        if v["dtype"] == "BF16":
            got = torch.from_numpy(arr.astype(np.int16)).view(torch.bfloat16)
        else:
            got = torch.from_numpy(arr.copy())
        if not same(got, want):
            fail(f"{k}: safetensors data differs from torch's tensor")
    # tied aliases recorded as removed -> kept
    for alias, kept in meta.items():
        if alias in orig and alias not in hdr:
            if kept not in hdr or orig[alias].data_ptr() != orig[kept].data_ptr():
                fail(f"alias {alias} -> {kept} wrong")
    stored = set(hdr) | {a for a in meta if a in orig}
    if stored != set(orig):
        fail(f"names lost: {set(orig) - stored}")

def check(d):
    orig = torch.load(f"{d}/orig.pt", weights_only=True)
    back = load_ours(f"{d}/back.pt", weights_only=True)
    if list(back) != list(orig) and sorted(back) != sorted(orig):
        fail(f"names {sorted(back)} != {sorted(orig)}")
    for k in orig:
        if not same(orig[k], back[k]):
            fail(f"{k}: {orig[k]!r} != {back[k]!r}")
    ties = [("embed.weight", "lm_head.weight"), ("block.w", "block.w_alias")]
    for a, b in ties:
        if back[a].data_ptr() != back[b].data_ptr():
            fail(f"{a} and {b} no longer share storage")
    check_safetensors(f"{d}/out.safetensors", orig)
    direct = load_ours(f"{d}/direct.pt", weights_only=True)
    for k in orig:
        if not same(orig[k], direct[k]) or orig[k].stride() != direct[k].stride() or orig[k].storage_offset() != direct[k].storage_offset():
            fail(f"direct {k} differs")
        if isinstance(orig[k], torch.nn.Parameter) != isinstance(direct[k], torch.nn.Parameter):
            fail(f"direct {k}: parameter-ness lost")  # safetensors has no such flag
    if direct["block.rows"].storage().data_ptr() != direct["block.w"].storage().data_ptr():
        fail("direct pth->pth lost the view's storage sharing")

def cast(d):
    src = torch.load(f"{d}/cast.pt", weights_only=True)
    for name, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        got = load_ours(f"{d}/cast_{name}.pt", weights_only=True)
        for k in ("f32", "f64", "f16"):
            want = src[k].to(dt)
            if got[k].dtype != dt:
                fail(f"{name} {k}: dtype {got[k].dtype}")
            bits_w, bits_g = want.view(torch.int16), got[k].view(torch.int16)
            nan = torch.isnan(want)
            if not torch.equal(torch.isnan(got[k]), nan) or not torch.equal(bits_w[~nan], bits_g[~nan]):
                i = int((bits_w != bits_g).nonzero()[0])
                fail(f"{name} {k}[{i}]: {src[k][i].item()!r} -> {bits_g[i].item():#06x}, torch {bits_w[i].item():#06x}")
        if got["ids"].dtype != torch.int64 or got["opt.state.0.step"].dtype != torch.float32:
            fail(f"{name}: integer or step tensor was cast")

def cpuload(path, ref):
    got = load_ours(path, weights_only=True)
    want = torch.load(ref, map_location="cpu", weights_only=False)
    for k in want:
        if got[k].device.type != "cpu" or not same(got[k], want[k]):
            fail(f"{k} differs")

def storages(path, ref):
    """Storages saved as values survive a .pth conversion: same class, dtype,
    size and bytes as torch.load of the source, and a tensor that shared a
    storage with one still shares it."""
    got = load_ours(path, weights_only=True)
    want = torch.load(ref, map_location="cpu", weights_only=False)
    if not isinstance(want, dict):
        got, want = {"": got}, {"": want}
    if sorted(got) != sorted(want):
        fail(f"keys {sorted(got)}, want {sorted(want)}")
    for k, w in want.items():
        g = got[k]
        if type(g) is not type(w):
            fail(f"{k}: {type(g)}, want {type(w)}")
        if isinstance(w, torch.Tensor):
            if not same(g, w):
                fail(f"{k} differs")
            continue
        if g.dtype != w.dtype or len(g) != len(w) or g.tolist() != w.tolist():
            fail(f"{k}: {g.dtype} {len(g)} {g.tolist()}, want {w.dtype} {len(w)} {w.tolist()}")
    if "t" in want and "typed" in want:
        if (got["t"].storage().data_ptr() == got["typed"].data_ptr()) != (want["t"].storage().data_ptr() == want["typed"].data_ptr()):
            fail("tensor t and storage typed: sharing differs")

def names(path, *want):
    """A flat state dict whose keys are exactly want, loadable with weights_only."""
    got = load_ours(path, weights_only=True)
    if list(got) != list(want):
        fail(f"keys {list(got)}, want {list(want)}")

def stlib(d, *files):
    import warnings
    from safetensors import safe_open
    from safetensors.torch import load_file
    orig = torch.load(f"{d}/orig.pt", weights_only=True)
    got, aliases = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in files:
            tensors = load_file(path)
            with safe_open(path, framework="pt") as f:
                meta = f.metadata()
                if sorted(f.keys()) != sorted(tensors):
                    fail(f"{path}: safe_open and load_file disagree on the names")
            if meta.get("format") != "pt":
                fail(f"{path}: metadata format {meta.get('format')!r}")
            digests = json.loads(meta["ckpt.digests"])
            if sorted(digests) != sorted(tensors):
                fail(f"{path}: ckpt.digests names {sorted(digests)} != tensors {sorted(tensors)}")
            aliases.update({k: v for k, v in meta.items() if k in orig})
            got.update(tensors)
    for k, want in orig.items():
        name = aliases.get(k, k) if k not in got else k
        if name not in got:
            fail(f"{k}: not in the safetensors output")
        if not same(got[name], want.detach().contiguous()):
            fail(f"{k}: safetensors library read {got[name]!r}, want {want!r}")

def flat(ref, pth, st):
    """ckpt's .pth (torch.load with weights_only) and safetensors (the
    independent reader) outputs of REF hold the tensors torch.load gives
    for REF, by name (a flat dict of tensors)."""
    orig = torch.load(ref, map_location="cpu", weights_only=False)
    # A DTensor whose local shard is the whole tensor is written as that shard.
    want = {k: (v.to_local() if hasattr(v, "to_local") else v).detach() for k, v in orig.items()}
    got = load_ours(pth, weights_only=True)
    if sorted(got) != sorted(want):
        fail(f"{pth}: names {sorted(got)} != {sorted(want)}")
    for k, w in want.items():
        if not same(got[k].detach(), w) or got[k].requires_grad != orig[k].requires_grad:
            fail(f"{pth} {k}: {got[k]!r}, want {w!r}")
    check_safetensors(st, want)

def newdtypes(ref, *files):
    want = torch.load(ref, map_location="cpu", weights_only=False)
    for path in files:
        got = load_ours(path, weights_only=True)
        if sorted(got) != sorted(want):
            fail(f"{path}: names {sorted(got)} != {sorted(want)}")
        for k, w in want.items():
            g = got[k]
            if g.dtype != w.dtype or g.shape != w.shape:
                fail(f"{path} {k}: {g.dtype}{list(g.shape)}, want {w.dtype}{list(w.shape)}")
            gb, wb = g.detach().contiguous().view(torch.uint8), w.detach().contiguous().view(torch.uint8)
            if not torch.equal(gb, wb):
                fail(f"{path} {k}: bytes differ")

if __name__ == "__main__":
    cmd = sys.argv[1]
    {"make": make, "check": check, "cast": cast, "cpuload": cpuload, "stlib": stlib, "newdtypes": newdtypes,
     "storages": storages, "names": names, "flat": flat}[cmd](*sys.argv[2:])
    print("ok")
