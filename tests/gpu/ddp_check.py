#!/usr/bin/env python3
"""A small PyTorch DDP training run whose final parameters must not depend on libstragglar.so.

Run under torchrun, e.g. (scripts/gpu-check.sh does this without and with the preload):

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 tests/gpu/ddp_check.py \
        --out DIR --one-gpu

Fixed seeds, deterministic kernels, --steps SGD steps of an MLP whose gradients (about 1 MiB,
above the preload's default STRAGGLAR_MIN_BYTES) DDP averages with ncclAllReduce. Each rank
writes DIR/rank<r>.sha256 (the SHA-256 of every final parameter, in name order), DIR/rank<r>.json
(losses, versions, which NCCL library is mapped, whether libstragglar.so is) and DIR/rank<r>.txt.
With 2 ranks every element of the reduction is a single addition a + b, which rounds the same in
any order, so any correct AllReduce gives the same bits: identical hashes with and without the
preload are the pass criterion.

--one-gpu (or fewer GPUs than ranks) gives each process its own NCCL_HOSTID and makes NCCL use
sockets over loopback (../shared/docs/nccl.md, "Several ranks on one GPU"); it must be set
before NCCL initializes in this process, which is why it happens before torch is imported.
Exit status: 0 done, 77 no torch / no CUDA device / no NCCL backend, 1 otherwise.
"""

import argparse
import hashlib
import json
import os
import sys


def shared_gpu_environment(rank):
    for name, value in {
        "NCCL_HOSTID": f"stragglar-ddp-{rank}",
        "NCCL_NET": "Socket",
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
    }.items():
        os.environ.setdefault(name, value)


def mapped_libraries():
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "/" in line})
    except OSError:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for rank<r>.{sha256,json,txt}")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--one-gpu", action="store_true",
                        help="all ranks on device 0, each its own NCCL_HOSTID")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.one_gpu:
        shared_gpu_environment(rank)
    # Deterministic cuBLAS; must be set before cuBLAS initializes.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
    except ImportError as error:
        print(f"SKIP: import torch failed: {error}")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    if not dist.is_nccl_available():
        print("SKIP: this torch has no NCCL backend")
        return 77
    devices = torch.cuda.device_count()
    if not args.one_gpu and devices < world:
        shared_gpu_environment(rank)
    device = torch.device("cuda", 0 if args.one_gpu else local_rank % devices)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False

    dist.init_process_group("nccl")
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.Tanh(),
        torch.nn.Linear(512, 256), torch.nn.Tanh(),
        torch.nn.Linear(256, 16)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1000 + rank)  # different data per rank
    losses = []
    for _ in range(args.steps):
        x = torch.randn(64, 256, generator=generator).to(device)
        y = torch.randn(64, 16, generator=generator).to(device)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    torch.cuda.synchronize()

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        flat = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        digest.update(bytes(flat.tolist()))
    libraries = mapped_libraries()
    preload = [path for path in libraries if "libstragglar" in path]
    nccl = [path for path in libraries if "libnccl" in path]
    report = {
        "rank": rank,
        "world_size": world,
        "sha256": digest.hexdigest(),
        "losses": losses,
        "torch": torch.__version__,
        "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
        "device": torch.cuda.get_device_name(device),
        "one_gpu": args.one_gpu or devices < world,
        "preload_loaded": bool(preload),
        "preload": preload,
        # Empty: NCCL is linked into torch statically and LD_PRELOAD cannot interpose it.
        "nccl_libraries": nccl,
        "environment": {k: v for k, v in os.environ.items()
                        if k.startswith(("STRAGGLAR_", "NCCL_", "LD_PRELOAD"))},
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.sha256"), "w") as f:
        f.write(digest.hexdigest() + "\n")
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(args.out, f"rank{rank}.txt"), "w") as f:
        f.write(f"rank {rank}: sha256 {digest.hexdigest()}, final loss {losses[-1]:.6f}\n")
        f.write(f"preload loaded: {'yes' if preload else 'no'} {' '.join(preload)}\n")
        f.write(f"NCCL library: {' '.join(nccl) or 'none mapped (linked statically?)'}\n")
    print(f"rank {rank}: sha256 {digest.hexdigest()}, final loss {losses[-1]:.6f}, "
          f"preload {'loaded' if preload else 'not loaded'}, NCCL {nccl or 'static'}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
