"""Interop checks of .pth output that keeps the checkpoint's object tree, driven by
tree_test.go (TestInteropTree*).

  tree.py full OUT REF KEY...      torch.load(OUT) (no map_location) equals
                                  torch.load(REF, map_location='cpu') without the top-level
                                  KEYs (the values ckpt reported dropped): same container types
                                  and key order, int keys, tensors (dtype, shape, strides,
                                  requires_grad, Parameter, values, cpu), floats bit for bit,
                                  tied storages tied; then an Adam optimizer built as
                                  scripts/gen_fixtures.py builds it loads OUT's state and steps
  tree.py weightsonly OUT REF     torch.load(OUT, weights_only=True) equals REF loaded on the
                                  cpu with what --drop-floats leaves out removed
"""
import collections, math, struct, sys
import torch
from torch import nn


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)

def load_ours(path, **kw):
    """torch.load of a file ckpt wrote: any warning torch gives is a failure."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return torch.load(path, **kw)


def same_tensor(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.isnan(a), torch.isnan(b)) and
                    torch.equal(torch.nan_to_num(a, 0.0, 1.0, -1.0), torch.nan_to_num(b, 0.0, 1.0, -1.0)))
    return torch.equal(a, b)


def equal(got, want, path, storages):
    if type(got) is not type(want):
        fail(f"{path}: type {type(got).__name__}, want {type(want).__name__}")
    if isinstance(want, torch.Tensor):
        if got.device.type != "cpu":
            fail(f"{path}: on {got.device}")
        if (got.dtype, got.shape, got.stride(), got.storage_offset(), got.requires_grad) != \
                (want.dtype, want.shape, want.stride(), want.storage_offset(), want.requires_grad):
            fail(f"{path}: {got.dtype} {tuple(got.shape)} {got.stride()} {got.storage_offset()} {got.requires_grad}, "
                 f"want {want.dtype} {tuple(want.shape)} {want.stride()} {want.storage_offset()} {want.requires_grad}")
        if not same_tensor(got, want):
            fail(f"{path}: values differ")
        w, g = want.storage().data_ptr(), got.storage().data_ptr()
        if storages.setdefault(("w", w), g) != g or storages.setdefault(("g", g), w) != w:
            fail(f"{path}: storage sharing differs from the original")
    elif isinstance(want, dict):
        if list(got.keys()) != list(want.keys()):
            fail(f"{path}: keys {list(got.keys())}, want {list(want.keys())}")
        if getattr(got, "_metadata", None) != getattr(want, "_metadata", None):
            fail(f"{path}: _metadata {getattr(got, '_metadata', None)}, want {getattr(want, '_metadata', None)}")
        for k in want:
            equal(got[k], want[k], f"{path}.{k}", storages)
    elif isinstance(want, (list, tuple)):
        if len(got) != len(want):
            fail(f"{path}: {len(got)} items, want {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            equal(g, w, f"{path}.{i}", storages)
    elif isinstance(want, float):
        if struct.pack("<d", got) != struct.pack("<d", want):
            fail(f"{path}: {got!r}, want {want!r}")
    elif got != want:
        fail(f"{path}: {got!r}, want {want!r}")


def adam_from(state):
    # as scripts/gen_fixtures.py's trained_adam builds them
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.5)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if opt.param_groups[0]["lr"] != 1e-3 or opt.param_groups[0]["betas"] != (0.9, 0.999):
        fail(f"optimizer param_groups after load_state_dict: {opt.param_groups[0]}")
    before = [p.detach().clone() for p in model.parameters()]
    model(torch.linspace(-1, 1, 8).reshape(2, 4)).pow(2).sum().backward()
    opt.step()
    if all(torch.equal(b, p) for b, p in zip(before, model.parameters())):
        fail("optimizer step changed nothing")


def full(out, ref, *dropped):
    got = load_ours(out)  # torch 2.6+: weights_only=True by default
    want = torch.load(ref, map_location="cpu", weights_only=False)
    for k in dropped:
        del want[k]
    equal(got, want, "", {})
    if isinstance(want, dict) and "optimizer" in want:
        adam_from(got)


def strip_1_13(v):
    """What --drop-floats leaves: dict entries holding values torch 1.13's
    weights_only loader cannot read are left out; lists and tuples go whole."""
    plain = (type(None), bool, int, str, torch.Tensor)
    if isinstance(v, dict):
        out = collections.OrderedDict() if type(v) is collections.OrderedDict else {}
        for k, x in v.items():
            x = strip_1_13(x)
            if x is not strip_1_13:
                out[k] = x
        if hasattr(v, "_metadata"):
            out._metadata = v._metadata
        return out
    if isinstance(v, (list, tuple)):
        items = [strip_1_13(x) for x in v]
        if any(x is strip_1_13 for x in items):
            return strip_1_13
        return type(v)(items)
    if isinstance(v, plain):
        return v
    return strip_1_13  # marker: left out


def weightsonly(out, ref):
    got = load_ours(out, weights_only=True)
    want = strip_1_13(torch.load(ref, map_location="cpu", weights_only=False))
    equal(got, want, "", {})


if __name__ == "__main__":
    {"full": full, "weightsonly": weightsonly}[sys.argv[1]](*sys.argv[2:])
    print("ok")
