#!/usr/bin/env python3
"""Benchmark: `ckpt inspect` vs torch.load(map_location='cpu') vs gopickle's pytorch.Load.

Generates (once) a checkpoint of >= 2 GB with 500 tensors, and a 1 MB one with the same
500 names, then measures each reader on both in the same run, warm page cache, N runs each,
reporting the median wall time (subprocess) and the peak RSS of the process (/usr/bin/time %M).
torch.load is timed inside its process (import excluded) and as a whole process.

With --torch2 PY (default: scripts/torch2-python when its chroot is mounted), a second table
measures torch 2.x's loader on the same files: torch.load(map_location='cpu') with 2.x's default
weights_only=True, and with mmap=True (2.1+), which maps the file instead of reading it.

usage: /usr/bin/python3 bench/inspect_bench.py [--dir /tmp/ckpt-bench] [--runs 5] [--torch2 PY]
Prints markdown tables for docs/benchmarks.md.
"""
import argparse, os, platform, statistics, subprocess, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def gen(path, total_bytes, n=500):
    if os.path.exists(path):
        return
    import torch
    per = total_bytes // n // 4
    sd = {}
    for i in range(n):
        sd[f"layers.{i // 4}.block{i % 4}.weight"] = torch.empty(per, dtype=torch.float32).fill_(i)
    tmp = path + ".tmp"
    torch.save(sd, tmp)
    os.rename(tmp, path)


def run(cmd, runs):
    """Median wall time of cmd over runs, and its peak RSS from /usr/bin/time."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    rss = int(r.stderr.strip().splitlines()[-1]) * 1024
    return statistics.median(times), rss


def inner_time(cmd, runs):
    vals = []
    for _ in range(runs):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        vals.append(float(out.split()[-1]))
    return statistics.median(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/ckpt-bench")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=2_200_000_000)
    ap.add_argument("--torch2", default=os.path.join(ROOT, "scripts", "torch2-python"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    big = os.path.join(a.dir, "big-500.pt")
    small = os.path.join(a.dir, "small-500.pt")
    gen(big, a.size)
    gen(small, 1_000_000)
    ckpt = os.path.join(a.dir, "ckpt")
    gpl = os.path.join(a.dir, "gopickleload")
    subprocess.run(["go", "build", "-o", ckpt, "./cmd/ckpt"], cwd=ROOT, check=True)
    subprocess.run(["go", "build", "-o", gpl, "./bench/gopickleload"], cwd=ROOT, check=True)
    py = "/usr/bin/python3"
    torch_inner = [py, "-c", "import sys,time,torch; t=time.perf_counter(); torch.load(sys.argv[1], map_location='cpu'); print(time.perf_counter()-t)"]
    torch_import = [py, "-c", "import torch"]
    torch2 = None
    if a.torch2 and subprocess.run([a.torch2, "-c", "import torch"], capture_output=True).returncode == 0:
        torch2 = subprocess.run([a.torch2, "-c", "import torch; print(torch.__version__)"],
                                capture_output=True, text=True).stdout.strip()
    rows, rows2 = [], []
    for label, path in (("2.2 GB, 500 tensors", big), ("1 MB, 500 tensors", small)):
        for f in (path,):  # warm the page cache
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        size = os.path.getsize(path)
        c_wall, c_rss = run([ckpt, "inspect", "--json", path], a.runs)
        g_wall, g_rss = run([gpl, path], a.runs)
        g_in = inner_time([gpl, path], a.runs)
        t_wall, t_rss = run(torch_inner + [path], a.runs)
        t_in = inner_time(torch_inner + [path], a.runs)
        _, imp_rss = run(torch_import, 1)
        rows.append((label, size, c_wall, c_rss, g_wall, g_in, g_rss, t_wall, t_in, t_rss, imp_rss))
        if torch2:
            r2 = [label, size, c_wall]
            for kw in ("", ", mmap=True"):
                cmd = [a.torch2, "-c", "import sys,time,torch; t=time.perf_counter(); "
                       f"torch.load(sys.argv[1], map_location='cpu'{kw}); print(time.perf_counter()-t)", path]
                wall, rss = run(cmd, a.runs)
                r2 += [inner_time(cmd, a.runs), wall, rss]
            rows2.append(r2)
    print(f"Machine: {platform.node()}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
          f"{platform.platform()}; warm page cache; median of {a.runs} runs; {time.strftime('%Y-%m-%d')}")
    print()
    print("| file | ckpt inspect (process) | ckpt peak RSS | gopickle pytorch.Load (in-process / process) | gopickle peak RSS | torch.load cpu (in-process / process) | torch peak RSS (import alone) | torch.load / ckpt | gopickle / ckpt |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (label, size, cw, cr, gw, gi, gr, tw, ti, tr, ir) in rows:
        print(f"| {label} ({size/1e9:.3f} GB) | {cw*1e3:.1f} ms | {cr/2**20:.0f} MiB | {gi*1e3:.0f} / {gw*1e3:.0f} ms | {gr/2**20:.0f} MiB | "
              f"{ti*1e3:.0f} / {tw*1e3:.0f} ms | {tr/2**20:.0f} MiB ({ir/2**20:.0f}) | {ti/cw:.0f}x (process: {tw/cw:.0f}x) | {gi/cw:.0f}x |")
    if rows2:
        print()
        print(f"torch {torch2} (Debian trixie chroot), same files and run:")
        print()
        print("| file | ckpt inspect (process) | torch.load cpu, weights_only (in-process / process) | peak RSS | torch.load mmap=True (in-process / process) | peak RSS | load / ckpt | mmap / ckpt |")
        print("|---|---|---|---|---|---|---|---|")
        for (label, size, cw, li, lw, lr, mi, mw, mr) in rows2:
            print(f"| {label} ({size/1e9:.3f} GB) | {cw*1e3:.1f} ms | {li*1e3:.0f} / {lw*1e3:.0f} ms | {lr/2**20:.0f} MiB | "
                  f"{mi*1e3:.0f} / {mw*1e3:.0f} ms | {mr/2**20:.0f} MiB | {li/cw:.0f}x (process: {lw/cw:.0f}x) | "
                  f"{mi/cw:.1f}x (process: {mw/cw:.0f}x) |")


if __name__ == "__main__":
    main()
