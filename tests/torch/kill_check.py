#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""kill_check.py - a rank dies (SIGKILL) or stops (SIGSTOP) in the middle of
DDP over ibcoll: every survivor raises, naming that rank, within the
process group's timeout, and exits non-zero by itself; nothing hangs.

usage: kill_check.py NRANKS:TRANSPORT:SIGNAL...   (e.g. 3:shm:KILL 3:tcp:STOP)
       kill_check.py --rank R NRANKS OUTDIR SIGNAL   (one rank; internal)

Each rank is a plain Python process (so that an uncaught exception takes
the normal way out: interpreter teardown, the process group's destructor)
started by the parent, which bounds the whole run (TIMEOUT_S + 60 s) and
kills leftovers. Rank 1 (the victim) trains the tiny GPT with DDP and, in
step 3, signals itself from a gradient hook, i.e. during backward while
DDP's bucket all-reduces are in flight; it first writes the time. The
process group timeout (TIMEOUT_S) becomes IBC_TIMEOUT_MS.
"""
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TIMEOUT_S = 20
VICTIM = 1
KILL_STEP = 3


def rank_main(rank, n, outdir, signame):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import ibcoll_torch  # noqa: F401
    import tiny_gpt

    torch.set_num_threads(1)
    dist.init_process_group("ibcoll", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    tokens, _ = tiny_gpt.corpus(1 << 18)
    torch.manual_seed(1)
    model = tiny_gpt.TinyGPT()
    ddp = DDP(model, bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)

    def suicide(grad):
        with open(os.path.join(outdir, "victim_time"), "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), getattr(signal, "SIG" + signame))
        return grad

    try:
        for s in range(KILL_STEP + 20):
            x, y = tiny_gpt.batch(tokens, 2, s, rank, n, 4, 32)
            loss = ddp(x, y)
            if rank == VICTIM and s == KILL_STEP:
                # a parameter whose gradient comes in the middle of backward
                list(model.blocks[0].parameters())[0].register_hook(suicide)
            opt.zero_grad()
            loss.backward()
            opt.step()
        raise AssertionError("training finished although rank %d died" % VICTIM)
    except RuntimeError as e:
        with open(os.path.join(outdir, "err%d.json" % rank), "w") as f:
            json.dump({"t": time.time(), "msg": str(e), "step": s}, f)
        raise


def run(n, transport, signame, tap):
    prefix = "[%d ranks, %s, victim SIG%s]" % (n, transport, signame)
    outdir = tempfile.mkdtemp(prefix="ibct.")
    env = dict(os.environ, IBC_TRANSPORT=transport)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r),
                               str(n), outdir, signame], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(outdir, "log%d" % r), "w"))
             for r in range(n)]
    deadline = time.time() + TIMEOUT_S + 60
    survivors = [r for r in range(n) if r != VICTIM]
    while time.time() < deadline and any(procs[r].poll() is None for r in survivors):
        time.sleep(0.1)
    hung = [r for r in survivors if procs[r].poll() is None]
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    t_kill = None
    if os.path.exists(os.path.join(outdir, "victim_time")):
        with open(os.path.join(outdir, "victim_time")) as f:
            t_kill = float(f.read())
    tap.ok(t_kill is not None, "%s rank %d signalled itself during backward of step %d"
           % (prefix, VICTIM, KILL_STEP), [open(os.path.join(outdir, "log%d" % VICTIM)).read()[-1500:]])
    tap.ok(not hung, "%s every survivor ended by itself (no hang)" % prefix,
           ["ranks %s still running after %d s" % (hung, TIMEOUT_S + 60)])
    for r in survivors:
        path = os.path.join(outdir, "err%d.json" % r)
        log = open(os.path.join(outdir, "log%d" % r)).read()[-2000:]
        if not os.path.exists(path):
            tap.ok(False, "%s rank %d raised RuntimeError" % (prefix, r), [log])
            continue
        with open(path) as f:
            err = json.load(f)
        named = ("rank %d " % VICTIM) in err["msg"] or ("rank %d:" % VICTIM) in err["msg"]
        tap.ok(named, "%s rank %d raised RuntimeError naming rank %d" % (prefix, r, VICTIM),
               [err["msg"]])
        dt = err["t"] - t_kill if t_kill else float("inf")
        tap.ok(dt <= TIMEOUT_S, "%s rank %d raised %.1f s after the signal (timeout %d s)"
               % (prefix, r, dt, TIMEOUT_S))
        tap.ok(procs[r].returncode not in (0, None), "%s rank %d exited non-zero (%s)"
               % (prefix, r, procs[r].returncode))
        print("# %s rank %d: %s" % (prefix, r, err["msg"].splitlines()[0][:400]))
    shutil.rmtree(outdir, ignore_errors=True)


def main():
    if sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return 0
    import tt_common
    tap = tt_common.Tap()
    for conf in sys.argv[1:]:
        n, transport, signame = conf.split(":")
        run(int(n), transport, signame, tap)
    print("1..%d" % tap.n)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
