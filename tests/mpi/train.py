#!/usr/bin/python3
"""A small data-parallel training loop over MPI, for checking libstragglar_mpi.so end to end.

Every rank trains the same 2-layer MLP (256 -> 512 ReLU -> 256, float64) on its own synthetic
shard (seeded by rank) against a fixed random teacher network; the gradients are summed with
comm.Allreduce, as a data-parallel framework would. Each step makes four Allreduce calls, to
exercise several paths of the preload:

  int64    [samples, clipped]         out of place, 2 elements (fewer elements than ranks)
  float64  layer-1 weight gradient    out of place, 1 MiB
  float64  the other gradients        MPI.IN_PLACE, ~1 MiB
  float32  per-output squared error   out of place, 1 KiB (the loss metric)

Rank 0 writes one float64 .npy file: the final parameters (W1, b1, W2, b2, flattened in that
order), then the global per-output loss of every step, then the global [samples, clipped] counts of
every step. The same file with and without the preload (compared byte for byte) means every
Allreduce returned the same bits. All ranks must also end with identical parameters.

usage: mpirun -np 4 /usr/bin/python3 tests/mpi/train.py OUT.npy [--steps 50] [--straggler-ms 20]
"""

import argparse
import hashlib
import sys
import time

import numpy as np
from mpi4py import MPI

INPUTS, HIDDEN, OUTPUTS = 256, 512, 256
BATCH = 32  # samples per rank per step
SHARD = 512  # samples per rank

# Floating-point addition is not associative, so a plain float64 sum depends on the order in which
# the ranks' buffers are combined (OpenMPI's algorithm vs StragglAR's schedule), and "identical
# with and without the preload" would be a meaningless check (unquantized, a forced-StragglAR run
# differs from a native one in about half of the output values). So each local gradient is
# quantized before the Allreduce to k * 2^-24 with |k| <= 2^34 (i.e. |value| <= 2^10): every
# partial sum of n such values is j * 2^-24 with |j| <= n * 2^34 < 2^53 (for n < 2^19 ranks),
# which float64 represents exactly. Every addition is then exact, exact addition is associative,
# and every reduction order yields the same bits: the exact sum. -0.0 becomes +0.0, since a
# schedule that starts from a zeroed accumulator would otherwise turn an all-(-0.0) sum into +0.0.
GRID64 = 2.0**-24
BOUND64 = 2.0**10


def quantize64(values):
    """Rounds to the 2^-24 grid within +-2^10; returns the result and how many were clipped."""
    clipped = int(np.count_nonzero(np.abs(values) > BOUND64))
    quantized = np.round(np.clip(values, -BOUND64, BOUND64) / GRID64) * GRID64
    return quantized + 0.0, clipped  # + 0.0 turns -0.0 into +0.0


def quantize32(values, ranks):
    """The same for float32 (24-bit significand): multiples of 2^-8 whose sum over all ranks stays
    below 2^24 units, so every partial sum is exact."""
    grid = 2.0**-8
    bound = ((2**24 - 1) // ranks) * grid
    quantized = np.round(np.clip(values, -bound, bound) / grid) * grid
    return (quantized + 0.0).astype(np.float32)


def straggle(args, comm):
    """The last rank arrives late at every collective, as a persistently slow rank would."""
    if args.straggler_ms > 0 and comm.Get_rank() == comm.Get_size() - 1:
        time.sleep(args.straggler_ms / 1000.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="rank 0 writes the final parameters here (.npy)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument(
        "--straggler-ms",
        type=float,
        default=0.0,
        help="the last rank sleeps this long before each Allreduce",
    )
    args = parser.parse_args()
    if args.steps < 1 or args.straggler_ms < 0:
        parser.error("--steps must be >= 1 and --straggler-ms >= 0")

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()

    # The teacher and the initial student are the same on every rank; the data is per rank.
    teacher = np.random.default_rng(7)
    t_w1 = teacher.standard_normal((INPUTS, HIDDEN)) / np.sqrt(INPUTS)
    t_w2 = teacher.standard_normal((HIDDEN, OUTPUTS)) / np.sqrt(HIDDEN)
    init = np.random.default_rng(1234)
    w1 = init.standard_normal((INPUTS, HIDDEN)) / np.sqrt(INPUTS)
    b1 = np.zeros(HIDDEN)
    w2 = init.standard_normal((HIDDEN, OUTPUTS)) / np.sqrt(HIDDEN)
    b2 = np.zeros(OUTPUTS)
    data = np.random.default_rng(1000 + rank)
    shard_x = data.standard_normal((SHARD, INPUTS))
    shard_y = np.maximum(shard_x @ t_w1, 0) @ t_w2 + 0.01 * data.standard_normal((SHARD, OUTPUTS))

    w1_sum = np.empty(INPUTS * HIDDEN)
    counts_sum = np.empty(2, dtype=np.int64)
    loss_sum = np.empty(OUTPUTS, dtype=np.float32)
    losses, counts = [], []
    for step in range(args.steps):
        start = (step * BATCH) % SHARD
        x, y = shard_x[start : start + BATCH], shard_y[start : start + BATCH]

        # Forward and backward; gradients are sums over the local batch (the global mean comes
        # after the Allreduce, from the global sample count).
        pre = x @ w1 + b1
        h = np.maximum(pre, 0)
        err = h @ w2 + b2 - y
        g_out = 2 * err / OUTPUTS  # of the per-element mean squared error
        g_w2 = h.T @ g_out
        g_b2 = g_out.sum(axis=0)
        g_pre = (g_out @ w2.T) * (pre > 0)
        g_w1 = x.T @ g_pre
        g_b1 = g_pre.sum(axis=0)

        q_w1, clipped_w1 = quantize64(g_w1.ravel())
        bucket, clipped_rest = quantize64(np.concatenate([g_b1, g_w2.ravel(), g_b2]))

        local_counts = np.array([BATCH, clipped_w1 + clipped_rest], dtype=np.int64)
        straggle(args, comm)
        comm.Allreduce(local_counts, counts_sum, op=MPI.SUM)
        straggle(args, comm)
        comm.Allreduce(q_w1, w1_sum, op=MPI.SUM)
        straggle(args, comm)
        comm.Allreduce(MPI.IN_PLACE, bucket, op=MPI.SUM)
        straggle(args, comm)
        comm.Allreduce(quantize32((err**2).sum(axis=0), ranks), loss_sum, op=MPI.SUM)

        samples = counts_sum[0]
        losses.append(loss_sum.astype(np.float64))
        counts.append(counts_sum.astype(np.float64))
        scale = args.lr / samples
        w1 -= scale * w1_sum.reshape(INPUTS, HIDDEN)
        b1 -= scale * bucket[:HIDDEN]
        w2 -= scale * bucket[HIDDEN : HIDDEN + HIDDEN * OUTPUTS].reshape(HIDDEN, OUTPUTS)
        b2 -= scale * bucket[HIDDEN + HIDDEN * OUTPUTS :]
        if rank == 0 and (step == 0 or step == args.steps - 1):
            print(
                f"step {step}: loss {loss_sum.sum() / (samples * OUTPUTS):.6f}, "
                f"clipped {counts_sum[1]}",
                flush=True,
            )

    result = np.concatenate([w1.ravel(), b1, w2.ravel(), b2] + losses + counts)
    digest = hashlib.sha256(result.tobytes()).hexdigest()
    # Data parallelism keeps one model: a rank that got different sums has diverged.
    digests = comm.gather(digest, root=0)
    if rank == 0:
        if len(set(digests)) != 1:
            print(f"train.py: ranks ended with different parameters: {digests}", file=sys.stderr)
            comm.Abort(1)
        np.save(args.out, result)
        with open(args.out, "rb") as f:
            print(f"sha256 {hashlib.sha256(f.read()).hexdigest()}  {args.out}", flush=True)


if __name__ == "__main__":
    main()
