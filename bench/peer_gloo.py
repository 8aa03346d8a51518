#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""peer_gloo.py - bench/peer_bench.c's timing method for Gloo, through
torch.distributed (Debian's python3-torch): float32 sum,
WARMUP calls, then ITERS calls each after a barrier and timed alone, per
rank the median, the slowest rank's median printed; all_reduce runs in
place (torch has no out-of-place form), on zeros while timed. Results are checked
exactly (small-integer inputs). A call from Python costs the interpreter's
and the binding's overhead too (a few us per call): compare small sizes
with that in mind. Gloo in PyTorch 1.13 has no reduce_scatter: that
collective prints nothing.

usage: peer_gloo.py NRANKS COLL MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
output: "gloo COLL BYTES MEDIAN_US" per size (bench/peers.sh reads it)
"""
import datetime
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import tt_common  # noqa: E402


def inputs(rank, n):
    return (torch.arange(n, dtype=torch.int64) % 7 + (rank + 1)).to(torch.float32)


def rank_main(rank, n, outdir, coll, minb, maxb, factor, iters, warmup):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=n, timeout=datetime.timedelta(seconds=120))
    rows = []
    b = minb
    while b <= maxb:
        whole = coll in ("allreduce", "broadcast")
        m = b // 4 if whole else b // 4 // n          # elements per block
        if m == 0:          # fewer elements than ranks: no whole block at this size
            b *= factor
            continue
        if coll == "allreduce":
            # in place (all_reduce has no other form) on zeros, which stay
            # exact call after call; the checked call below starts from inputs
            out = torch.zeros(m)
            want = sum(inputs(p, m) for p in range(n))

            def call():
                dist.all_reduce(out)
        elif coll == "broadcast":
            src = inputs(0, m)
            out = torch.empty(m)
            want = src

            def call():
                if rank == 0:
                    out.copy_(src)
                dist.broadcast(out, 0)
        elif coll == "allgather":
            src = inputs(rank, m)
            outs = [torch.empty(m) for _ in range(n)]
            want = torch.cat([inputs(p, m) for p in range(n)])
            out = None

            def call():
                dist.all_gather(outs, src)
        elif coll == "alltoall":
            src = inputs(rank, m * n)
            out = torch.empty(m * n)
            want = torch.cat([inputs(p, m * n)[rank * m:(rank + 1) * m] for p in range(n)])

            def call():
                dist.all_to_all_single(out, src)
        else:
            dist.destroy_process_group()
            return rows     # reduce_scatter: not in Gloo (PyTorch 1.13)
        for _ in range(warmup):
            call()
        t = []
        for _ in range(iters):
            dist.barrier()
            t0 = time.perf_counter()
            call()
            t.append((time.perf_counter() - t0) * 1e6)
        if coll == "allreduce":
            out.copy_(inputs(rank, m))
            dist.all_reduce(out)
        got = torch.cat(outs) if coll == "allgather" else out
        bad = torch.tensor([int((got != want).sum())], dtype=torch.int64)
        med = torch.tensor([statistics.median_high(t)], dtype=torch.float64)
        dist.all_reduce(bad)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        if int(bad):
            raise RuntimeError("gloo %s of %d bytes: %d wrong elements" % (coll, b, int(bad)))
        rows.append([m * 4 * (1 if whole else n), med.item()])
        b *= factor
    dist.destroy_process_group()
    return rows


def main():
    if len(sys.argv) != 8:
        print(__doc__, file=sys.stderr)
        return 2
    n = int(sys.argv[1])
    coll = sys.argv[2]
    minb, maxb, factor, iters, warmup = (int(x) for x in sys.argv[3:8])
    if n < 1 or minb < 4 or maxb < minb or factor < 2 or iters < 1 or warmup < 0:
        print("peer_gloo: bad arguments (NRANKS >= 1, 4 <= MIN <= MAX, FACTOR >= 2, ITERS >= 1)",
              file=sys.stderr)
        return 2
    results, outdir, codes = tt_common.spawn_ranks(
        rank_main, n, 1800, (coll, minb, maxb, factor, iters, warmup))
    shutil.rmtree(outdir, ignore_errors=True)
    if codes is None or any(codes) or 0 not in results or results[0]["error"]:
        print("peer_gloo: failed: codes %s %s" % (codes, [results[r]["error"] for r in results]),
              file=sys.stderr)
        return 1
    for b, us in results[0]["checks"]:
        print("gloo %s %d %.3f" % (coll, b, us))
    return 0


if __name__ == "__main__":
    sys.exit(main())
