#!/usr/bin/python3
"""A blocklist pickle scanner in the style of picklescan, stdlib only: the peer of
bench/scan_bench.sh (no blocklist scanner is packaged by Debian, PyPI is not reachable).

For each file (directories recursively): a zip is opened with zipfile and every *.pkl record
scanned; any other file is scanned as pickles back to back (the legacy format). Each pickle is
walked with pickletools.genops; GLOBAL/INST give module and name, STACK_GLOBAL takes the two
most recent string arguments (as picklescan does). Names are matched against a module
blocklist. Prints one line per dangerous global; exit 1 if any.
"""
import io, os, pickletools, sys, zipfile

BLOCK = {"os", "posix", "nt", "subprocess", "sys", "socket", "shutil", "runpy", "builtins.eval",
         "builtins.exec", "builtins.compile", "builtins.open", "builtins.__import__", "webbrowser",
         "httplib", "requests", "aiohttp", "pty", "bdb", "pdb", "asyncio", "commands", "__builtin__.eval",
         "__builtin__.exec", "__builtin__.open", "__builtin__.__import__", "operator.attrgetter"}


def globals_of(f):
    found, strings = [], []
    try:
        for op, arg, pos in pickletools.genops(f):
            if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
                           "BINSTRING", "SHORT_BINSTRING"):
                strings.append(arg)
            elif op.name in ("GLOBAL", "INST"):
                found.append(tuple(arg.split(" ", 1)))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append((strings[-2], strings[-1]))
            if op.name == "STOP":
                return found, True
    except Exception:
        pass
    return found, False


def scan_stream(f):
    """Pickles back to back from the file object f (genops reads it
    incrementally, leaving it after STOP): at most the legacy format's five."""
    out = []
    for _ in range(5):
        g, ok = globals_of(f)
        out += g
        if not ok:
            break
    return out


def scan_file(path):
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return [g for n in z.namelist() if n.endswith(".pkl") for g in scan_stream(io.BytesIO(z.read(n)))]
    with open(path, "rb") as f:
        return scan_stream(f)


def bad(mod, name):
    return mod in BLOCK or mod.split(".")[0] in BLOCK or f"{mod}.{name}" in BLOCK


def main():
    hits = 0
    for arg in sys.argv[1:]:
        paths = [arg] if os.path.isfile(arg) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(arg) for f in fs)
        for p in paths:
            for mod, name in scan_file(p):
                if bad(mod, name):
                    hits += 1
                    print(f"{p}: dangerous global {mod}.{name}")
    sys.exit(1 if hits else 0)


if __name__ == "__main__":
    main()
