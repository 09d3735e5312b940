"""Nested DCP outputs against torch 2.x's own dcp.save (run by convert's
TestInteropDCPNested through scripts/torch2-python).

    python3 dcp_nested_check.py make SRC.pt TORCHDCP
        torch.save a training checkpoint to SRC.pt: {"model": a small
        nn.Module's state_dict(), "optim": torch.optim.AdamW's
        state_dict() after one step (int-keyed state, param_groups a list
        of dicts with a betas tuple and a params list), "step": 7,
        "extra": nested lists, tuples and dicts of values, a list mixing a
        tensor and a value, a tuple holding a tensor, an empty list and an
        empty dict}; and
        torch.distributed.checkpoint.save the same dict to TORCHDCP, in one
        process, with the default planner.

    python3 dcp_nested_check.py check SRC.pt TORCHDCP DCPDIR [DCPDIR...]
        For each DCPDIR (ckpt's conversion of SRC.pt):
          1. its .metadata has the planner_data of TORCHDCP's (the same
             fqns, each with the same path: str and int elements alike) and
             the same state_dict_metadata keys, each a tensor (same dtype
             and size) or a value where torch's is;
          2. torch.distributed.checkpoint.load, in this one process, into
             a freshly built nested dict of SRC's structure (a new model's
             state_dict and a new AdamW's state_dict after one step, their
             tensors zeroed, every other value None) gives back every
             tensor (dtype, shape, bits) and every value (type and value:
             a tuple stays a tuple) of SRC.pt.
Prints OK and exits 0, or the first difference and exits 1.
"""
import pickle
import sys
import warnings

import torch
import torch.distributed.checkpoint as dcp


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.head = torch.nn.Linear(3, 2, bias=False)
        self.register_buffer("counts", torch.arange(5, dtype=torch.int64))

    def forward(self, x):
        return self.head(self.norm(self.fc(x)))


def training_state(seed):
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    model(torch.randn(6, 4)).square().mean().backward()
    opt.step()
    return {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "step": 7,
        "extra": {
            "hist": [1, 2.5, "a", None],
            "shape": (3, (4, 5), [6]),
            "groups": [{"a": 1}, {"b": [2, 3], "c": (True, 1.5)}],
            "mixed": [torch.ones(2, dtype=torch.float16), 3],
            "pair": (torch.arange(3, dtype=torch.int32), 1),
            "empty": [],
            "nothing": {},
        },
    }


def zeroed(obj):
    # obj's structure, tensors zeroed, every other value None.
    if isinstance(obj, dict):
        return {k: zeroed(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [zeroed(v) for v in obj]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, torch.Tensor):
        return torch.zeros_like(obj)
    return None


def walk(obj, path, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, path + (k,), out)
    elif isinstance(obj, (list, tuple)):
        out[path] = type(obj).__name__ + str(len(obj))
        for i, v in enumerate(obj):
            walk(v, path + (i,), out)
    else:
        out[path] = obj
    return out


def same(path, want, got):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: got {type(got).__name__}, want a tensor"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"{path}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
        a, b = want.contiguous().reshape(-1), got.contiguous().reshape(-1)
        if a.dtype != torch.bool:
            a, b = a.view(torch.uint8), b.view(torch.uint8)
        return None if torch.equal(a, b) else f"{path}: values differ"
    if type(got) is not type(want) or got != want:
        return f"{path}: got {got!r}, want {want!r}"
    return None


def metadata(d):
    with open(d + "/.metadata", "rb") as f:
        return pickle.load(f)


def kinds(md):
    out = {}
    for k, v in md.state_dict_metadata.items():
        if hasattr(v, "properties"):
            out[k] = ("tensor", v.properties.dtype, tuple(v.size))
        else:
            out[k] = (type(v).__name__,)
    return out


def typed(path):
    return [(type(p).__name__, p) for p in path]


def check(src, torchdir, out):
    want_md, got_md = metadata(torchdir), metadata(out)
    wp, gp = want_md.planner_data, got_md.planner_data
    if set(wp) != set(gp):
        return f"planner_data keys: missing {sorted(set(wp) - set(gp))}, extra {sorted(set(gp) - set(wp))}"
    for k in wp:
        if typed(wp[k]) != typed(gp[k]):
            return f"planner_data[{k!r}]: got {typed(gp[k])}, torch writes {typed(wp[k])}"
    wk, gk = kinds(want_md), kinds(got_md)
    if wk != gk:
        diff = sorted(k for k in set(wk) | set(gk) if wk.get(k) != gk.get(k))
        return f"state_dict_metadata differs at {diff[:5]}: got {[gk.get(k) for k in diff[:5]]}, torch writes {[wk.get(k) for k in diff[:5]]}"
    want = torch.load(src, weights_only=False)
    sd = zeroed(training_state(seed=1))  # a fresh model and optimizer
    dcp.load(sd, checkpoint_id=out)
    w, g = walk(want, (), {}), walk(sd, (), {})
    if set(w) != set(g):
        return f"dcp.load: keys differ: missing {sorted(set(w) - set(g), key=str)[:5]}, extra {sorted(set(g) - set(w), key=str)[:5]}"
    for k in w:
        d = same(k, w[k], g[k])
        if d:
            return "dcp.load: " + d
    return None


def main():
    warnings.filterwarnings("ignore")
    mode = sys.argv[1]
    if mode == "make":
        src, torchdir = sys.argv[2], sys.argv[3]
        sd = training_state(seed=0)
        torch.save(sd, src)
        dcp.save(sd, checkpoint_id=torchdir)
        print("OK")
        return
    src, torchdir = sys.argv[2], sys.argv[3]
    for out in sys.argv[4:]:
        d = check(src, torchdir, out)
        if d:
            print(f"{out}: {d}")
            sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
