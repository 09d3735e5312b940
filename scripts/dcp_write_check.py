"""Checks a DCP directory ckpt wrote against its input with torch 2.x
(run by convert's TestInteropDCPWrite through scripts/torch2-python).

    python3 dcp_write_check.py DCPDIR INPUT WORLD [WORLD...]

INPUT is the checkpoint ckpt converted (.pt/.pth or .safetensors); its
state dict, as torch.load gives it (nested dicts, lists, tuples) and
flattened to dotted names for the comparison, must equal:
  1. torch.distributed.checkpoint.format_utils.dcp_to_torch_save(DCPDIR),
     tensor for tensor (dtype, shape, bits) and value for value;
  2. torch.distributed.checkpoint.load(DCPDIR) into a nested state dict of
     INPUT's structure, its tensors empty and its other values None, in
     WORLD gloo processes on CPU, for each WORLD given; and, for WORLD > 1,
     into the same structure with every tensor of 2 or more rows a DTensor
     sharded Shard(0) over the WORLD ranks (torch.chunk's placement, as
     FSDP2 or tensor parallelism hold them: uneven, and empty on the last
     ranks when there are fewer rows than ranks), each rank checking its
     own rows.
Prints OK and exits 0, or prints the first difference and exits 1.
"""
import faulthandler
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def flatten(obj, prefix, out):
    # As ckpt names the leaves of a nested checkpoint: dict keys and
    # list/tuple indices joined with dots.
    if isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        obj = dict(enumerate(obj))
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = obj
    return out


def reference_tree(path):
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path)
    return torch.load(path, map_location="cpu", weights_only=False)


def reference(path):
    return flatten(reference_tree(path), "", {})


def remap(obj, prefix, leaf):
    # obj's structure (dicts, lists, tuples) with each leaf replaced by
    # leaf(name, value), names as flatten gives them.
    if isinstance(obj, dict):
        return {k: remap(v, f"{prefix}.{k}" if prefix else str(k), leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        items = [remap(v, f"{prefix}.{i}" if prefix else str(i), leaf) for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    return leaf(prefix, obj)


def blank(obj):
    # A fresh state dict of obj's structure: empty tensors, values None.
    return remap(obj, "", lambda _, v: torch.empty_like(v) if isinstance(v, torch.Tensor) else None)


def same(name, want, got):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{name}: got {type(got).__name__}, want a tensor"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
        a, b = want.contiguous().reshape(-1), got.contiguous().reshape(-1)
        if a.dtype != torch.bool:
            a, b = a.view(torch.uint8), b.view(torch.uint8)
        if not torch.equal(a, b):
            return f"{name}: values differ"
        return None
    if type(got) is not type(want) or got != want:
        return f"{name}: got {got!r}, want {want!r}"
    return None


def compare(want, got, what):
    if set(want) != set(got):
        return f"{what}: keys differ: missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}"
    for k in want:
        d = same(k, want[k], got[k])
        if d:
            return f"{what}: {d}"
    return None


def load_worker(rank, world, store, ckdir, src, errs):
    # Each process reads the reference itself: tensors handed to spawned
    # processes go through shared-memory file descriptors, which hung now
    # and then in the chroot.
    tree = reference_tree(src)
    want = flatten(tree, "", {})
    faulthandler.dump_traceback_later(60, exit=True)  # a hang shows where, then fails
    # A file rendezvous: no port, and no libuv (Debian's torch lacks it).
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    try:
        sd = blank(tree)
        dcp.load(sd, checkpoint_id=ckdir)
        d = compare(want, flatten(sd, "", {}), f"dcp.load in {world} processes, rank {rank}")
        if d:
            errs.put(d)
            return
        if world > 1:
            # As an FSDP2/tensor-parallel model's state dict: DTensors
            # sharded on dim 0 over the world (torch.chunk's placement),
            # each rank reading only its own rows.
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor import DTensor, Shard
            mesh = init_device_mesh("cpu", (world,))
            local = {}

            def shard(k, v):
                if not isinstance(v, torch.Tensor):
                    return None
                if v.dim() == 0 or v.shape[0] < 2:
                    return torch.empty_like(v)
                parts = list(v.chunk(world, 0))
                mine = parts[rank] if rank < len(parts) else v[v.shape[0]:]
                local[k] = mine
                return DTensor.from_local(torch.empty_like(mine), mesh, [Shard(0)], run_check=False,
                                          shape=v.shape, stride=v.stride())
            sd = remap(tree, "", shard)
            if not local:
                errs.put("no tensor to shard")
                return
            dcp.load(sd, checkpoint_id=ckdir)
            got = remap(sd, "", lambda _, v: v.to_local() if isinstance(v, DTensor) else v)
            got = flatten(got, "", {})
            d = compare({**want, **local}, got, f"dcp.load into DTensors Shard(0) in {world} processes, rank {rank}")
            if d:
                errs.put(d)
    except BaseException:
        errs.put(f"rank {rank} of {world}: " + traceback.format_exc())
    finally:
        # dist.destroy_process_group() hangs now and then with gloo in the
        # chroot (seen at world sizes 1 and 2): every result is already in
        # the queue's pipe, so leave without tearing gloo down.
        os._exit(0)


def main():
    ckdir, src, worlds = sys.argv[1], sys.argv[2], [int(w) for w in sys.argv[3:]]
    want = reference(src)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "full.pt")
        dcp_to_torch_save(ckdir, out)
        got = flatten(torch.load(out, weights_only=False), "", {})
        d = compare(want, got, "dcp_to_torch_save")
        if d:
            print(d)
            sys.exit(1)
    # Gloo on the loopback device: looking the host name up may hang in a chroot.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ctx = mp.get_context("spawn")
    for world in worlds:
        errs = ctx.SimpleQueue()
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "store")
            mp.start_processes(load_worker, args=(world, store, ckdir, src, errs), nprocs=world, start_method="spawn")
        if not errs.empty():
            print(errs.get())
            sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
