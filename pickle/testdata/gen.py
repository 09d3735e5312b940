# Regenerates the real-torch fixtures of pickle/: run with /usr/bin/python3
# (python3-torch 1.13) from this directory. Each *.pt is a torch.save zip;
# expected.json lists every tensor torch itself reports for it.
import argparse, collections, io, json, os, pickle, zipfile
import numpy as np
import torch

torch.manual_seed(0)
expected = {}

def describe(obj, path, out):
    if isinstance(obj, torch.Tensor):
        d = {"dtype": str(obj.dtype).replace("torch.", ""), "shape": list(obj.shape),
             "requires_grad": obj.requires_grad, "parameter": isinstance(obj, torch.nn.Parameter),
             "layout": str(obj.layout).replace("torch.", "")}
        if obj.layout == torch.strided and obj.device.type != "meta":
            d["stride"] = list(obj.stride())
            d["offset"] = obj.storage_offset()
            d["location"] = str(obj.device)
            d["storage_numel"] = obj.storage().size()
            d["storage_id"] = obj.storage().data_ptr()
            if obj.numel() and obj.dtype in (torch.float32, torch.float64, torch.int64, torch.int32):
                d["first"] = obj.reshape(-1)[0].item()
            if obj.is_quantized:
                d["qscheme"] = str(obj.qscheme()).replace("torch.", "")
                if obj.qscheme() == torch.per_tensor_affine:
                    d["scale"], d["zero_point"] = obj.q_scale(), obj.q_zero_point()
                else:
                    d["axis"] = obj.q_per_channel_axis()
        if obj.device.type == "meta":
            d["device"] = "meta"
        out[path] = d
    elif isinstance(obj, dict):
        for k, v in obj.items():
            describe(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            describe(v, f"{path}.{i}" if path else str(i), out)

def save(name, obj, **kw):
    torch.save(obj, name + ".pt", **kw)
    out = {}
    describe(obj, "", out)
    # storage identity as groups, numbered in order of appearance
    ids = {}
    for d in out.values():
        if "storage_id" in d:
            d["storage_group"] = ids.setdefault(d.pop("storage_id"), len(ids))
    expected[name] = out

w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
sd = collections.OrderedDict()
sd["w"] = w
sd["row"] = w[1]                       # view with offset
sd["col"] = w[:, 2]                    # strided view
sd["wt"] = w.t()                       # non-contiguous
sd["bias"] = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
sd["half"] = torch.full((2, 2), 1.5, dtype=torch.float16)
sd["long"] = torch.tensor([7, 8, 9], dtype=torch.int64)
sd["int"] = torch.tensor([[1, 2]], dtype=torch.int32)
sd["short"] = torch.zeros(3, dtype=torch.int16)
sd["i8"] = torch.zeros(1, dtype=torch.int8)
sd["u8"] = torch.zeros(5, dtype=torch.uint8)
sd["bool"] = torch.tensor([True, False])
sd["c64"] = torch.zeros(2, dtype=torch.complex64)
sd["c128"] = torch.zeros(2, dtype=torch.complex128)
sd["f64"] = torch.tensor([3.25], dtype=torch.float64)
sd["scalar"] = torch.tensor(2.5)
sd["empty"] = torch.zeros(0, 3)
sd["grad"] = torch.ones(2, requires_grad=True)
sd["step"] = torch.tensor(10.0)
save("state_dict", sd)
save("state_dict_p4", sd, pickle_protocol=4)
save("state_dict_legacy", sd, _use_new_zipfile_serialization=False)

q = collections.OrderedDict()
q["pt"] = torch.quantize_per_tensor(torch.tensor([0.5, 1.0, 1.5]), 0.5, 2, torch.quint8)
q["pc"] = torch.quantize_per_channel(torch.ones(2, 3), torch.tensor([0.1, 0.2], dtype=torch.float64),
                                     torch.tensor([1, 2]), 0, torch.qint8)
q["pcf"] = torch.quantize_per_channel(torch.ones(2, 3), torch.tensor([0.1, 0.2]),
                                      torch.tensor([0.5, 1.5]), 1 - 1, torch.quint8)
q["qi32"] = torch.quantize_per_tensor(torch.ones(2), 1.0, 0, torch.qint32)
save("quantized", q)

sp = {"coo": torch.eye(3).to_sparse(), "csr": torch.eye(2).to_sparse_csr()}
save("sparse", sp)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
torch.save(Net(), "model.pt")  # a whole module: classes the reader must not know

misc = {
    "args": argparse.Namespace(lr=0.1, name="run", layers=[1, 2]),
    "np_array": np.arange(6, dtype=np.float32).reshape(2, 3),
    "np_scalar": np.float64(1.5),
    "device": torch.device("cuda", 1),
    "device_str": torch.device("cpu"),
    "dtype": torch.bfloat16,
    "set": {1, 2, 3},
    "frozen": frozenset({"a"}),
    "bytes": b"\x00\xffab",
    "bytearray": bytearray(b"xyz"),
    "complex": 1 + 2j,
    "counter": collections.Counter({"x": 2}),
    "defaultdict": collections.defaultdict(list, {"k": [1]}),
    "big": 2 ** 100,
    "neg": -(2 ** 70),
    "int64max": 2 ** 63 - 1,
    "float": 0.1,
    "none": None,
    "true": True,
    "unicode": "héllo ✓",
    "tuple": (1, "two", 3.0),
    "meta": torch.empty(2, 3, device="meta"),
    "epoch": 7,
}
save("misc", misc)

with open("expected.json", "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)

# Plain-Python pickles of the same data at every protocol (no torch objects).
plain = {"list": [1, 2.5, "s", None, True], "nested": {"a": (1, 2), "b": {"c": b"\x01\x02"}},
         "set": {3}, "frozen": frozenset({4}), "big": 2 ** 80, "neg": -5, "u": "ü€\n\\", "ba": bytearray(b"q")}
for proto in range(6):
    with open(f"plain_p{proto}.pkl", "wb") as f:
        pickle.dump(plain, f, protocol=proto)

# A self-referencing list.
rec = [1]
rec.append(rec)
with open("recursive.pkl", "wb") as f:
    pickle.dump(rec, f, protocol=2)

# Malicious pickles: what pickle writes for __reduce__ returning os.system etc.
class Evil:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args
    def __reduce__(self):
        return self.fn, self.args
import os as _os, subprocess, builtins
for name, obj, proto in [("evil_os_system", Evil(_os.system, "true"), 2),
                         ("evil_eval_p4", Evil(builtins.eval, "1"), 4),
                         ("evil_subprocess", Evil(subprocess.Popen, ["true"]), 2),
                         ("evil_getattr_p0", Evil(builtins.getattr, 1, "x"), 0)]:
    with open(name + ".pkl", "wb") as f:
        pickle.dump({"state_dict": {}, "x": obj}, f, protocol=proto)
