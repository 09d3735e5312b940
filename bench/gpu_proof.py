"""Helpers of bench/gpu_proof.sh (issue 9, part 2), run on the GPU machine.

  gen DIR GB             write DIR/model.pt (>= GB GB of float32/bfloat16, thousands of
                         tensors, tied weights and views), DIR/model.safetensors (the same
                         distinct tensors), DIR/be_le.pt and DIR/be.pt (a ~1 GB subset saved
                         little-endian, then the same file rewritten big-endian as torch
                         does on a big-endian machine); reuses files already there
  check-be DIR           torch.load both endian files and compare every tensor
  fixture NAME CPU CUDA  compare `ckpt load --json` to the cpu and to cuda:0: every storage's
                         digests agree and the upload was verified; prints one line
  peer METHOD FILE       time one peer load in this process; prints one JSON line
  table JSONL            markdown table of bench/gpu_proof.sh's results
"""
import json
import os
import sys
import time
import zipfile


def gen(d, gb):
    import torch
    os.makedirs(d, exist_ok=True)
    pt, st = os.path.join(d, "model.pt"), os.path.join(d, "model.safetensors")
    be, le = os.path.join(d, "be.pt"), os.path.join(d, "be_le.pt")
    if all(os.path.exists(p) for p in (pt, st, be, le)) and os.path.getsize(pt) >= gb * 1e9:
        print("reusing", pt, st, be, le)
        return
    g = torch.Generator().manual_seed(0)
    sd, total, layer = {}, 0, 0
    h = 1024
    # Per layer 12 tensors, bf16 and f32, from 4 KiB to 16 MiB: ~40 MB.
    shapes = [("attn.q", (h, h), torch.bfloat16), ("attn.k", (h, h), torch.bfloat16),
              ("attn.v", (h, h), torch.bfloat16), ("attn.o", (h, h), torch.bfloat16),
              ("attn.q_bias", (h,), torch.float32), ("attn.k_bias", (h,), torch.float32),
              ("mlp.up", (h, 4 * h), torch.float32), ("mlp.down", (4 * h, h), torch.float32),
              ("mlp.up_bias", (4 * h,), torch.bfloat16), ("mlp.down_bias", (h,), torch.float32),
              ("norm1.weight", (h,), torch.float32), ("norm2.weight", (h,), torch.bfloat16)]
    sd["embed.weight"] = torch.randn(32000, h, generator=g).to(torch.bfloat16)
    total += sd["embed.weight"].numel() * 2
    while total < gb * 1e9 or layer < 2:
        for name, shape, dt in shapes:
            t = torch.randn(*shape, generator=g).to(dt)
            sd[f"layers.{layer}.{name}"] = t
            total += t.numel() * t.element_size()
        layer += 1
    sd["lm_head.weight"] = sd["embed.weight"]  # tied: one storage, two names
    sd["layers.0.attn.q_rows"] = sd["layers.0.attn.q"][7:300]  # a view into a storage
    torch.save(sd, pt)
    distinct = {k: v for k, v in sd.items() if k not in ("lm_head.weight", "layers.0.attn.q_rows")}
    from safetensors.torch import save_file
    save_file(distinct, st)
    print(f"wrote {pt}: {len(sd)} tensors, {total} bytes of distinct storages, {layer} layers")

    # Big-endian: a ~1 GB subset. torch.save numbers storages "0", "1", ... in the
    # order it first meets them (dict order), so key i is the i-th distinct storage.
    sub, n = {}, 0
    for k, v in distinct.items():
        if n > 1e9:
            break
        sub[k] = v
        n += v.numel() * v.element_size()
    sub["tied.alias"] = sub["embed.weight"]
    torch.save(sub, le)
    sizes, seen = [], set()
    for v in sub.values():
        p = v.untyped_storage().data_ptr() if hasattr(v, "untyped_storage") else v.storage().data_ptr()
        if p not in seen:
            seen.add(p)
            sizes.append(v.element_size())
    import numpy as np
    with zipfile.ZipFile(le) as zin, zipfile.ZipFile(be, "w", zipfile.ZIP_STORED, allowZip64=True) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            rec = info.filename.split("/", 1)[1]
            if rec == "byteorder":
                data = b"big"
            elif rec.startswith("data/"):
                size = sizes[int(rec[5:])]
                data = np.frombuffer(data, np.uint8).reshape(-1, size)[:, ::-1].tobytes()
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=info.date_time), data)
    print(f"wrote {be} (big-endian) and {le}: {len(sub)} tensors, {n} bytes")


def check_be(d):
    import torch
    a = torch.load(os.path.join(d, "be_le.pt"), weights_only=True)
    b = torch.load(os.path.join(d, "be.pt"), weights_only=True)
    bad = [k for k in a if not torch.equal(a[k], b[k])]
    print("big-endian file: torch reads", "the same values: PASS" if not bad and a.keys() == b.keys() else f"different values: FAIL {bad[:5]}")


def fixture(name, cpu_path, cuda_path):
    cpu, cuda = json.load(open(cpu_path)), json.load(open(cuda_path))
    # Storage keys repeat across the shards of a sharded checkpoint: the i-th
    # storage of a key on the GPU is the i-th of that key on the cpu (both in file order).
    want = {}
    for st in (cpu.get("loaded") or {}).get("storages", []):
        want.setdefault(st["key"], []).append(st["digest"])
    up = cuda.get("uploaded") or {}
    problems = []
    if not up.get("verified"):
        problems.append("not verified")
    for s in up.get("storages", []):
        if not want.get(s["key"]):
            problems.append(f"storage {s['key']} not loaded on the cpu")
            continue
        cpu_digest = want[s["key"]].pop(0)
        if s["file_digest"] != cpu_digest:
            problems.append(f"storage {s['key']}: file digest {s['file_digest']}, cpu {cpu_digest}")
        if s.get("device_digest") != s["upload_digest"]:
            problems.append(f"storage {s['key']}: device {s.get('device_digest')}, upload {s['upload_digest']}")
    n = len(up.get("storages", []))
    print(f"{name}: {'PASS' if not problems else 'FAIL'}: {n} storages, {up.get('bytes', 0)} bytes on cuda:0"
          + ("" if not problems else ": " + "; ".join(problems[:5])))


def peer(method, path):
    t0 = time.perf_counter()
    import torch
    t_import = time.perf_counter()
    torch.cuda.init()
    torch.empty(1, device="cuda:0")
    torch.cuda.synchronize()
    t_init = time.perf_counter()
    nbytes = 0
    if method == "torch_load":
        sd = torch.load(path, map_location="cuda:0", weights_only=True)
    elif method == "torch_mmap_to":
        cpu = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
        sd = {k: v.to("cuda:0") for k, v in cpu.items()}  # a tied pair is copied twice, as this idiom does
    elif method == "safetensors":
        from safetensors.torch import load_file
        sd = load_file(path, device="cuda:0")
    elif method == "pinned_copy":
        # The physical limit: the file's bytes in one pinned buffer, copied host to device
        # (cudaMemcpyAsync from page-locked memory); pinning and reading are outside the timing.
        n = os.path.getsize(path)
        host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        with open(path, "rb", buffering=0) as f:
            view, got = memoryview(host.numpy()), 0
            while got < n:
                k = f.readinto(view[got:])
                if not k:
                    raise SystemExit(f"{path}: short read")
                got += k
        dev = torch.empty(n, dtype=torch.uint8, device="cuda:0")
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        t_init = time.perf_counter()
        dev.copy_(host, non_blocking=True)
        sd, nbytes = {}, n
    else:
        raise SystemExit(f"unknown method {method}")
    torch.cuda.synchronize()
    t_end = time.perf_counter()
    if not nbytes:
        seen = set()
        for v in sd.values():
            s = v.untyped_storage()
            if s.data_ptr() not in seen:
                seen.add(s.data_ptr())
                nbytes += s.nbytes()
    print(json.dumps({"method": method, "file": path, "seconds": t_end - t_init, "seconds_with_cuda_init": t_end - t_import,
                      "import_seconds": t_import - t0, "bytes_on_gpu": nbytes, "tensors": len(sd)}))


def table(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    limit = [r["gb_per_s"] for r in rows if r["method"].startswith("pinned") and r["cache"] == "warm"]
    limit = max(limit) if limit else 0
    print("| method | file | page cache | runs | median s | GB/s | % of pinned H2D | median s incl. CUDA init / process |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        pct = f"{100 * r['gb_per_s'] / limit:.0f}%" if limit else "-"
        print(f"| {r['method']} | {os.path.basename(r['file'])} | {r['cache']} | {r['runs']} | {r['seconds']:.3f} | "
              f"{r['gb_per_s']:.2f} | {pct} | {r.get('wall', 0):.3f} |")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"gen": lambda: gen(args[0], float(args[1])), "check-be": lambda: check_be(args[0]),
     "fixture": lambda: fixture(*args), "peer": lambda: peer(*args), "table": lambda: table(args[0])}[cmd]()
