"""Independent safetensors reader used by the Go tests (json + numpy only).

Usage: read_safetensors.py FILE
Prints a JSON object: header_len, metadata, and for each tensor its dtype,
shape, offsets and (where numpy can decode the dtype) its values as a flat
list. Exits non-zero on any violation of the format.
"""
import json
import struct
import sys

import numpy as np

NUMPY = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "I16": "<i2", "U16": "<u2",
    "F16": "<f2", "I32": "<i4", "U32": "<u4", "F32": "<f4", "I64": "<i8",
    "U64": "<u8", "F64": "<f8", "C64": "<c8",
}
BYTE_WIDTH = {"F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1,
              "F8_E5M2FNUZ": 1, "BF16": 2}


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def values(dtype, raw):
    if dtype in NUMPY:
        arr = np.frombuffer(raw, dtype=NUMPY[dtype])
        if dtype == "C64":
            return [[float(z.real), float(z.imag)] for z in arr]
        if dtype == "BOOL":
            return [int(b) for b in arr]
        return arr.tolist()
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").tolist()
    return list(raw)  # raw bytes of types numpy cannot decode


def main():
    with open(sys.argv[1], "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n].decode("utf-8")
    pairs_seen = []
    header = json.loads(text, object_pairs_hook=lambda p: (pairs_seen.append(p), dict(p))[1])
    for p in pairs_seen:
        keys = [k for k, _ in p]
        if len(keys) != len(set(keys)):
            fail("duplicate keys")
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", None)
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    pos = 0
    out = {}
    for name, info in entries:
        begin, end = info["data_offsets"]
        if begin != pos or end < begin:
            fail("offsets of %r do not tile" % name)
        pos = end
        raw = data[begin:end]
        numel = 1
        for d in info["shape"]:
            numel *= d
        width = np.dtype(NUMPY[info["dtype"]]).itemsize if info["dtype"] in NUMPY else BYTE_WIDTH.get(info["dtype"])
        if width is not None and numel * width != end - begin:
            fail("size of %r does not match" % name)
        out[name] = {"dtype": info["dtype"], "shape": info["shape"], "begin": begin,
                     "end": end, "values": values(info["dtype"], raw) if width else None}
    if pos != len(data):
        fail("data buffer has %d bytes, tensors cover %d" % (len(data), pos))
    json.dump({"header_len": n, "metadata": metadata, "tensors": out}, sys.stdout)


main()
