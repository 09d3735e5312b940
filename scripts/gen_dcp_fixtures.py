#!/usr/bin/python3
"""Regenerate the torch.distributed.checkpoint (DCP) fixtures under testdata/dcp/.

Needs torch 2.x (DCP, DTensor, DeviceMesh); run it in the trixie chroot:

    scripts/torch2-python scripts/gen_dcp_fixtures.py

Each fixture is a real multi-process save: 4 processes started with
torch.multiprocessing.spawn, gloo backend on 127.0.0.1 (USE_LIBUV=0, as
Debian's torch has no libuv), DeviceMeshes on "cpu", DTensors sharded with
Shard(0), Shard(1), Replicate and on a 2x2 mesh, uneven splits included,
then torch.distributed.checkpoint.save.

Beside each fixture directory D the script writes, from torch's own
torch.distributed.checkpoint.format_utils.dcp_to_torch_save on D:
  D.torch.pt        the consolidated torch.save file torch produces
  D.expected.json   {"tensors": {name: {dtype, shape, sha256}}, "values": {name: repr}}
where name joins the nested keys with "." and sha256 is over the tensor's
contiguous little-endian bytes.

Usage: gen_dcp_fixtures.py [--out DIR] [--only NAME] [--big GB --port P]
  --big writes one large checkpoint (benchmarks), not the fixtures.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "testdata" / "dcp"
WORLD = 4


def full(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-1000, 1000, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def basic_state():
    """The state of the "basic" fixture; built identically on every rank."""
    m1 = init_device_mesh("cpu", (WORLD,))
    m2 = init_device_mesh("cpu", (2, 2))
    sd = {
        "model": {
            # 10 rows over 4 ranks: 3,3,3,1 (torch.chunk semantics).
            "embed.weight": distribute_tensor(full((10, 6), torch.float32, 1), m1, [Shard(0)]),
            # 7 columns over 4 ranks: 2,2,2,1.
            "proj.weight": distribute_tensor(full((5, 7), torch.bfloat16, 2), m1, [Shard(1)]),
            # The same bytes on every rank: saved once.
            "norm.weight": distribute_tensor(full((6,), torch.float16, 3), m1, [Replicate()]),
            # 2x2 mesh, rows over mesh dim 0 and columns over mesh dim 1: 4 blocks, 9 = 5+4.
            "mlp.weight": distribute_tensor(full((8, 9), torch.float32, 4), m2, [Shard(0), Shard(1)]),
            # 2x2 mesh, columns over mesh dim 0, replicated over mesh dim 1.
            "mix.weight": distribute_tensor(full((3, 5), torch.float16, 5), m2, [Shard(1), Replicate()]),
            # 3-D, sharded on the last dim: 3 = 1+1+1 over 4 ranks, the last rank empty.
            "conv.weight": distribute_tensor(full((2, 4, 3), torch.float64, 6), m1, [Shard(2)]),
            "counts": distribute_tensor(full((7,), torch.int64, 7), m1, [Shard(0)]),
            "ids": distribute_tensor(full((6, 2), torch.int32, 8), m1, [Shard(0)]),
            "bytes": distribute_tensor(full((9,), torch.uint8, 9), m1, [Shard(0)]),
            # Plain tensors, identical on every rank.
            "mask": full((4, 5), torch.bool, 10),
            "scale": torch.tensor(0.125),
            "small": full((3,), torch.int8, 11),
        },
        "optim": {
            "state": {
                "0": {
                    "exp_avg": distribute_tensor(full((10, 6), torch.float32, 12), m1, [Shard(0)]),
                    "exp_avg_sq": distribute_tensor(full((10, 6), torch.float32, 13), m1, [Shard(0)]),
                    "step": torch.tensor(42.0),
                },
                "1": {
                    "exp_avg": distribute_tensor(full((8, 9), torch.float32, 14), m2, [Shard(0), Shard(1)]),
                    "step": torch.tensor(42.0),
                },
            },
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "weight_decay": 0.0, "params": [0, 1], "name": "main"}],
        },
        "epoch": 7,
        "run": "fixture-run",
        "history": [1, 2, 3],
    }
    return sd


def worker(rank, port, outdir, kind, gb):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        if kind == "basic":
            sd = basic_state()
        else:
            sd = big_state(gb)
        dcp.save(sd, checkpoint_id=outdir)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def big_state(gb):
    """About gb GiB of bf16/f32 weights on a 2x2 mesh, shards on both dims."""
    m2 = init_device_mesh("cpu", (2, 2))
    m1 = init_device_mesh("cpu", (WORLD,))
    sd = {}
    n = int(gb * (1 << 30))
    i = 0
    # 4096x4096 f32 = 64 MiB each, alternating placements.
    each = 4096 * 4096 * 4
    placements = [(m2, [Shard(0), Shard(1)]), (m1, [Shard(0)]), (m1, [Shard(1)]), (m2, [Shard(1), Replicate()])]
    while n > 0:
        mesh, pl = placements[i % len(placements)]
        # Cheap to make on a shared CPU, different in every element.
        t = torch.arange(4096 * 4096, dtype=torch.float32).reshape(4096, 4096).mul_(1e-3).add_(i)
        sd[f"layers.{i}.weight"] = distribute_tensor(t, mesh, pl)
        n -= each
        i += 1
    return sd


def describe(obj, prefix, tensors, values):
    if isinstance(obj, torch.Tensor):
        t = obj.contiguous()
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        elif t.dtype == torch.bool:
            raw = t.to(torch.uint8).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        tensors[prefix] = {
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
    elif isinstance(obj, dict):
        for k, v in obj.items():
            describe(v, f"{prefix}.{k}" if prefix else str(k), tensors, values)
    else:
        values[prefix] = repr(obj)


def make(name, kind, port, gb=0.0, out=OUT):
    d = out / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    mp.spawn(worker, args=(port, str(d), kind, gb), nprocs=WORLD, join=True)
    if kind != "basic":
        return
    pt = out / (name + ".torch.pt")
    dcp_to_torch_save(str(d), str(pt))
    sd = torch.load(pt, weights_only=False)
    tensors, values = {}, {}
    describe(sd, "", tensors, values)
    exp = {"torch": torch.__version__, "tensors": tensors, "values": values}
    (out / (name + ".expected.json")).write_text(json.dumps(exp, indent=1, sort_keys=True) + "\n")


class _System:
    """Pickles as a call of os.system: what ckpt must refuse to load."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def make_bad(out=OUT):
    """testdata/dcp/bad/*.metadata: the basic fixture's metadata, unpickled
    and pickled again by Python after one change each; a test puts each
    beside copies of basic's .distcp files."""
    import copy
    import pickle

    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex

    src = pickle.loads((out / "basic" / ".metadata").read_bytes())
    bad = out / "bad"
    bad.mkdir(exist_ok=True)

    def write(name, md):
        (bad / (name + ".metadata")).write_bytes(pickle.dumps(md))

    def move(md, fqn, i, offsets=None, sizes=None):
        tm = md.state_dict_metadata[fqn]
        c = tm.chunks[i]
        info = md.storage_data.pop(MetadataIndex(fqn, c.offsets))
        c2 = ChunkStorageMetadata(offsets=torch.Size(offsets or c.offsets), sizes=torch.Size(sizes or c.sizes))
        tm.chunks[i] = c2
        md.storage_data[MetadataIndex(fqn, c2.offsets)] = info

    md = copy.deepcopy(src)
    md.state_dict_metadata["model.embed.weight"].chunks.pop()  # rows 9:10 lost
    write("gap", md)
    md = copy.deepcopy(src)
    move(md, "model.counts", 1, offsets=[1])  # [0,2) and [1,3)
    write("overlap", md)
    md = copy.deepcopy(src)
    move(md, "model.ids", 0, sizes=[2, 3])  # 3 columns of 2
    write("outside", md)
    md = copy.deepcopy(src)
    k = MetadataIndex("model.proj.weight", torch.Size([0, 0]))
    md.storage_data[k].relative_path = "../basic/__0_0.distcp"
    write("path", md)
    md = copy.deepcopy(src)
    md.planner_data["x"] = _System()
    write("unsafe", md)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--big", type=float, default=0)
    ap.add_argument("--port", type=int, default=29511)
    a = ap.parse_args()
    out = Path(a.out)
    torch.set_num_threads(1)
    if a.big:
        make("big", "big", a.port, a.big, out)
        return
    make("basic", "basic", a.port, out=out)
    make_bad(out)


if __name__ == "__main__":
    main()
