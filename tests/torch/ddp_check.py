#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ddp_check.py - DDP over ibcoll against DDP over Gloo, same seed, same data.

usage: ddp_check.py LAUNCHER:NRANKS...   (LAUNCHER spawn or mpirun; e.g. spawn:2 mpirun:4)
       ddp_check.py --rank-env OUTDIR NRANKS STEPS   (one rank under mpirun; internal)

In every rank, the default group is "ibcoll" and a second group over the
same ranks is "gloo". The tiny GPT of tiny_gpt.py is built from one seed
and trained STEPS AdamW steps with DDP (0.1 MB buckets, so each step makes
several all-reduces) once over each group, on the same batches. TAP checks
per configuration: the first step's losses are bitwise equal (nothing was
reduced yet); every later loss of ibcoll's run is within fp32 rounding of
Gloo's (the two backends sum the gradients in different orders; the bound
is 1e-5 relative, and the largest difference seen is printed); at the end
the parameters are bitwise equal across the ranks, checked by all-gathering
a SHA-256 of them and by MAX == MIN all-reduces, both through ibcoll; the
loss went down. Every run is bounded (180 s).
"""
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import tiny_gpt  # noqa: E402
import tt_common  # noqa: E402

STEPS = 8
B, T = 4, 32
RTOL = 1e-5
TIMEOUT_S = 180


def params_flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train(pg, tokens, rank, n, steps):
    torch.manual_seed(1234)
    model = tiny_gpt.TinyGPT(T=T)
    ddp = DDP(model, process_group=pg, bucket_cap_mb=0.1)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    losses = []
    for s in range(steps):
        x, y = tiny_gpt.batch(tokens, 1, s, rank, n, B, T)
        loss = ddp(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def same_across_ranks(flat, n):
    """(hashes equal, max == min) over the ranks, both through ibcoll"""
    digest = hashlib.sha256(flat.numpy().tobytes()).digest()
    h = torch.frombuffer(bytearray(digest), dtype=torch.int64).clone()
    hs = [torch.zeros(4, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(hs, h)
    mx, mn = flat.clone(), flat.clone()
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN)
    return (all(torch.equal(x, hs[0]) for x in hs), bool(torch.equal(mx, mn)),
            digest.hex()[:16])


def train_rank(rank, n, outdir, steps):
    import ibcoll_torch  # noqa: F401 - registers the backend
    torch.set_num_threads(1)
    dist.init_process_group("ibcoll", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=n, timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    tokens, desc = tiny_gpt.corpus()
    res = {"data": desc, "transport": dist.group.WORLD.transport}
    for name, pg in (("ibcoll", dist.group.WORLD), ("gloo", gloo)):
        t0 = time.time()
        model, losses = train(pg, tokens, rank, n, steps)
        eq_hash, eq_mm, digest = same_across_ranks(params_flat(model), n)
        res[name] = {"losses": losses, "hash_equal": eq_hash, "maxmin_equal": eq_mm,
                     "hash": digest, "seconds": time.time() - t0}
    dist.destroy_process_group()
    return res


def rank_under_mpirun(outdir, n, steps):
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    res = {"rank": rank, "checks": None, "error": None}
    try:
        res["checks"] = train_rank(rank, n, outdir, steps)
    except BaseException:  # noqa: B902 - reported to the parent
        import traceback
        res["error"] = traceback.format_exc()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(res, f)
    return 0 if res["error"] is None else 1


def run_mpirun(n, steps):
    outdir = tempfile.mkdtemp(prefix="ibct.")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
           "-np", str(n)]
    for v in ("PYTHONPATH", "OMP_NUM_THREADS", "IBC_TRANSPORT", "IBC_DEBUG"):
        if v in os.environ:
            cmd += ["-x", v]
    cmd += [sys.executable, os.path.abspath(__file__), "--rank-env", outdir, str(n), str(steps)]
    try:
        p = subprocess.run(cmd, timeout=TIMEOUT_S, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        codes = [p.returncode]
        out = p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        codes = None
        out = (e.stdout or b"").decode(errors="replace")
    results = {}
    for r in range(n):
        path = os.path.join(outdir, "rank%d.json" % r)
        if os.path.exists(path):
            with open(path) as f:
                results[r] = json.load(f)
    return results, outdir, codes, out


def evaluate(tap, prefix, results, n, codes, out=""):
    ok_ranks = [r for r in range(n) if r in results and results[r]["error"] is None]
    errors = ["rank %d:\n%s" % (r, results[r]["error"]) for r in results if results[r]["error"]]
    clean = len(ok_ranks) == n and codes is not None and all(c == 0 for c in codes)
    tap.ok(clean, "%s every rank trained over both backends and exited 0" % prefix,
           [] if clean else errors + ["timed out after %d s" % TIMEOUT_S if codes is None else
                                      "exit codes %s" % codes] + ([out[-2000:]] if out else []))
    if len(ok_ranks) != n:
        return
    res = {r: results[r]["checks"] for r in range(n)}
    first = [res[r]["ibcoll"]["losses"][0] == res[r]["gloo"]["losses"][0] for r in range(n)]
    tap.ok(all(first), "%s step 0 losses bitwise equal, ibcoll and gloo" % prefix,
           ["rank %d: %r vs %r" % (r, res[r]["ibcoll"]["losses"][0], res[r]["gloo"]["losses"][0])
            for r in range(n) if not first[r]])
    worst = 0.0
    bad = []
    for r in range(n):
        for s, (a, b) in enumerate(zip(res[r]["ibcoll"]["losses"], res[r]["gloo"]["losses"])):
            rel = abs(a - b) / abs(b)
            worst = max(worst, rel)
            if rel > RTOL:
                bad.append("rank %d step %d: ibcoll %.9g gloo %.9g (rel %.2e)" % (r, s, a, b, rel))
    tap.ok(not bad, "%s per-step losses of ibcoll within %.0e of gloo's (largest %.2e)"
           % (prefix, RTOL, worst), bad[:6])
    for name in ("ibcoll", "gloo"):
        he = all(res[r][name]["hash_equal"] and res[r][name]["maxmin_equal"] for r in range(n))
        tap.ok(he, "%s DDP over %s: parameters bitwise equal across ranks (sha256 %s, all-gathered; "
               "MAX == MIN)" % (prefix, name, res[0][name]["hash"]),
               ["rank %d: hash %s maxmin %s" % (r, res[r][name]["hash_equal"],
                                                res[r][name]["maxmin_equal"]) for r in range(n)])
    l0 = res[0]["ibcoll"]["losses"]
    tap.ok(l0[-1] < l0[0], "%s the loss went down (%.4f -> %.4f over %d steps)"
           % (prefix, l0[0], l0[-1], len(l0)))
    print("# %s data: %s; transport %s; rank 0 seconds: ibcoll %.1f, gloo %.1f; final params "
          "%s across backends" % (prefix, res[0]["data"], res[0]["transport"],
                                  res[0]["ibcoll"]["seconds"], res[0]["gloo"]["seconds"],
                                  "equal" if res[0]["ibcoll"]["hash"] == res[0]["gloo"]["hash"]
                                  else "differ in low bits"))


def main():
    if sys.argv[1] == "--rank-env":
        return rank_under_mpirun(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    tap = tt_common.Tap()
    for conf in sys.argv[1:]:
        launcher, n = conf.split(":")
        n = int(n)
        prefix = "[DDP %d ranks, %s]" % (n, launcher)
        t0 = time.time()
        if launcher == "mpirun" and not shutil.which("mpirun"):
            tap.skip(prefix, "mpirun not installed")
            continue
        if launcher == "mpirun":
            results, outdir, codes, out = run_mpirun(n, STEPS)
        else:
            results, outdir, codes = tt_common.spawn_ranks(train_rank, n, TIMEOUT_S, (STEPS,))
            out = ""
        evaluate(tap, prefix, results, n, codes, out)
        print("# %s %.1f s" % (prefix, time.time() - t0))
        shutil.rmtree(outdir, ignore_errors=True)
    print("1..%d" % tap.n)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
