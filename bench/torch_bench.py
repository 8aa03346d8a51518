#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""torch_bench.py - torch.distributed over ibcoll against Gloo, in the same
processes: two process groups over the same ranks (the default one
"ibcoll", a second one "gloo"), timed alternately (which backend goes first
swaps every round), median over the rounds. Needs the torch binding built
(PYTHONPATH=<build>/bindings/torch/pkg; bench/torch_bench.sh sets it).

usage: torch_bench.py allreduce NRANKS [ROUNDS]  all_reduce float32, 8 B..64 MiB x 4
       torch_bench.py latency NRANKS [ROUNDS]    8 B all_reduce: the C API and the binding
                                                 timed in C++ on the same communicator,
                                                 then from Python, and gloo
       torch_bench.py ddp NRANKS [ROUNDS [B T]]  DDP step of a small GPT (tests/torch/tiny_gpt.py,
                                                 C=128 L=4: 0.83 M parameters), B x T tokens
                                                 per rank (default 8 x 64)

A time is the slowest rank's, per call (or per step). Output: one line per
size or case; times in microseconds (ms for ddp).
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

SIZES = [8 << (2 * k) for k in range(12)] + [64 << 20]   # 8 B .. 32 MiB x 4, then 64 MiB


def setup(rank, n, outdir):
    import ibcoll_torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("ibcoll", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=n, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=120))
    return {"ibcoll": dist.group.WORLD, "gloo": gloo}


def slowest(dt, gloo):
    t = torch.tensor([dt], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def timed(fn, iters, pg, gloo):
    dist.barrier(group=pg)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return slowest((time.perf_counter() - t0) / iters, gloo)


def bench_allreduce(rank, n, outdir, rounds):
    pgs = setup(rank, n, outdir)
    out = []
    for size in SIZES:
        t = torch.zeros(size // 4)
        times = {"ibcoll": [], "gloo": []}
        iters = {}
        for name, pg in pgs.items():
            # warm-up (connections, the tuner's probe), then as many calls as
            # fit in about 50 ms (10 to 2000), the same count on every rank
            for _ in range(2):
                dist.all_reduce(t, group=pg)
            one = timed(lambda: dist.all_reduce(t, group=pg), 5, pg, pgs["gloo"])
            iters[name] = max(10, min(2000, int(0.05 / one)))
        for r in range(rounds):
            order = ["ibcoll", "gloo"] if r % 2 == 0 else ["gloo", "ibcoll"]
            for name in order:
                pg = pgs[name]
                for _ in range(3):      # threads awake after the other backend's turn
                    dist.all_reduce(t, group=pg)
                times[name].append(timed(lambda: dist.all_reduce(t, group=pg), iters[name], pg,
                                         pgs["gloo"]))
        out.append([size, statistics.median(times["ibcoll"]) * 1e6,
                    statistics.median(times["gloo"]) * 1e6, iters["ibcoll"], iters["gloo"]])
    dist.destroy_process_group()
    return out


def bench_latency(rank, n, outdir, rounds):
    import ibcoll_torch
    pgs = setup(rank, n, outdir)
    t = torch.zeros(2)
    ib, gl = pgs["ibcoll"], pgs["gloo"]
    iters = 2000

    def py_loop(fn, pg):
        return lambda: timed(fn, iters, pg, gl)

    def cxx_loop(helper):
        def run():
            dist.barrier(group=ib)
            return slowest(helper(ib, t, iters), gl)
        return run

    cases = {
        "C API: ibc_iallreduce + ibc_wait, C++ loop": cxx_loop(ibcoll_torch._C._time_c_api),
        "binding: allreduce() + Work::wait(), C++ loop": cxx_loop(ibcoll_torch._C._time_binding),
        "Python: group.allreduce([t]).wait(), ibcoll": py_loop(lambda: ib.allreduce([t]).wait(), ib),
        "Python: dist.all_reduce(t), ibcoll": py_loop(lambda: dist.all_reduce(t), ib),
        "Python: dist.all_reduce(t), gloo": py_loop(lambda: dist.all_reduce(t, group=gl), gl),
    }
    times = {k: [] for k in cases}
    for k, fn in cases.items():          # warm-up
        fn()
    for r in range(rounds):
        keys = list(cases) if r % 2 == 0 else list(reversed(list(cases)))
        for k in keys:
            times[k].append(cases[k]())
    dist.destroy_process_group()
    return [[k, statistics.median(v) * 1e6, min(v) * 1e6] for k, v in times.items()]


def bench_ddp(rank, n, outdir, rounds, B=8, T=64):
    from torch.nn.parallel import DistributedDataParallel as DDP
    import tiny_gpt
    pgs = setup(rank, n, outdir)
    tokens, desc = tiny_gpt.corpus()
    models = {}
    for name, pg in pgs.items():
        torch.manual_seed(1)
        m = tiny_gpt.TinyGPT(T=64, C=128, L=4, NH=4)
        ddp = DDP(m, process_group=pg)
        models[name] = (ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-4))
    nparams = sum(p.numel() for p in models["ibcoll"][0].parameters())
    step = [0]

    def train_step(name):
        ddp, opt = models[name]
        x, y = tiny_gpt.batch(tokens, 3, step[0], rank, n, B, T)
        step[0] += 1
        loss = ddp(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times = {"ibcoll": [], "gloo": []}
    for name in models:
        for _ in range(2):
            train_step(name)
    for r in range(rounds):
        order = ["ibcoll", "gloo"] if r % 2 == 0 else ["gloo", "ibcoll"]
        for name in order:
            times[name].append(timed(lambda: train_step(name), 5, pgs[name], pgs["gloo"]))
    dist.destroy_process_group()
    return [[nparams, B, T, statistics.median(times["ibcoll"]) * 1e3,
             statistics.median(times["gloo"]) * 1e3]]


def main():
    what, n = sys.argv[1], int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else {"allreduce": 5, "latency": 7,
                                                          "ddp": 7}[what]
    fn = {"allreduce": bench_allreduce, "latency": bench_latency, "ddp": bench_ddp}[what]
    extra = tuple(int(x) for x in sys.argv[4:6]) if what == "ddp" else ()
    results, outdir, codes = tt_common.spawn_ranks(fn, n, 1800, (rounds,) + extra)
    shutil.rmtree(outdir, ignore_errors=True)
    if codes is None or any(codes) or 0 not in results or results[0]["error"]:
        print("torch_bench: failed: codes %s %s" % (codes, [results[r]["error"] for r in results]),
              file=sys.stderr)
        return 1
    rows = results[0]["checks"]
    if what == "allreduce":
        print("# all_reduce float32, %d ranks, median of %d alternating rounds (slowest rank); "
              "calls per round: about 50 ms' worth, 10 to 2000" % (n, rounds))
        print("%12s %12s %12s %8s %8s %8s" % ("bytes", "ibcoll_us", "gloo_us", "ratio",
                                           "calls_ib", "calls_gl"))
        for size, a, b, ia, ig in rows:
            print("%12d %12.1f %12.1f %8.2f %8d %8d" % (size, a, b, a / b, ia, ig))
    elif what == "latency":
        print("# 8 B all_reduce, %d ranks, 2000 calls x %d alternating rounds: median (min) us"
              % (n, rounds))
        for k, med, mn in rows:
            print("%-48s %8.2f (%6.2f)" % (k, med, mn))
    else:
        nparams, B, T, a, b = rows[0]
        print("# DDP step, tiny GPT %d parameters (%.1f MB of fp32 gradients), B=%d T=%d per "
              "rank, %d ranks, 1 thread per rank, median of %d alternating rounds of 5 steps"
              % (nparams, nparams * 4 / 1e6, B, T, n, rounds))
        print("ibcoll %.1f ms  gloo %.1f ms  ratio %.2f" % (a, b, a / b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
