#!/usr/bin/python3
"""Regenerate every checkpoint fixture under testdata/fixtures/.

Run with Debian's python3 (torch 1.13, numpy):  /usr/bin/python3 scripts/gen_fixtures.py

The torch2_* fixtures are saved by torch 2.x itself: run the script again with
torch 2.x (scripts/torch2-python, from a Debian trixie chroot; make fixtures
does both). Each run replaces only its own files.

Files torch 1.13 can write come from torch.save. What it cannot write (tar
format, torch>=2.1 records, big-endian files, dtypes newer than 1.13,
safetensors, hostile files) is built here by hand with a zip writer that
reproduces torch's own zip layout byte for byte and a protocol-2 pickle
emitter that reproduces Python's pickler byte for byte; both are checked
against real torch.save output before anything is written.

Beside each good fixture F the script writes F.expected.json (for a directory
D: D.expected.json), computed from what torch.load reports, or for files
torch 1.13 cannot load, from the tensors that were encoded. See
testdata/fixtures/README.md for the schema notes.
"""

import argparse
import collections
import gzip
import io
import json
import math
import pickle
import shutil
import struct
import sys
import tarfile
import types
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "testdata" / "fixtures"
BAD = FIX / "bad"

MAX_FIXTURE = 100 * 1024


# ---------------------------------------------------------------------------
# Zip writer reproducing PyTorchStreamWriter (miniz) output.
# ---------------------------------------------------------------------------

ALIGN = 64


def torch_zip(prefix, records, zip64=False):
    """Return the bytes of a zip laid out as torch's PyTorchStreamWriter lays it out.

    Every record is stored, its local header carries zero CRC and sizes with a
    data descriptor after the payload (flags 0x0808), and its payload starts on
    a 64-byte boundary thanks to an extra field "FB" padded with 'Z'. The end
    of the archive is a ZIP64 end record, its locator and a classic end record.

    With zip64=True every size and offset goes through ZIP64 fields as in
    files over 4 GiB: 0xFFFFFFFF in the headers, a ZIP64 extra field (id 1)
    in local and central headers, 64-bit data descriptors and 0xFFFF/0xFFFFFFFF
    in the classic end record.
    """
    out = bytearray()
    central = []
    for name, data in records:
        full = f"{prefix}/{name}".encode()
        off = len(out)
        crc = zlib.crc32(data)
        n = len(data)
        if zip64:
            z64 = struct.pack("<HHQQ", 1, 16, n, n)
            start = off + 30 + len(full) + len(z64) + 4
            pad = (-start) % ALIGN
            extra = z64 + b"FB" + struct.pack("<H", pad) + b"Z" * pad
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0808, 0, 0, 0,
                               0, 0xFFFFFFFF, 0xFFFFFFFF, len(full), len(extra))
            out += full + extra + data
            out += struct.pack("<IIQQ", 0x08074B50, crc, n, n)
            cextra = struct.pack("<HHQQQ", 1, 24, n, n, off)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 45, 0x0808, 0, 0, 0,
                                       crc, 0xFFFFFFFF, 0xFFFFFFFF, len(full), len(cextra),
                                       0, 0, 0, 0, 0xFFFFFFFF) + full + cextra)
        else:
            start = off + 30 + len(full) + 4
            pad = (-start) % ALIGN
            extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, 0x0808, 0, 0, 0,
                               0, 0, 0, len(full), len(extra))
            out += full + extra + data
            out += struct.pack("<IIII", 0x08074B50, crc, n, n)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, 0x0808, 0, 0, 0,
                                       crc, n, n, len(full), 0, 0, 0, 0, 0, off) + full)
    cd_off = len(out)
    for c in central:
        out += c
    cd_size = len(out) - cd_off
    count = len(central)
    eocd64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, count, count, cd_size, cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1)
    if zip64:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, cd_size, cd_off, 0)
    return bytes(out)


def zip_records(data):
    """Return (prefix, [(name, bytes)]) of a torch zip, in archive order."""
    z = zipfile.ZipFile(io.BytesIO(data))
    names = z.namelist()
    prefix = names[0].split("/", 1)[0]
    return prefix, [(n.split("/", 1)[1], z.read(n)) for n in names]


def torch_save_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def check_zip_writer():
    """Our writer must reproduce torch.save's zip byte for byte."""
    sd = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
          "b": torch.tensor([1, 2], dtype=torch.int64),
          "c": torch.zeros(300, dtype=torch.uint8)}
    real = torch_save_bytes(sd)
    prefix, recs = zip_records(real)
    assert torch_zip(prefix, recs) == real, "zip writer differs from torch.save"
    for name, _ in recs:  # and every payload is 64-byte aligned
        info = zipfile.ZipFile(io.BytesIO(real)).getinfo(f"{prefix}/{name}")
        h = info.header_offset
        nlen, elen = struct.unpack("<HH", real[h + 26:h + 30])
        assert (h + 30 + nlen + elen) % ALIGN == 0


# ---------------------------------------------------------------------------
# Protocol 2 pickle emitter reproducing Python's pickler for torch objects.
# ---------------------------------------------------------------------------

class G:
    """A global (GLOBAL module\\nname\\n)."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class R:
    """A call: func(*args) via REDUCE, then optional dict items and BUILD state."""

    def __init__(self, func, args, items=None, state=None):
        self.func, self.args, self.items, self.state = func, args, items, state


class NewObj:
    """cls.__new__(cls, *args) via NEWOBJ, then BUILD state."""

    def __init__(self, cls, args, state):
        self.cls, self.args, self.state = cls, args, state


class Raw(bytes):
    """Opcodes written verbatim (for spellings the protocol 2 pickler never uses)."""


class PID:
    """A persistent id (the tuple is pickled, then BINPERSID)."""

    def __init__(self, value):
        self.value = value


def encode_long(x):
    if x == 0:
        return b""
    n = (x.bit_length() >> 3) + 1
    b = x.to_bytes(n, "little", signed=True)
    if x < 0 and n > 1 and b[-1] == 0xFF and (b[-2] & 0x80):
        b = b[:-1]
    return b


class Emitter:
    def __init__(self, proto=2):
        self.out = bytearray(b"\x80" + bytes([proto]))
        self.memo = {}

    def _put(self, key):
        i = len(self.memo)
        self.memo[key] = i
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)

    def _get(self, key):
        i = self.memo.get(key)
        if i is None:
            return False
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)
        return True

    def _items(self, items):
        if len(items) == 1:
            self.save(items[0][0])
            self.save(items[0][1])
            self.out += b"s"
        elif items:
            self.out += b"("
            for k, v in items:
                self.save(k)
                self.save(v)
            self.out += b"u"

    def save(self, o):
        if o is None:
            self.out += b"N"
        elif o is True:
            self.out += b"\x88"
        elif o is False:
            self.out += b"\x89"
        elif type(o) is int:
            if 0 <= o <= 0xFF:
                self.out += b"K" + bytes([o])
            elif 0 <= o <= 0xFFFF:
                self.out += b"M" + struct.pack("<H", o)
            elif -0x80000000 <= o <= 0x7FFFFFFF:
                self.out += b"J" + struct.pack("<i", o)
            else:
                e = encode_long(o)
                self.out += b"\x8a" + bytes([len(e)]) + e
        elif type(o) is float:
            self.out += b"G" + struct.pack(">d", o)
        elif type(o) is str:
            if not self._get(("s", o)):
                b = o.encode()
                self.out += b"X" + struct.pack("<I", len(b)) + b
                self._put(("s", o))
        elif isinstance(o, Raw):
            self.out += o
        elif isinstance(o, G):
            if not self._get(("g", o.module, o.name)):
                self.out += b"c" + o.module.encode() + b"\n" + o.name.encode() + b"\n"
                self._put(("g", o.module, o.name))
        elif self._get(id(o)):
            pass
        elif type(o) is tuple:
            if not o:
                self.out += b")"
                return
            if len(o) <= 3:
                for x in o:
                    self.save(x)
                self.out += bytes([0x84 + len(o)])
            else:
                self.out += b"("
                for x in o:
                    self.save(x)
                self.out += b"t"
            self._put(id(o))
        elif type(o) is list:
            self.out += b"]"
            self._put(id(o))
            if len(o) == 1:
                self.save(o[0])
                self.out += b"a"
            elif o:
                self.out += b"("
                for x in o:
                    self.save(x)
                self.out += b"e"
        elif type(o) is dict:
            self.out += b"}"
            self._put(id(o))
            self._items(list(o.items()))
        elif isinstance(o, PID):
            self.save(o.value)
            self.out += b"Q"
        elif isinstance(o, R):
            self.save(o.func)
            self.save(o.args)
            self.out += b"R"
            self._put(id(o))
            if o.items:
                self._items(o.items)
            if o.state is not None:
                self.save(o.state)
                self.out += b"b"
        elif isinstance(o, NewObj):
            self.save(o.cls)
            self.save(o.args)
            self.out += b"\x81"
            self._put(id(o))
            self.save(o.state)
            self.out += b"b"
        else:
            raise TypeError(f"emitter: {type(o)}")

    def dumps(self, o):
        self.save(o)
        self.out += b"."
        return bytes(self.out)


def emit(o):
    return Emitter().dumps(o)


def hooks():
    return R(G("collections", "OrderedDict"), ())


def fresh(seq):
    """A new tuple object: the emitter memoizes tuples by identity, as Python's pickler does."""
    return tuple(list(seq))


def t_v2(cls, key, numel, size, stride, offset=0, location="cpu", requires_grad=False):
    """A tensor as torch pickles it with a classic typed storage."""
    pid = PID(("storage", G("torch", cls), key, location, numel))
    return R(G("torch._utils", "_rebuild_tensor_v2"),
             (pid, offset, fresh(size), fresh(stride), requires_grad, hooks()))


def t_v3(dtype, key, nbytes, size, stride, offset=0, location="cpu"):
    """A tensor as torch>=2.1 pickles the dtypes only UntypedStorage can carry."""
    pid = PID(("storage", G("torch", "UntypedStorage"), key, location, nbytes))
    return R(G("torch._utils", "_rebuild_tensor_v3"),
             (pid, offset, fresh(size), fresh(stride), False, hooks(), G("torch", dtype)))


def check_emitter():
    """Our emitter must reproduce the data.pkl torch.save writes."""
    sd = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
          "b": torch.tensor([1, 2], dtype=torch.int64),
          "c": torch.arange(10, dtype=torch.float32)[2:]}
    _, recs = zip_records(torch_save_bytes(sd))
    real = dict(recs)["data.pkl"]
    mine = emit({"a": t_v2("FloatStorage", "0", 6, (2, 3), (3, 1)),
                 "b": t_v2("LongStorage", "1", 2, (2,), (1,)),
                 "c": t_v2("FloatStorage", "2", 10, (8,), (1,), offset=2)})
    assert mine == real, "pickle emitter differs from torch.save"


# ---------------------------------------------------------------------------
# Expected JSON from what torch.load reports.
# ---------------------------------------------------------------------------

def _make_recording_module(log):
    class Unpickler(pickle._Unpickler):
        @property
        def persistent_load(self):
            return self._pl

        @persistent_load.setter
        def persistent_load(self, fn):
            def wrapped(pid):
                res = fn(pid)
                log.append((pid, res))
                return res
            self._pl = wrapped

    mod = types.ModuleType("recording_pickle")
    mod.__dict__.update({k: v for k, v in pickle.__dict__.items() if not k.startswith("__")})
    mod.Unpickler = Unpickler
    return mod


def untyped(typed):
    """The untyped storage behind a TypedStorage (_storage in 1.13, _untyped_storage in 2.x)."""
    u = getattr(typed, "_untyped_storage", None)  # an empty one is falsy
    return u if u is not None else typed._storage


class Loaded:
    """The result of torch.load plus what the load saw of every storage."""

    def __init__(self, obj, storages):
        self.obj = obj
        self.storages = storages  # _cdata -> {"key", "location", "nbytes"}


def torch_load(path, tar_keys=None):
    """torch.load(path) on CPU, recording key, location and size of every storage.

    Storages are mapped by their StorageImpl (_cdata): map_location sees each
    storage with its saved tag, persistent_load sees its key. In the tar format
    persistent ids name tensors, so the storage keys come from tar_keys (the
    order the storages member lists them).
    """
    pids, restored = [], []

    def map_location(storage, location):
        restored.append((storage._cdata, location, storage.nbytes()))
        return storage

    # torch 1.13's load replaces any pickle_module argument by the pickle
    # module it imported, so swap that module for the recording one.
    saved = torch.serialization.pickle
    torch.serialization.pickle = _make_recording_module(pids)
    try:
        try:
            obj = torch.load(path, map_location=map_location, weights_only=False)
        except RuntimeError as e:
            # torch 2.x refuses a callable map_location for wrapper subclasses:
            # load without one and take the tags from the persistent ids.
            if "Callable map_location" not in str(e):
                raise
            pids.clear()
            obj = torch.load(path, weights_only=False)
            restored = [(untyped(res)._cdata, pid[3], res.nbytes()) for pid, res in pids if pid[0] == "storage"]
    finally:
        torch.serialization.pickle = saved
    storages = {}
    if tar_keys is not None:
        assert len(tar_keys) == len(restored)
        for key, (cd, loc, nb) in zip(tar_keys, restored):
            storages[cd] = {"key": str(key), "location": loc, "nbytes": nb}
        return Loaded(obj, storages)
    locs = {cd: (loc, nb) for cd, loc, nb in restored}
    for pid, res in pids:
        if pid[0] != "storage":
            continue
        cd = untyped(res)._cdata
        if len(pid) > 5 and pid[5] is not None:
            # A storage view of torch < 0.4 (view_key, offset, size): its
            # own storage, a slice of the root the map_location saw.
            info = {"key": str(pid[5][0]), "location": pid[3], "nbytes": res.nbytes()}
            assert storages.setdefault(cd, info) == info
            continue
        loc, nb = locs[cd]
        assert loc == pid[3], (loc, pid)
        info = {"key": pid[2], "location": loc, "nbytes": nb}
        assert storages.setdefault(cd, info) == info
    return Loaded(obj, storages)


def stats_f64(a):
    """min/max/mean over the finite elements; NaN and ±Inf counted apart."""
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size == 0:
        return None
    nan = int(np.isnan(a).sum())
    inf = int(np.isinf(a).sum())
    fin = a[np.isfinite(a)]
    if fin.size == 0:
        return {"min": None, "max": None, "mean": None, "nan": nan, "inf": inf}
    return {"min": float(fin.min()), "max": float(fin.max()),
            "mean": math.fsum(fin.tolist()) / fin.size, "nan": nan, "inf": inf}


def tensor_stats(t):
    if t.numel() == 0 or t.is_complex() or t.is_quantized:
        return None
    return stats_f64(t.detach().to(torch.float64).numpy())


def dtype_name(dt):
    return str(dt).replace("torch.", "")


class Expect:
    def __init__(self, fmt, byteorder="little"):
        self.d = {"format": fmt, "byteorder": byteorder, "tensors": [], "objects": {},
                  "opaque": [], "foreign": []}

    def tensor(self, t, name, storages, layout="strided", component=None, sparse_shape=None):
        info = storages[t.untyped_storage()._cdata if hasattr(t, 'untyped_storage') else t.storage()._storage._cdata]
        e = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
             "strides": list(t.stride()), "storage_offset": t.storage_offset(),
             "device": info["location"], "requires_grad": bool(t.requires_grad),
             "parameter": isinstance(t, nn.Parameter), "layout": layout,
             "quantized": bool(t.is_quantized), "storage_key": info["key"],
             "storage_nbytes": info["nbytes"], "stats": tensor_stats(t)}
        if component:
            e["component"] = component
            e["sparse_shape"] = sparse_shape
        if t.is_quantized:
            q = {"scheme": str(t.qscheme()).replace("torch.", "")}
            if t.qscheme() == torch.per_tensor_affine:
                q.update(scale=float(t.q_scale()), zero_point=int(t.q_zero_point()))
            else:
                q.update(scales=t.q_per_channel_scales().tolist(),
                         zero_points=t.q_per_channel_zero_points().tolist(),
                         axis=int(t.q_per_channel_axis()))
            e["quant"] = q
        self.d["tensors"].append(e)
        return e

    def walk(self, obj, storages, name=""):
        def sub(k):
            return str(k) if name == "" else f"{name}.{k}"

        if isinstance(obj, torch.Tensor) and getattr(obj, "layout", None) == getattr(torch, "jagged", None):
            # A jagged nested tensor: one tensor of components values,
            # offsets and (when it has them) lengths, as torch exposes them.
            for comp in ("values", "offsets", "lengths"):
                c = getattr(obj, comp)()
                if c is not None:
                    self.tensor(c, sub(comp), storages, "jagged", comp, None)
        elif isinstance(obj, torch.Tensor) and type(obj).__name__ == "DTensor":
            # One tensor: the local shard's data, with the global shape,
            # placements and mesh torch reports for the DTensor.
            e = self.tensor(obj.to_local(), name, storages)
            e["parameter"] = isinstance(obj, nn.Parameter)
            mesh = obj.device_mesh
            e["dtensor"] = {"shape": list(obj.shape), "strides": list(obj.stride()),
                            "placements": [repr(p) for p in obj.placements],
                            "mesh_shape": list(mesh.mesh.shape), "device_type": mesh.device_type,
                            "coordinate": mesh.get_coordinate()}
            if mesh.mesh_dim_names:
                e["dtensor"]["mesh_dim_names"] = list(mesh.mesh_dim_names)
        elif isinstance(obj, torch.Tensor) and type(obj).__module__ == "mymodule":
            # A wrapper subclass: a storage-less shell (listed as a meta tensor
            # on the wrapper's device) whose real data is its attribute elem.
            self.d["tensors"].append({
                "name": name, "dtype": dtype_name(obj.dtype), "shape": list(obj.shape),
                "strides": list(obj.stride()), "storage_offset": 0, "device": str(obj.device),
                "requires_grad": bool(obj.requires_grad), "parameter": False, "layout": "strided",
                "quantized": False, "storage_key": "", "storage_nbytes": 0, "stats": None})
            self.walk(obj.elem, storages, sub("elem"))
        elif isinstance(obj, torch.Tensor):
            if obj.layout == torch.sparse_coo:
                size = list(obj.shape)
                self.tensor(obj._indices(), sub("indices"), storages, "sparse_coo", "indices", size)
                self.tensor(obj._values(), sub("values"), storages, "sparse_coo", "values", size)
            elif obj.layout in (torch.sparse_csr, torch.sparse_bsr, torch.sparse_csc, torch.sparse_bsc):
                size = list(obj.shape)
                layout = dtype_name(obj.layout)
                comps = ("crow_indices", "col_indices") if layout in ("sparse_csr", "sparse_bsr") \
                    else ("ccol_indices", "row_indices")
                for comp in comps + ("values",):
                    self.tensor(getattr(obj, comp)(), sub(comp), storages, layout, comp, size)
            else:
                self.tensor(obj, name, storages)
        elif type(obj) in (dict, collections.OrderedDict):
            for k, v in obj.items():
                self.walk(v, storages, sub(k))
        elif type(obj) in (list, tuple):
            for i, v in enumerate(obj):
                self.walk(v, storages, sub(i))
        elif type(obj) in (set, frozenset, bytes, complex):
            # Leaves that ckpt must print as Python does: their repr() is the expectation.
            self.d["objects"][name] = None
            self.d.setdefault("reprs", {})[name] = repr(obj)
        elif obj is None or type(obj) in (bool, int, float, str):
            assert not (type(obj) is float and not math.isfinite(obj))
            self.d["objects"][name] = obj
        elif isinstance(obj, torch.storage.TypedStorage):
            # torch.load returns every storage saved as a value as a TypedStorage
            # (an UntypedStorage as uint8).
            self.d.setdefault("storage_values", {})[name] = {
                "dtype": dtype_name(obj.dtype), "size": len(obj), "device": str(obj.device)}
        elif isinstance(obj, nn.Module):
            # A whole pickled model: the class is a foreign object, its
            # tensors are named as model.state_dict() names them.
            g = f"{type(obj).__module__}.{type(obj).__qualname__}"
            if g not in self.d["foreign"]:
                self.d["foreign"].append(g)
            self.d.setdefault("foreign_at", {})[name] = g
            for k, v in obj.state_dict(keep_vars=True).items():
                # A packed-params pair (quantized Linear) is listed by item;
                # tensors state_dict() makes from Python numbers (a quantized
                # module's scale and zero_point) are not in the file.
                for kk, vv in ([(f"{k}.{i}", x) for i, x in enumerate(v)] if isinstance(v, tuple) else [(k, v)]):
                    if not isinstance(vv, torch.Tensor):
                        continue
                    st = vv.untyped_storage() if hasattr(vv, "untyped_storage") else vv.storage()._storage
                    if st._cdata not in storages:
                        self.d.setdefault("state_dict_only", []).append(sub(kk))
                        continue
                    self.tensor(vv, sub(kk), storages)
        elif type(obj).__module__ == "mymodule":
            g = f"{type(obj).__module__}.{type(obj).__qualname__}"
            if g not in self.d["foreign"]:
                self.d["foreign"].append(g)
            self.d.setdefault("foreign_at", {})[name] = g
        elif isinstance(obj, (argparse.Namespace, np.ndarray, np.generic)):
            self.d["opaque"].append(name)
        else:
            raise TypeError(f"unexpected {type(obj)} at {name!r}")

    def write(self, path, **extra):
        self.d.update(extra)
        Path(str(path) + ".expected.json").write_text(json.dumps(self.d, indent=1, allow_nan=False) + "\n")


def expect_from_torch(path, fmt="torch-zip", byteorder="little", tar_keys=None, out=None, **extra):
    ld = torch_load(path, tar_keys=tar_keys)
    ex = Expect(fmt, byteorder)
    ex.walk(ld.obj, ld.storages)
    ex.write(out or path, **extra)
    return ex


# ---------------------------------------------------------------------------
# Fixtures.
# ---------------------------------------------------------------------------

def basic_state():
    g = torch.Generator().manual_seed(1)
    return {
        "encoder.weight": torch.randn(3, 4, generator=g),
        "encoder.bias": torch.tensor([0.5, -1.5, 2.0]),
        "decoder.weight": torch.randn(2, 3, generator=g).to(torch.float16),
        "steps": torch.tensor([3, 1, 4, 1, 5], dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "ids": torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3),
    }


def save(obj, path, **kw):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path, **kw)


def gen_zip_basic():
    p = FIX / "zip_basic.pt"
    save(basic_state(), p)
    expect_from_torch(p)
    gz = FIX / "zip_basic.pt.gz"
    with open(gz, "wb") as f, gzip.GzipFile(filename="zip_basic.pt", mode="wb", fileobj=f, mtime=0) as g:
        g.write(p.read_bytes())
    expect_from_torch(p, out=gz).write(gz, wrapper="gzip")
    return p


def gen_zip_archive():
    p = FIX / "zip_archive.pt"
    with open(p, "wb") as f:
        torch.save({"w": torch.arange(4, dtype=torch.float64), "n": 3}, f)
    assert zipfile.ZipFile(p).namelist()[0].startswith("archive/")
    expect_from_torch(p)


def gen_legacy():
    p = FIX / "legacy.pt"
    save(basic_state(), p, _use_new_zipfile_serialization=False)
    expect_from_torch(p, fmt="torch-legacy")


def gen_root_tensor():
    p = FIX / "root_tensor.pt"
    save(torch.arange(6, dtype=torch.float32).reshape(3, 2) / 4, p)
    expect_from_torch(p)


def gen_dir_checkpoint():
    d = FIX / "dir_checkpoint"
    shutil.rmtree(d, ignore_errors=True)
    p = d / "pytorch_model.bin"
    save({"layer.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
          "layer.bias": torch.zeros(2)}, p)
    expect_from_torch(p, out=FIX / "dir_checkpoint").write(FIX / "dir_checkpoint", file="pytorch_model.bin")


def gen_dtypes_classic():
    p = FIX / "dtypes_classic.pt"
    base = torch.tensor([-2.5, 0.0, 1.0, 3.25, 100.0])
    sd = {
        "float64": base.to(torch.float64) / 3,
        "float32": base.clone(),
        "float16": base.to(torch.float16),
        "bfloat16": base.to(torch.bfloat16),
        "complex64": torch.complex(base, -base),
        "complex128": torch.complex(base.double(), base.double() * 2),
        "int64": torch.tensor([-(2 ** 40), -1, 0, 7, 2 ** 40], dtype=torch.int64),
        "int32": torch.tensor([-(2 ** 31), -1, 0, 7, 2 ** 31 - 1], dtype=torch.int32),
        "int16": torch.tensor([-32768, -1, 0, 7, 32767], dtype=torch.int16),
        "int8": torch.tensor([-128, -1, 0, 7, 127], dtype=torch.int8),
        "uint8": torch.tensor([0, 1, 7, 128, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True, True, False]),
        "float32_special": torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45]),
    }
    save(sd, p)
    expect_from_torch(p)


def gen_tied():
    p = FIX / "tied.pt"
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    obj = collections.OrderedDict([
        ("embed.weight", w),
        ("lm_head.weight", w),  # tied: the same tensor
        ("slice", w[1:]),
        ("transpose", w.t()),
        ("strided", w[:, ::2]),
        ("scalar", torch.tensor(2.5)),
        ("empty", torch.zeros(0)),
        ("empty2d", torch.zeros(2, 0, dtype=torch.int64)),
    ])
    save(obj, p)
    expect_from_torch(p)


def gen_params():
    p = FIX / "params.pt"
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    model[1].bias.requires_grad_(False)
    obj = {"p": nn.Parameter(torch.tensor([1.0, 2.0])),
           "frozen": nn.Parameter(torch.tensor([[3.0]]), requires_grad=False),
           "params": list(model.parameters())}
    save(obj, p)
    expect_from_torch(p)


def small_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))


def trained_adam():
    model = small_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    model(x).pow(2).sum().backward()
    opt.step()
    return model, opt


def gen_training():
    p = FIX / "training.pt"
    model, opt = trained_adam()
    obj = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "loss": 0.25,
           "config": {"lr": 1e-3, "layers": [64, 64], "name": "run-1"},
           "args": argparse.Namespace(lr=1e-3, batch_size=32, name="run-1"),
           "np_value": np.float64(1.5), "np_array": np.arange(4, dtype=np.float32),
           "tags": ["a", "b"], "none": None}
    save(obj, p)
    expect_from_torch(p)


def save_tagged(obj, path, tags):
    """torch.save with storages tagged as chosen: tags maps a StorageImpl (_cdata) to a tag."""
    def tagger(storage):
        return tags.get(storage._cdata)

    def deserializer(storage, location):
        return None

    entry = (1, tagger, deserializer)
    torch.serialization.register_package(*entry)
    try:
        save(obj, path)
    finally:
        torch.serialization._package_registry.remove(entry)


def cd(t):
    return t.storage()._storage._cdata


def gen_cuda():
    p = FIX / "cuda_tagged.pt"
    a = torch.arange(4, dtype=torch.float32)
    b = torch.arange(6, dtype=torch.float16).reshape(2, 3)
    c = torch.tensor([1, 2, 3], dtype=torch.int64)
    d = torch.tensor([0.5])
    save_tagged({"gpu0.weight": a, "gpu0.view": a[2:], "gpu1.weight": b, "gpu1.index": c, "stray": d},
                p, {cd(a): "cuda:0", cd(b): "cuda:1", cd(c): "cuda:1"})
    ex = expect_from_torch(p)
    assert [t["device"] for t in ex.d["tensors"]] == ["cuda:0", "cuda:0", "cuda:1", "cuda:1", "cpu"]

    p = FIX / "cuda_training.pt"
    model, opt = trained_adam()
    sd, osd = model.state_dict(), opt.state_dict()
    tags = {cd(t): "cuda:0" for t in sd.values()}
    for st in osd["state"].values():
        tags[cd(st["exp_avg"])] = "cuda:0"
        tags[cd(st["exp_avg_sq"])] = "cuda:0"
    save_tagged({"model": sd, "optimizer": osd, "epoch": 1}, p, tags)
    ex = expect_from_torch(p)
    for t in ex.d["tensors"]:
        assert t["device"] == ("cpu" if t["name"].endswith(".step") else "cuda:0"), t

    p = FIX / "cuda_bare.pt"
    w = torch.arange(3, dtype=torch.float32)
    save_tagged({"w": w, "b": torch.ones(2)}, p, {cd(w): "cuda"})
    expect_from_torch(p)


def gen_quantized():
    p = FIX / "quantized.pt"
    x = torch.tensor([[-1.0, 0.0, 0.5], [1.0, 2.0, 3.0]])
    obj = {"per_tensor": torch.quantize_per_tensor(x, 0.05, 10, torch.quint8),
           "per_tensor_qint8": torch.quantize_per_tensor(x, 0.1, 0, torch.qint8),
           "per_channel": torch.quantize_per_channel(x, torch.tensor([0.1, 0.02], dtype=torch.float64),
                                                     torch.tensor([0, 5]), 0, torch.qint8)}
    save(obj, p)
    expect_from_torch(p)


def gen_sparse():
    p = FIX / "sparse.pt"
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2], [2, 0, 1]]), torch.tensor([1.5, -2.0, 3.0]), (3, 3))
    csr = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]).to_sparse_csr()
    save({"coo": coo.coalesce(), "csr": csr, "dense": torch.ones(2)}, p)
    expect_from_torch(p)


def gen_foreign():
    mod = types.ModuleType("mymodule")

    class MyConfig:
        pass

    MyConfig.__module__ = "mymodule"
    MyConfig.__qualname__ = "MyConfig"
    mod.MyConfig = MyConfig
    sys.modules["mymodule"] = mod
    try:
        cfg = MyConfig()
        cfg.hidden = 8
        cfg.name = "tiny"
        p = FIX / "foreign.pt"
        save({"model": {"w": torch.arange(3, dtype=torch.float32)}, "cfg": cfg, "step": 5}, p)
        ex = expect_from_torch(p)
    finally:
        del sys.modules["mymodule"]
    assert ex.d["foreign"] == ["mymodule.MyConfig"]
    data = zipfile.ZipFile(p).read("foreign/data.pkl")
    assert b"cmymodule\nMyConfig\n" in data and b"\x81" in data  # GLOBAL + NEWOBJ (+ BUILD)


def gen_legacy_protocols():
    """The legacy format with every pickle protocol torch.save can write it
    in (0 is refused by torch.load itself; 2 is legacy.pt)."""
    for proto in (1, 3, 4, 5):
        p = FIX / f"legacy_proto{proto}.pt"
        save(basic_state(), p, pickle_protocol=proto, _use_new_zipfile_serialization=False)
        expect_from_torch(p, fmt="torch-legacy")


def gen_modules(prefix="module", **extra):
    """Whole models (torch.save(model)) in the zip and legacy formats: a
    user class with submodules, a persistent and a non-persistent buffer,
    a frozen parameter and a None attribute; nn.Linear alone; a model
    inside a checkpoint dict."""
    mod = types.ModuleType("mymodule")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 2, 3)
            self.bn = nn.BatchNorm1d(2)
            self.fc = nn.Linear(2, 3)
            self.register_buffer("scale", torch.tensor([2.0]))
            self.register_buffer("tmp", torch.tensor([7.0]), persistent=False)
            self.register_parameter("unused", None)
            self.plain = torch.ones(2)  # an attribute, not in the state dict
            self.fc.bias.requires_grad_(False)

    Net.__module__ = "mymodule"
    Net.__qualname__ = "Net"
    mod.Net = Net
    sys.modules["mymodule"] = mod
    try:
        torch.manual_seed(3)
        net = Net()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no source for a class made here
            p = FIX / f"{prefix}_zip.pt"
            save(net, p)
            expect_from_torch(p, **extra)
            p = FIX / f"{prefix}_legacy.pt"
            save(net, p, _use_new_zipfile_serialization=False)
            expect_from_torch(p, fmt="torch-legacy", **extra)
            if prefix == "module":
                p = FIX / "module_in_dict.pt"
                save({"model": net, "epoch": 3}, p)
                expect_from_torch(p)
                p = FIX / "module_linear_legacy.pt"
                save(nn.Linear(3, 2), p, pickle_protocol=4, _use_new_zipfile_serialization=False)
                expect_from_torch(p, fmt="torch-legacy")
    finally:
        del sys.modules["mymodule"]
    keys = list(net.state_dict())
    assert "tmp" not in keys and "plain" not in keys and "conv1.weight" in keys, keys


def gen_storages():
    """Storages saved as values: a TypedStorage at the root, and typed,
    untyped (zip only) and empty storages in a dict beside a tensor that
    shares the typed one, zip and legacy."""
    t = torch.arange(6, dtype=torch.float32)
    p = FIX / "storage_root.pt"
    save(torch.arange(4, dtype=torch.int16).storage(), p)
    expect_from_torch(p)
    for fmt, kw in (("torch-zip", {}), ("torch-legacy", {"_use_new_zipfile_serialization": False})):
        p = FIX / ("storages.pt" if fmt == "torch-zip" else "storages_legacy.pt")
        obj = {"typed": t.storage(), "empty": torch.LongStorage(), "half": torch.HalfStorage(3).fill_(1.5), "t": t}
        if not kw:  # torch 1.13's legacy loader fails on the UntypedStorage its writer writes
            obj["untyped"] = torch.UntypedStorage(5)
        save(obj, p, **kw)
        expect_from_torch(p, fmt=fmt)


def gen_values():
    """Values ckpt must print as Python prints them: sets, frozensets, bytes,
    complex numbers, floats, quotes; a tensor under a bytes key."""
    g = torch.Generator().manual_seed(4)
    obj = {"set": {3, 1, 2}, "empty_set": set(), "frozen": frozenset({1, 2}), "bytes": b"raw\x00'\xff",
           "complex": complex(1.5, -2), "big_float": 1e16, "quote": "it's", b"raw": torch.randn(2, generator=g),
           1.5: torch.zeros(1), (1, "a"): torch.ones(1)}
    p = FIX / "values.pt"
    save(obj, p)
    expect_from_torch(p)
    p = FIX / "values_legacy.pt"
    save(obj, p, pickle_protocol=4, _use_new_zipfile_serialization=False)
    expect_from_torch(p, fmt="torch-legacy")


def gen_quant_packed():
    """quint4x2 and quint2x4: sub-byte elements packed 2 and 4 to a byte, so
    the storage holds fewer bytes than the tensor has elements."""
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 4
    p = FIX / "quant_packed.pt"
    save({"q4": torch.quantize_per_tensor(x, 0.25, 0, torch.quint4x2),
          "q2": torch.quantize_per_tensor(x, 0.25, 0, torch.quint2x4)}, p)
    ex = expect_from_torch(p)
    assert [t["storage_nbytes"] for t in ex.d["tensors"]] == [4, 2], ex.d["tensors"]


# torch < 0.4 files, which torch 1.13 cannot write but loads: written here the way torch
# 0.3's torch/serialization.py wrote them (legacy stream, persistent ids with view
# metadata) and torch/tensor.py pickled tensors (__reduce__: (type(self), (), state),
# state = (storage, storage_offset, size, stride), applied by Tensor.__setstate__).

class Stor:
    """A storage as torch < 0.4's persistent_id saw it: a root, or a view of one."""
    def __init__(self, key, cls, data, view=None):
        self.key, self.cls, self.data, self.view = key, cls, data, view

class OldTensor:
    """torch < 0.4's Tensor.__reduce__: (type(self), (), (storage, offset, size, stride))."""
    def __init__(self, cls, storage, offset, size, stride):
        self.cls, self.state = cls, (storage, offset, tuple(size), tuple(stride))
    def __reduce__(self):
        return (self.cls, (), self.state)

def write_legacy(path, obj, roots, proto=2):
    f = io.BytesIO()
    def dump(o, pid=None):
        p = pickle.Pickler(f, protocol=proto)
        if pid:
            p.persistent_id = pid
        p.dump(o)
    dump(0x1950a86a20f9469cfc6c)
    dump(1001)
    dump(dict(protocol_version=1001, little_endian=True, type_sizes=dict(short=2, int=4, long=4)))
    def pid(o):
        if isinstance(o, Stor):
            root = o if o.view is None else o.view[0]
            vm = None if o.view is None else (o.key, o.view[1], o.view[2])
            return ("storage", root.cls, root.key, "cpu", len(root.data) // root.cls().element_size(), vm)
        return None
    dump(obj, pid)
    dump([r.key for r in roots])
    for r in roots:
        n = len(r.data) // r.cls().element_size()
        f.write(struct.pack("<q", n))
        f.write(r.data)
    open(path, "wb").write(f.getvalue())

def gen_old_formats():
    """Pre-0.4 tensors (torch.FloatTensor() + BUILD) and storage views."""
    f32 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
    i64 = struct.pack("<4q", 10, 20, 30, 40)
    root = Stor("140001", torch.FloatStorage, f32)
    lroot = Stor("140002", torch.LongStorage, i64)
    view = Stor("140003", None, None, view=(root, 2, 3))   # elements 2..4 of root
    write_legacy(FIX / "old_pre04.pt", {
        "w": OldTensor(torch.FloatTensor, root, 0, (2, 3), (3, 1)),
        "row1": OldTensor(torch.FloatTensor, root, 3, (3,), (1,)),
        "ids_t": OldTensor(torch.LongTensor, lroot, 0, (2, 2), (1, 2)),
    }, [root, lroot])
    write_legacy(FIX / "old_storage_view.pt", {
        "on_view": OldTensor(torch.FloatTensor, view, 1, (2,), (1,)),
        "view": view,
        "whole": OldTensor(torch.FloatTensor, root, 0, (6,), (1,)),
    }, [root])
    for name in ("old_pre04.pt", "old_storage_view.pt"):
        expect_from_torch(FIX / name, fmt="torch-legacy")


class ReduceThrough:
    """Pickles as (cls, (), state): cls() then BUILD with state."""

    def __init__(self, cls, state):
        self.cls, self.state = cls, state

    def __reduce__(self):
        return (self.cls, (), self.state)


def gen_old_tensor_class():
    """Tensors reduced through torch.Tensor itself, as pre-0.4 torch wrote
    them: torch.Tensor() then BUILD with (storage, offset, size, stride)
    (Tensor.__setstate__ applies it with set_), or a 0.3 Variable's
    (data, None, hooks, requires_grad, None). Saved by torch.save, zip and
    legacy; torch 1.13 loads both."""
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 4
    obj = {"w": ReduceThrough(torch.Tensor, (x.storage(), 0, (3, 4), (4, 1))),
           "w.cols": ReduceThrough(torch.Tensor, (x.storage(), 1, (3, 2), (4, 2))),
           "var": ReduceThrough(torch.Tensor, (torch.tensor([1.5, -2.0]), None, None, True, None))}
    for name, zip_ in (("old_tensor_class.pt", True), ("old_tensor_class_legacy.pt", False)):
        save(obj, FIX / name, _use_new_zipfile_serialization=zip_)
        expect_from_torch(FIX / name, fmt="torch-zip" if zip_ else "torch-legacy")


def gen_quantized_models():
    """Whole quantized models saved with torch.save (as torchvision's
    quantized models and quantize_dynamic users save them): a dynamically
    quantized MLP (packed Linear weights in torchbind objects) and a static
    quantized conv + linear model (a conv pickled through its __getstate__)."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    p = FIX / "quant_dynamic_model.pt"
    save(torch.quantization.quantize_dynamic(mlp, {nn.Linear}, dtype=torch.qint8), p)
    expect_from_torch(p)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = torch.quantization.QuantStub()
            self.conv1 = nn.Conv2d(2, 3, 3)
            self.fc = nn.Linear(3, 2)
            self.dequant = torch.quantization.DeQuantStub()

        def forward(self, x):
            return self.dequant(self.fc(self.conv1(self.quant(x)).mean((2, 3))))

    mod = types.ModuleType("mymodule")
    Net.__module__, Net.__qualname__ = "mymodule", "Net"
    mod.Net = Net
    sys.modules["mymodule"] = mod
    try:
        m = Net().eval()
        m.qconfig = torch.quantization.get_default_qconfig("fbgemm")
        prepared = torch.quantization.prepare(m)
        prepared(torch.randn(4, 2, 5, 5))
        p = FIX / "quant_static_model.pt"
        q = torch.quantization.convert(prepared)
        save(q, p)
        # torch.load of this file gives a model whose state_dict() raises
        # (the quantized conv's __setstate__ leaves it without _parameters;
        # docs/real-world.md): the expectation is the saved model's own
        # state_dict(), by name: dtype, shape and the integer representation
        # (quantized) or values as float64.
        sd = {}
        for k, v in q.state_dict().items():
            for kk, vv in ([(f"{k}.{i}", x) for i, x in enumerate(v)] if isinstance(v, tuple) else [(k, v)]):
                if isinstance(vv, torch.Tensor):
                    vals = vv.int_repr() if vv.is_quantized else vv.detach()
                    sd[kk] = {"dtype": dtype_name(vv.dtype), "shape": list(vv.shape),
                              "values": vals.to(torch.float64).reshape(-1).tolist()}
        Path(str(p) + ".state_dict.json").write_text(json.dumps(sd, indent=1) + "\n")
        try:
            torch.load(p).state_dict()
            raise AssertionError("state_dict() of the loaded model works now: use expect_from_torch")
        except AttributeError:
            pass
    finally:
        del sys.modules["mymodule"]


def gen_torchscript():
    """A TorchScript archive (torch.jit.save of a scripted module) with a
    parameter-holding submodule, a buffer and plain tensor attributes (one
    in a submodule, one a List[Tensor]). The expectation, from torch.jit.load:
    state_dict() (parameters and buffers) and the tensor attributes that are
    not in it, by name (torchscript_attrs.pt.script.json)."""
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.lut = torch.tensor([7, 8, 9])

        def forward(self, x):
            return self.fc(x) + self.lut[0]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.register_buffer("steps", torch.tensor([1, 2]))
            self.table = torch.tensor([0.5, 1.5, 2.5])
            self.bank = [torch.ones(2), torch.zeros(3)]

        def forward(self, x):
            return self.inner(x) * self.table[0] + self.bank[0][0]

    torch.manual_seed(0)
    p = FIX / "torchscript_attrs.pt"
    torch.jit.script(M()).save(str(p))
    m = torch.jit.load(str(p))
    sd = m.state_dict()

    def desc(t):
        return {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                "values": t.detach().to(torch.float64).reshape(-1).tolist()}

    # The tensor attributes are the eager modules' plain attributes; their
    # values are read from the loaded ScriptModule.
    attrs = {}
    for prefix, eager in M().named_modules():
        loaded = m
        for part in filter(None, prefix.split(".")):
            loaded = getattr(loaded, part)
        for name, v in vars(eager).items():
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(v, torch.Tensor):
                attrs[full] = desc(getattr(loaded, name))
            elif isinstance(v, list) and v and all(isinstance(x, torch.Tensor) for x in v):
                for i, x in enumerate(getattr(loaded, name)):
                    attrs[f"{full}.{i}"] = desc(x)
    assert not set(attrs) & set(sd), attrs
    Path(str(p) + ".script.json").write_text(json.dumps(
        {"state_dict": {k: desc(v) for k, v in sd.items()}, "attributes": attrs}, indent=1) + "\n")


def gen_zip_variants():
    """Repacks of real torch.save output: deflated, ZIP64 everywhere."""
    state = {"w": torch.arange(8, dtype=torch.float32).reshape(2, 4), "b": torch.tensor([1, 2], dtype=torch.int64)}
    prefix_recs = zip_records(torch_save_bytes(state))[1]

    p = FIX / "zip_deflated.pt"
    with zipfile.ZipFile(p, "w") as z:
        for name, data in prefix_recs:
            zi = zipfile.ZipInfo(f"zip_deflated/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zipfile.ZipFile(p).infolist())
    expect_from_torch(p)

    p = FIX / "zip64.pt"
    p.write_bytes(torch_zip("zip64", prefix_recs, zip64=True))
    z = zipfile.ZipFile(p)
    assert z.testzip() is None
    expect_from_torch(p)


def serialization_id(records):
    """40 decimal digits like torch's .data/serialization_id (own hash, same shape)."""
    h = 0
    c = 0
    for name, data in records:
        h = (h * 1000003 + zlib.crc32(name.encode())) % 10 ** 20
        c = zlib.crc32(data, c)
    return f"{h:020d}{c:020d}".encode()


def v21_records(recs, byteorder="little", version_name="version"):
    """Reorder torch 1.13 records as torch>=2.1 writes them.

    data.pkl, byteorder, data/<key> sorted as strings, version, .data/serialization_id.
    """
    d = dict(recs)
    out = [("data.pkl", d["data.pkl"]), ("byteorder", byteorder.encode())]
    out += sorted((n, b) for n, b in recs if n.startswith("data/"))
    out.append((version_name, d["version"]))
    out.append((".data/serialization_id", serialization_id(out)))
    return out


def v21_state():
    return {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2.5,
            "ids": torch.tensor([1, -2, 3], dtype=torch.int64),
            "h": torch.tensor([0.5, -1.0, 65504.0], dtype=torch.float16),
            "bf": torch.tensor([1.0, -3.0e38, 0.0078125], dtype=torch.bfloat16),
            "c": torch.complex(torch.tensor([1.0, -2.0]), torch.tensor([0.5, 4.0])),
            "flags": torch.tensor([True, False]),
            "tail": torch.arange(10, dtype=torch.int16)[3:]}


def gen_v21():
    state = v21_state()
    _, recs = zip_records(torch_save_bytes(state))
    for name, vname in (("zip_v21", "version"), ("zip_dataversion", ".data/version")):
        p = FIX / f"{name}.pt"
        p.write_bytes(torch_zip(name, v21_records(recs, version_name=vname)))
        names = [n.split("/", 1)[1] for n in zipfile.ZipFile(p).namelist()]
        assert names[1] == "byteorder" and names[-1] == ".data/serialization_id", names
        expect_from_torch(p)


def byteswap(data, dtype):
    """Swap a storage as torch>=2.1 does: by element size, complex by component."""
    size = torch.tensor([], dtype=dtype).element_size()
    if dtype.is_complex:
        size //= 2
    if size == 1:
        return data
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, size)
    return a[:, ::-1].tobytes()


NUMPY_BE = {"float32": ">f4", "int64": ">i8", "float16": ">f2", "bfloat16": ">u2", "complex64": ">c8",
            "bool": "|b1", "int16": ">i2"}


def gen_bigendian():
    state = v21_state()
    raw = torch_save_bytes(state)
    _, recs = zip_records(raw)
    ld = torch_load(io.BytesIO(raw))
    ex = Expect("torch-zip", "big")
    ex.walk(ld.obj, ld.storages)
    dt = {t["storage_key"]: t["dtype"] for t in ex.d["tensors"]}  # one tensor per storage
    swapped = [(n, byteswap(b, getattr(torch, dt[n[5:]])) if n.startswith("data/") else b) for n, b in recs]
    # Independent check: numpy's big-endian reading of each swapped storage
    # gives the original little-endian values (complex: per component).
    for (n, le), (_, be) in zip(recs, swapped):
        if n.startswith("data/"):
            big = np.dtype(NUMPY_BE[dt[n[5:]]])
            assert np.array_equal(np.frombuffer(be, big), np.frombuffer(le, big.newbyteorder("<"))), n
    p = FIX / "zip_bigendian.pt"
    p.write_bytes(torch_zip("zip_bigendian", v21_records(swapped, byteorder="big")))
    ex.write(p)


# float8 / float4 decoders (own code, from the format definitions)

def dec_minifloat(b, ebits, mbits, bias, kind):
    """Decode one byte of a 1-sign minifloat. kind: 'ieee' (inf+nan), 'fn' (nan=all ones), 'fnuz' (nan=0x80)."""
    if kind == "fnuz" and b == 0x80:
        return math.nan
    s = -1.0 if b >> (ebits + mbits) & 1 else 1.0
    e = (b >> mbits) & ((1 << ebits) - 1)
    m = b & ((1 << mbits) - 1)
    emax = (1 << ebits) - 1
    if kind == "ieee" and e == emax:
        return s * math.inf if m == 0 else math.nan
    if kind == "fn" and e == emax and m == (1 << mbits) - 1:
        return math.nan
    if e == 0:
        return s * m * 2.0 ** (1 - bias - mbits)
    return s * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)


def dec_e8m0(b):
    return math.nan if b == 0xFF else 2.0 ** (b - 127)


def check_decoders():
    # e5m2 is the high byte of an IEEE half.
    for b in range(256):
        h = float(np.frombuffer(struct.pack("<H", b << 8), dtype=np.float16)[0])
        d = dec_minifloat(b, 5, 2, 15, "ieee")
        assert (math.isnan(h) and math.isnan(d)) or h == d, (b, h, d)
    assert dec_minifloat(0x7E, 4, 3, 7, "fn") == 448.0
    assert dec_minifloat(0x01, 4, 3, 7, "fn") == 2.0 ** -9
    assert math.isnan(dec_minifloat(0xFF, 4, 3, 7, "fn"))
    assert dec_minifloat(0x7F, 4, 3, 8, "fnuz") == 240.0
    assert dec_minifloat(0x7F, 5, 2, 16, "fnuz") == 57344.0
    assert dec_e8m0(127) == 1.0 and dec_e8m0(0) == 2.0 ** -127


UNTYPED = [
    # name, element size, bytes, decoder to float64 list (None: no stats)
    ("float8_e5m2", 1, bytes([0x00, 0x3C, 0xC0, 0x7B, 0x7C, 0xFC, 0x7F, 0x01]),
     lambda b: [dec_minifloat(x, 5, 2, 15, "ieee") for x in b]),
    ("float8_e4m3fn", 1, bytes([0x00, 0x38, 0xB8, 0x7E, 0x7F, 0x01, 0x80, 0x40]),
     lambda b: [dec_minifloat(x, 4, 3, 7, "fn") for x in b]),
    ("float8_e5m2fnuz", 1, bytes([0x00, 0x40, 0xC0, 0x7F, 0x80, 0x01, 0xFF, 0x44]),
     lambda b: [dec_minifloat(x, 5, 2, 16, "fnuz") for x in b]),
    ("float8_e4m3fnuz", 1, bytes([0x00, 0x40, 0xC0, 0x7F, 0x80, 0x01, 0xFF, 0x48]),
     lambda b: [dec_minifloat(x, 4, 3, 8, "fnuz") for x in b]),
    ("float8_e8m0fnu", 1, bytes([0x7F, 0x80, 0x7E, 0x00, 0xFE, 0xFF]),
     lambda b: [dec_e8m0(x) for x in b]),
    ("uint16", 2, struct.pack("<5H", 0, 1, 300, 32768, 65535),
     lambda b: list(struct.unpack(f"<{len(b) // 2}H", b))),
    ("uint32", 4, struct.pack("<4I", 0, 7, 2 ** 31, 2 ** 32 - 1),
     lambda b: list(struct.unpack(f"<{len(b) // 4}I", b))),
    ("uint64", 8, struct.pack("<4Q", 0, 9, 2 ** 53 + 1, 2 ** 64 - 1),
     lambda b: [float(x) for x in struct.unpack(f"<{len(b) // 8}Q", b)]),
    ("complex32", 4, np.array([1.0, -2.0, 0.5, 3.0], dtype="<f2").tobytes(), None),
    ("float4_e2m1fn_x2", 1, bytes([0x12, 0xF7, 0x00]), None),
]


def gen_untyped():
    check_decoders()
    entries, recs, expect = {}, [], Expect("torch-zip")
    for i, (name, size, data, dec) in enumerate(UNTYPED):
        key = str(i)
        n = len(data) // size
        # the tensor views the whole storage except for the last one, which is a 2-D view
        if name == "uint16":
            shape, stride, off = (2, 2), (1, 2), 1  # transposed view at offset 1
        else:
            shape, stride, off = (n,), (1,), 0
        entries[name] = t_v3(name, key, len(data), shape, stride, off)
        recs.append((f"data/{key}", data))
        if dec is None:
            st = None
        else:
            vals = dec(data)
            logical = [vals[off + sum(ix * s for ix, s in zip(idx, stride))] for idx in np.ndindex(*shape)]
            st = stats_f64(logical)
        expect.d["tensors"].append({
            "name": name, "dtype": name, "shape": list(shape), "strides": list(stride),
            "storage_offset": off, "device": "cpu", "requires_grad": False, "parameter": False,
            "layout": "strided", "quantized": False, "storage_key": key, "storage_nbytes": len(data),
            "stats": st})
    pkl = emit(entries)
    for name, _, _, _ in UNTYPED:
        assert f"ctorch\n{name}\n".encode() in pkl
    assert pkl.count(b"ctorch\nUntypedStorage\n") == 1  # memoized like Python's pickler
    recs.sort()
    full = v21_records([("data.pkl", pkl)] + recs + [("version", b"3\n")])
    p = FIX / "dtypes_untyped.pt"
    p.write_bytes(torch_zip("dtypes_untyped", full))
    check_untyped_pickle(pkl, expect)
    expect.write(p)


def check_untyped_pickle(pkl, expect):
    """Unpickle our hand-written pickle with stand-ins for the torch globals."""
    calls = []

    class U(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) == ("torch._utils", "_rebuild_tensor_v3"):
                return lambda *a: calls.append(a) or a
            if (module, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            assert module == "torch", (module, name)
            return f"torch.{name}"

        def persistent_load(self, pid):
            return pid

    out = U(io.BytesIO(pkl)).load()
    for t, (name, args) in zip(expect.d["tensors"], out.items()):
        pid, off, size, stride, rg, hk, dt = args
        assert pid == ("storage", "torch.UntypedStorage", t["storage_key"], "cpu", t["storage_nbytes"])
        assert (name, dt, off, list(size), list(stride)) == (t["name"], "torch." + t["dtype"], t["storage_offset"],
                                                            t["shape"], t["strides"])


def gen_tar():
    """torch<0.3 tar: members sys_info, pickle, tensors, storages (as old torch._save wrote them)."""
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 2
    ids = torch.tensor([5, -6, 7, 8], dtype=torch.int64)
    storages = [  # key, location, storage class, bytes
        (140234567890000, "cpu", torch.FloatStorage, w.numpy().tobytes()),
        (140234567890512, "cuda:0", torch.LongStorage, ids.numpy().tobytes()),
    ]
    tensors = [  # key, storage key, tensor type, size, stride, offset
        (140234567891024, 140234567890000, torch.FloatTensor, (2, 3), (3, 1), 0),
        (140234567891536, 140234567890000, torch.FloatTensor, (2,), (1,), 4),
        (140234567892048, 140234567890512, torch.LongTensor, (2, 2), (1, 2), 0),
    ]
    obj = collections.OrderedDict([("weight", 0), ("weight_tail", 1), ("ids_t", 2)])

    def pk(o):
        return pickle.dumps(o, protocol=2)

    st = io.BytesIO()
    st.write(pk(len(storages)))
    for key, loc, cls, data in storages:
        st.write(pk((key, loc, cls)))
        elsize = torch.tensor([], dtype=cls.dtype).element_size()
        st.write(struct.pack("<q", len(data) // elsize))
        st.write(data)
    st.write(pk([]))  # storage views: none
    te = io.BytesIO()
    te.write(pk(len(tensors)))
    for key, skey, ttype, size, stride, off in tensors:
        te.write(pk((key, skey, ttype)))
        te.write(struct.pack("<i", len(size)) + b"\0\0\0\0")
        te.write(struct.pack(f"<{len(size)}q", *size) + struct.pack(f"<{len(size)}q", *stride))
        te.write(struct.pack("<q", off))

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, TensorRef):
                return str(tensors[o.i][0])
            return None

    class TensorRef:
        def __init__(self, i):
            self.i = i

    pb = io.BytesIO()
    P(pb, protocol=2).dump(collections.OrderedDict((k, TensorRef(i)) for k, i in obj.items()))
    members = [("sys_info", pk({"protocol_version": 1001, "little_endian": True,
                                "type_sizes": {"short": 2, "int": 4, "long": 8}})),
               ("pickle", pb.getvalue()), ("tensors", te.getvalue()), ("storages", st.getvalue())]
    p = FIX / "tar.pt"
    with tarfile.open(p, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    ex = expect_from_torch(p, fmt="torch-tar", tar_keys=[s[0] for s in storages])
    got = [(t["name"], t["storage_key"], t["device"], t["shape"], t["strides"], t["storage_offset"])
           for t in ex.d["tensors"]]
    assert got == [("weight", "140234567890000", "cpu", [2, 3], [3, 1], 0),
                   ("weight_tail", "140234567890000", "cpu", [2], [1], 4),
                   ("ids_t", "140234567890512", "cuda:0", [2, 2], [1, 2], 0)], got


# safetensors -----------------------------------------------------------------

ST_DTYPES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.float16: "F16",
             torch.bfloat16: "BF16", torch.int32: "I32", torch.float32: "F32", torch.float64: "F64",
             torch.int64: "I64"}
# safetensors' Dtype enum order; writers sort tensors by it, descending, then by name.
ST_RANK = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
           "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]


def raw_bytes(t):
    t = t.contiguous().reshape(-1)
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Write tensors (name -> torch tensor) as safetensors; return {name: (code, begin, end)}."""
    items = sorted(tensors.items(), key=lambda kv: (-ST_RANK.index(ST_DTYPES[kv[1].dtype]), kv[0]))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs, off, where = [], 0, {}
    for name, t in items:
        b = raw_bytes(t)
        code = ST_DTYPES[t.dtype]
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        where[name] = (code, off, off + len(b))
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    check_safetensors(path, tensors)
    return where


def check_safetensors(path, tensors):
    """Re-read the file by the spec's rules and compare with the source tensors."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    assert n % 8 == 0 and 8 + n <= len(data)
    hdr = json.loads(data[8:8 + n])
    hdr.pop("__metadata__", None)
    spans = sorted(v["data_offsets"] for v in hdr.values())
    pos = 0
    for b, e in spans:
        assert b == pos
        pos = e
    assert 8 + n + pos == len(data)
    for name, t in tensors.items():
        v = hdr[name]
        b, e = v["data_offsets"]
        assert v["shape"] == list(t.shape) and data[8 + n + b:8 + n + e] == raw_bytes(t)


def st_entries(tensors, where, file=None):
    out = []
    for name in sorted(tensors):
        t = tensors[name]
        code, b, e = where[name]
        ent = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
               "strides": list(t.contiguous().stride()), "storage_offset": 0, "device": "cpu",
               "requires_grad": False, "parameter": False, "layout": "strided", "quantized": False,
               "storage_key": None, "storage_nbytes": e - b, "stats": tensor_stats(t),
               "st_dtype": code, "data_offsets": [b, e]}
        if file:
            ent["file"] = file
        out.append(ent)
    return out


def st_state():
    return {"model.embed.weight": torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]], dtype=torch.bfloat16),
            "model.norm.weight": torch.tensor([1.0, 0.5, -2.0], dtype=torch.float16),
            "model.head.weight": torch.arange(6, dtype=torch.float32).reshape(3, 2) / 8,
            "model.position_ids": torch.arange(5, dtype=torch.int64),
            "model.mask": torch.tensor([True, False, True, True]),
            "model.scalar": torch.tensor(7, dtype=torch.int32),
            "model.bytes": torch.tensor([0, 128, 255], dtype=torch.uint8)}


def gen_safetensors():
    p = FIX / "model.safetensors"
    tensors = st_state()
    where = write_safetensors(p, tensors, {"format": "pt"})
    ex = Expect("safetensors")
    ex.d["tensors"] = st_entries(tensors, where)
    ex.d["metadata"] = {"format": "pt"}
    ex.write(p)


def gen_sharded():
    tensors = st_state()
    names = sorted(tensors)
    shards = [names[:4], names[4:]]

    d = FIX / "sharded_st"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    ex = Expect("sharded")
    weight_map, total = {}, 0
    for i, part in enumerate(shards, 1):
        fn = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        sub = {n: tensors[n] for n in part}
        where = write_safetensors(d / fn, sub, {"format": "pt"})
        ex.d["tensors"] += st_entries(sub, where, file=fn)
        for n in part:
            weight_map[n] = fn
            total += where[n][2] - where[n][1]
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    ex.write(d, index="model.safetensors.index.json")

    d = FIX / "sharded_bin"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    ex = Expect("sharded")
    model = small_model()
    sd = model.state_dict()
    keys = list(sd)
    weight_map, total = {}, 0
    for i, part in enumerate([keys[:2], keys[2:]], 1):
        fn = f"pytorch_model-{i:05d}-of-00002.bin"
        save(collections.OrderedDict((k, sd[k]) for k in part), d / fn)
        ld = torch_load(d / fn)
        sub = Expect("torch-zip")
        sub.walk(ld.obj, ld.storages)
        for t in sub.d["tensors"]:
            t["file"] = fn
        ex.d["tensors"] += sub.d["tensors"]
        for k in part:
            weight_map[k] = fn
            total += sd[k].numel() * sd[k].element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2) + "\n")
    ex.write(d, index="pytorch_model.bin.index.json")


# ---------------------------------------------------------------------------
# Hostile and broken files (never loaded with torch when they carry a payload).
# ---------------------------------------------------------------------------

def bad(name, data, expect, note):
    BAD.mkdir(parents=True, exist_ok=True)
    p = BAD / name
    p.write_bytes(data)
    Path(str(p) + ".expected.json").write_text(json.dumps(expect) + "\n")
    BAD_NOTES.append(f"- `{name}`: {note}")
    return p


BAD_NOTES = []


def gen_bad_sparse():
    """Sparse tensors whose invariants do not hold, saved by torch 1.13 through
    its unsafe constructors. torch.load refuses both (it validates every loaded
    sparse tensor); ckpt opens them and refuses their data when it is read."""
    cases = {
        "sparse_invalid_coo.pt": ("coo", torch._sparse_coo_tensor_unsafe(
            torch.tensor([[0, 5]]), torch.tensor([1.0, 2.0]), (3,)), "index 5 in a dimension of size 3"),
        "sparse_invalid_csr.pt": ("csr", torch._sparse_csr_tensor_unsafe(
            torch.tensor([1, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), (2, 2)), "crow_indices[0] = 1"),
        "sparse_invalid_coo_negative.pt": ("coo", torch._sparse_coo_tensor_unsafe(
            torch.tensor([[0, 1], [-1, 0]]), torch.tensor([1.0, 2.0]), (2, 2)), "index -1"),
        "sparse_invalid_csr_decreasing.pt": ("csr", torch._sparse_csr_tensor_unsafe(
            torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 0]), torch.tensor([1.0, 2.0, 3.0]), (3, 2)),
            "crow_indices go down (2 then 1)"),
        "sparse_invalid_csr_col.pt": ("csr", torch._sparse_csr_tensor_unsafe(
            torch.tensor([0, 1, 2]), torch.tensor([0, 2]), torch.tensor([1.0, 2.0]), (2, 2)), "col_indices[1] = 2 of 2 columns"),
        "sparse_invalid_csr_unsorted.pt": ("csr", torch._sparse_csr_tensor_unsafe(
            torch.tensor([0, 2, 2]), torch.tensor([1, 0]), torch.tensor([1.0, 2.0]), (2, 2)),
            "col_indices of row 0 not sorted"),
        "sparse_invalid_csr_batched.pt": ("csr", torch._sparse_csr_tensor_unsafe(
            torch.tensor([[0, 1, 2], [0, 2, 2]]), torch.tensor([[0, 1], [1, 1]]), torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
            (2, 2, 2)), "batch 1 repeats column 1 in row 0"),
    }
    for name, (key, t, why) in cases.items():
        buf = io.BytesIO()
        torch.save({key: t, "dense": torch.ones(2)}, buf)
        p = bad(name, buf.getvalue(), {"error": "sparse-data", "tensor": key},
                f"{why}: opens, but reading the {key} components fails (torch.load refuses the file)")
        assert_torch_rejects(p)


def assert_torch_rejects(p):
    try:
        torch.load(p, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any refusal is what we want
        return type(e).__name__
    raise AssertionError(f"torch.load accepted {p}")


def good_tensor():
    return t_v2("FloatStorage", "0", 4, (2, 2), (2, 1))


W4 = struct.pack("<4f", 1, 2, 3, 4)


def unsafe_zip(stem, payload):
    pkl = emit({"model.w": good_tensor(), "payload": payload})
    return torch_zip(stem, [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")])


def gen_bad(basic_path=FIX / "zip_basic.pt"):
    for p in BAD.glob("*"):  # the torch2_* ones are written by the torch 2.x run
        if not p.name.startswith("torch2_"):
            p.unlink()
    BAD_NOTES.clear()

    cases = [("unsafe_os_system", G("os", "system"), ("echo ckpt-fixture-pwned",), "os.system"),
             ("unsafe_posix_system", G("posix", "system"), ("echo ckpt-fixture-pwned",), "posix.system"),
             ("unsafe_builtins_eval", G("builtins", "eval"), ("1+1",), "builtins.eval"),
             ("unsafe_subprocess_popen", G("subprocess", "Popen"), (["true"],), "subprocess.Popen")]
    for stem, g, args, gname in cases:
        data = unsafe_zip(stem, R(g, args))
        assert f"c{g.module}\n{g.name}\n".encode() in zipfile.ZipFile(io.BytesIO(data)).read(f"{stem}/data.pkl")
        bad(stem + ".pt", data, {"error": "unsafe", "global": gname},
            f"data.pkl calls GLOBAL {gname} via REDUCE inside a state dict; refuse as unsafe, run nothing")

    # protocol 4 STACK_GLOBAL spelling of builtins.exec
    e = Emitter(proto=4)
    pkl = e.dumps({"model.w": good_tensor(), "payload": R(Raw(b"\x8c\x08builtins\x8c\x04exec\x93"), ("pass",))})
    bad("unsafe_stack_global.pt",
        torch_zip("unsafe_stack_global", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
        {"error": "unsafe", "global": "builtins.exec"},
        "protocol 4 STACK_GLOBAL builtins.exec + REDUCE; refuse as unsafe")

    pkl = emit({"a": good_tensor(), "b": t_v2("FloatStorage", "1", 2, (2,), (1,))})
    p = bad("missing_record.pt", torch_zip("missing_record", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
            {"error": "missing-record", "tensor": "b"}, "pickle references storage key 1 but data/1 is absent")
    assert_torch_rejects(p)

    pkl = emit({"w": t_v2("FloatStorage", "0", 4, (2, 3), (3, 1))})
    p = bad("short_storage.pt", torch_zip("short_storage", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
            {"error": "short-storage", "tensor": "w"},
            "tensor [2,3] float32 over a 4-element storage (record has those 16 bytes)")
    assert_torch_rejects(p)

    pkl = emit({"w": t_v2("FloatStorage", "0", 6, (2, 3), (3, 1))})
    p = bad("short_record.pt", torch_zip("short_record", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
            {"error": "short-storage", "tensor": "w"},
            "persistent id says 6 float32 elements (24 bytes) but record data/0 holds 16 bytes "
            "(torch 1.13 loads it, filling the last 8 bytes with whatever memory held)")

    big = 2 ** 40
    pkl = emit({"w": t_v2("FloatStorage", "0", 4, (big, big), (big, 1))})
    p = bad("overflow.pt", torch_zip("overflow", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
            {"error": "overflow", "tensor": "w"}, "shape [2^40, 2^40] float32: element and byte counts overflow int64")
    assert_torch_rejects(p)

    pkl = emit({"w": t_v2("FloatStorage", "0", 4, (2, -2), (2, 1))})
    p = bad("negative_shape.pt", torch_zip("negative_shape", [("data.pkl", pkl), ("data/0", W4), ("version", b"3\n")]),
            {"error": "malformed", "tensor": "w"}, "shape [2, -2]")
    assert_torch_rejects(p)

    full = basic_path.read_bytes()
    p = bad("truncated.pt", full[:len(full) // 2], {"error": "truncated"}, "zip_basic.pt cut in half (no central directory)")
    assert_torch_rejects(p)

    p = bad("legacy_empty.pt", b"", {"error": "empty"}, "zero-byte file")
    assert_torch_rejects(p)

    p = bad("garbage.pt", b"this is not a checkpoint, just text\n" * 2, {"error": "format"},
            "72 bytes of text: neither zip, tar, pickle nor safetensors")
    assert_torch_rejects(p)

    depth = 100000
    pkl = b"\x80\x02}q\x00X\x04\x00\x00\x00deepq\x01" + b"]" * depth + b"a" * (depth - 1) + b"s."
    zb = io.BytesIO()
    with zipfile.ZipFile(zb, "w") as z:
        for name, data, method in (("data.pkl", pkl, zipfile.ZIP_DEFLATED), ("version", b"3\n", zipfile.ZIP_STORED)):
            zi = zipfile.ZipInfo(f"deep_nesting/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = method
            z.writestr(zi, data)
    v = pickle.loads(pkl)["deep"]  # sanity: it is a list nested `depth` levels deep
    n = 0
    while v:
        v, n = v[0], n + 1
    assert n == depth - 1
    bad("deep_nesting.pt", zb.getvalue(), {"error": "limit"},
        f"data.pkl (deflated, {len(pkl)} bytes) is a list nested {depth} levels deep; refuse by a depth limit")

    pkl = b"\x80\x04}\x94\x8c\x01a\x94\x8e" + struct.pack("<Q", 2 ** 62) + b"xxxxxxxx\x94s."
    bad("huge_binbytes8.pt", torch_zip("huge_binbytes8", [("data.pkl", pkl), ("version", b"3\n")]),
        {"error": "malformed"},
        f"BINBYTES8 declares 2^62 bytes in a {len(pkl)}-byte pickle; refuse without allocating")

    gen_bad_sparse()

    (BAD / "README.md").write_text(
        "# Hostile and broken checkpoints\n\n"
        "Generated by `scripts/gen_fixtures.py`. Each file F has F.expected.json with the error class a\n"
        "reader must return (`unsafe` also names the global, others the tensor where relevant).\n"
        "None of these may panic, allocate more than the input could hold, or run code.\n"
        "The unsafe payloads are harmless (`echo`, `1+1`, `true`, `pass`) in case a reader executes them.\n\n"
        + "\n".join(BAD_NOTES) + "\n"
        "- `torch2_sparse_invalid_*.pt`: invalid COO (saved as coalesced, unsorted), CSC and BSR sparse tensors saved\n"
        "  by torch 2.x with check_invariants=False (gen_torch2_sparse); torch.load refuses them\n")


# ---------------------------------------------------------------------------

def gen_torch2():
    """Fixtures saved by torch 2.x itself: the dtypes 1.13 lacks (float8, uint16-64) in real
    files, torch 2.x's records (byteorder, .data/serialization_id), an optimizer state of
    torch 2.x, and its legacy format."""
    g = torch.Generator().manual_seed(2)
    base = torch.randn(4, 6, generator=g)
    sd = {"base": base, "base.cols": base[:, 1:5:2], "param": nn.Parameter(torch.randn(3, generator=g))}
    for name in ["float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                 "uint16", "uint32", "uint64", "bfloat16", "float16", "complex64"]:
        dt = getattr(torch, name)
        x = torch.randn(2, 3, generator=g) * 3
        if dt.is_complex:
            x = torch.complex(x, -x)
        elif not dt.is_floating_point:
            x = (x.abs() * 1000).to(torch.int64)
        sd[name] = x.to(dt)
    sd["float8_e4m3fn.t"] = sd["float8_e4m3fn"].t()
    p = FIX / "torch2_dtypes.pt"
    save(sd, p)
    expect_from_torch(p, torch_version=torch.__version__)
    with zipfile.ZipFile(p) as z:
        names = {n.split("/", 1)[1] for n in z.namelist()}
    assert {"byteorder", ".data/serialization_id"} <= names, names

    p = FIX / "torch2_training.pt"
    model, opt = trained_adam()
    save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, p)
    expect_from_torch(p, torch_version=torch.__version__)

    p = FIX / "torch2_legacy.pt"
    save({k: sd[k] for k in ("base", "base.cols", "param", "bfloat16", "float16")}, p,
         _use_new_zipfile_serialization=False)
    expect_from_torch(p, fmt="torch-legacy", torch_version=torch.__version__)


def gen_torch2_modules():
    """Whole models saved by torch 2.x (its Module state has more hook dicts)."""
    gen_modules("torch2_module", torch_version=torch.__version__)


def gen_torch2_wrapper():
    """A wrapper tensor subclass (_make_wrapper_subclass, real data in .elem),
    saved by torch 2.x: _rebuild_from_type_v2(_rebuild_wrapper_subclass, cls,
    ..., {'elem': tensor})."""
    mod = types.ModuleType("mymodule")

    class Wrapper(torch.Tensor):
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise NotImplementedError(func)

    Wrapper.__module__ = "mymodule"
    Wrapper.__qualname__ = "Wrapper"
    mod.Wrapper = Wrapper
    sys.modules["mymodule"] = mod
    try:
        p = FIX / "torch2_wrapper.pt"
        save({"w": Wrapper(torch.arange(4, dtype=torch.float32) / 2), "plain": torch.ones(2)}, p)
        expect_from_torch(p, torch_version=torch.__version__)
    finally:
        del sys.modules["mymodule"]


def gen_torch2_sparse():
    """Sparse layouts torch 1.13 cannot save (CSC, BSR, BSC), beside COO and
    CSR variants, and invalid ones saved by torch 2.x without its checks
    (check_invariants=False), which torch.load refuses."""
    # Every sparse layout torch.load validates, as users make them, so
    # that ckpt's validation is seen to accept what torch accepts.
    p = FIX / "torch2_sparse_layouts.pt"
    dense = torch.tensor([[0.0, 1.0, 0.0, 4.0], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 5.0], [6.0, 7.0, 0.0, 0.0]])
    uncoalesced = torch.sparse_coo_tensor(torch.tensor([[2, 0, 2], [1, 3, 1]]), torch.tensor([1.0, 2.0, 3.0]), (3, 4))
    hybrid = torch.sparse_coo_tensor(torch.tensor([[1, 0]]), torch.tensor([[1.0, 2.0], [3.0, 4.0]]), (2, 2))
    save({"coo_uncoalesced": uncoalesced, "coo_hybrid": hybrid.coalesce(), "csc": dense.to_sparse_csc(),
          "bsr": dense.to_sparse_bsr((2, 2)), "bsc": dense.to_sparse_bsc((2, 2)),
          "csr_batched": torch.stack([dense, dense.t().contiguous()]).to_sparse_csr(),
          "csr_int32": torch.sparse_csr_tensor(torch.tensor([0, 1, 3], dtype=torch.int32),
                                               torch.tensor([1, 0, 2], dtype=torch.int32),
                                               torch.tensor([1.0, 2.0, 3.0]), (2, 3))}, p)
    expect_from_torch(p, torch_version=torch.__version__)

    BAD.mkdir(parents=True, exist_ok=True)
    for f in BAD.glob("torch2_*"):
        f.unlink()
    T = torch.tensor
    cases = {
        "torch2_sparse_invalid_coalesced.pt": ("coo", torch.sparse_coo_tensor(
            T([[1, 0]]), T([1.0, 2.0]), (3,), check_invariants=False)._coalesced_(True),
            "saved with is_coalesced=True but indices [1, 0] are not sorted"),
        "torch2_sparse_invalid_csc.pt": ("csc", torch.sparse_csc_tensor(
            T([0, 1, 2]), T([0, 5]), T([1.0, 2.0]), (2, 2), check_invariants=False), "row_indices[1] = 5 of 2 rows"),
        "torch2_sparse_invalid_bsr.pt": ("bsr", torch.sparse_bsr_tensor(
            T([0, 1]), T([1]), torch.ones(1, 2, 2), (2, 2), check_invariants=False), "block column 1 of 1"),
    }
    for name, (key, t, why) in cases.items():
        buf = io.BytesIO()
        torch.save({key: t, "dense": torch.ones(2)}, buf)
        p = BAD / name
        p.write_bytes(buf.getvalue())
        Path(str(p) + ".expected.json").write_text(json.dumps({"error": "sparse-data", "tensor": key}) + "\n")
        assert_torch_rejects(p)


def gen_torch2_nested():
    """Jagged nested tensors (torch.jagged layout, torch 2.x) as users make
    them: from a list of tensors, and from values + offsets + lengths."""
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.arange(9, dtype=torch.float32).reshape(3, 3) + 10
    values = torch.arange(14, dtype=torch.float32).reshape(7, 2)
    p = FIX / "torch2_nested_jagged.pt"
    save({"jagged": torch.nested.nested_tensor([a, b], layout=torch.jagged),
          "with_lengths": torch.nested.nested_tensor_from_jagged(
              values, offsets=torch.tensor([0, 3, 7]), lengths=torch.tensor([2, 3])),
          "dense": torch.ones(2)}, p)
    expect_from_torch(p, torch_version=torch.__version__)


def _fsdp2_rank(rank, world, store, out):
    """One rank of gen_torch2_fsdp2: FSDP2 (fully_shard) on a CPU gloo group,
    model.state_dict() saved with torch.save, as FSDP2 users save it."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
        for layer in (m[0], m[2], m):
            fully_shard(layer)
        torch.save(m.state_dict(), f"{out}/torch2_fsdp2_w{world}_rank{rank}.pt")
        if world == 2:
            # HSDP: replicated over one mesh dimension, sharded over the other
            # (of size 1, so each rank holds whole tensors).
            mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("replicate", "shard"))
            torch.manual_seed(0)
            h = nn.Linear(3, 2)
            fully_shard(h, mesh=mesh)
            torch.save(h.state_dict(), f"{out}/torch2_hsdp_w2_rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def gen_torch2_fsdp2():
    """FSDP2 / DTensor state dicts (torch 2.x): fully_shard on a CPU gloo
    process group of world size 1 and 2 (torch.multiprocessing, FileStore),
    state_dict() saved by each rank with torch.save; and an HSDP model
    (Replicate, Shard over a 2x1 mesh). Rank 0's and rank 1's files of the
    world-2 run are kept: their shards differ (6 rows split 3+3, 3 rows 2+1)."""
    import tempfile
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        for world in (1, 2):
            mp.spawn(_fsdp2_rank, args=(world, f"{tmp}/store{world}", tmp), nprocs=world)
        for name in ("torch2_fsdp2_w1_rank0.pt", "torch2_fsdp2_w2_rank0.pt", "torch2_fsdp2_w2_rank1.pt",
                     "torch2_hsdp_w2_rank0.pt"):
            shutil.copy(f"{tmp}/{name}", FIX / name)
            expect_from_torch(FIX / name, torch_version=torch.__version__)


def check_sizes():
    total = 0
    for p in FIX.rglob("*"):
        if p.is_file():
            total += p.stat().st_size
            assert p.stat().st_size < MAX_FIXTURE, p
    assert total < 2 * 1024 * 1024, total
    return total


def main():
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    torch.manual_seed(0)
    FIX.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) > 1:  # only the named generators, e.g. gen_modules: other files stay
        for name in sys.argv[1:]:
            globals()[name]()
        print(f"{' '.join(sys.argv[1:])} written to {FIX} ({check_sizes()} bytes)")
        return
    torch2 = int(torch.__version__.split(".")[0]) >= 2
    for p in FIX.iterdir():  # each torch replaces its own fixtures only
        if p.name != "README.md" and p.name.startswith("torch2_") == torch2:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    if torch2:
        gen_torch2()
        gen_torch2_modules()
        gen_torch2_wrapper()
        gen_torch2_sparse()
        gen_torch2_fsdp2()
        gen_torch2_nested()
        print(f"torch {torch.__version__} fixtures written to {FIX} ({check_sizes()} bytes)")
        return
    check_zip_writer()
    check_emitter()
    basic = gen_zip_basic()
    gen_zip_archive()
    gen_legacy()
    gen_root_tensor()
    gen_dir_checkpoint()
    gen_dtypes_classic()
    gen_tied()
    gen_params()
    gen_training()
    gen_cuda()
    gen_quantized()
    gen_sparse()
    gen_foreign()
    gen_legacy_protocols()
    gen_modules()
    gen_storages()
    gen_values()
    gen_quant_packed()
    gen_old_formats()
    gen_old_tensor_class()
    gen_quantized_models()
    gen_torchscript()
    gen_zip_variants()
    gen_v21()
    gen_bigendian()
    gen_untyped()
    gen_tar()
    gen_safetensors()
    gen_sharded()
    gen_bad(basic)
    print(f"fixtures written to {FIX} ({check_sizes()} bytes)")


if __name__ == "__main__":
    main()
