# SPDX-License-Identifier: MIT
"""tt_common.py - shared helpers of the torch backend tests (tests/torch).

spawn_ranks() runs a function on N local ranks (torch.multiprocessing,
start method "spawn") with a hard timeout for the whole group; each rank
returns a list of (group, ok, count, detail) check results, which the
parent merges (a check passes only if it passed on every rank) and prints
as TAP lines. Nothing here waits without a bound.
"""
import json
import os
import sys
import tempfile
import time
import traceback

import torch.multiprocessing as mp


class Checks:
    """Per-rank results, aggregated by group name in first-seen order."""

    def __init__(self):
        self.groups = {}

    def add(self, group, ok, detail=""):
        g = self.groups.setdefault(group, {"ok": True, "n": 0, "detail": []})
        g["n"] += 1
        if not ok:
            g["ok"] = False
            if len(g["detail"]) < 3:
                g["detail"].append(detail)

    def equal(self, group, what, got, want):
        """exact equality, dtype and shape included"""
        ok = (got.dtype == want.dtype and got.shape == want.shape and
              (got.numel() == 0 or bool((got == want).all())))
        detail = ""
        if not ok:
            detail = "%s: got %s %s %s, want %s %s %s" % (
                what, got.dtype, tuple(got.shape), got.flatten()[:6].tolist(),
                want.dtype, tuple(want.shape), want.flatten()[:6].tolist())
        self.add(group, ok, detail)

    def raises(self, group, what, fn, text):
        """fn() must raise RuntimeError whose message contains text"""
        try:
            fn()
        except RuntimeError as e:
            ok = text in str(e)
            self.add(group, ok, "" if ok else "%s: wrong error: %s" % (what, e))
            return
        self.add(group, False, "%s: no error raised (wanted '%s')" % (what, text))

    def as_list(self):
        return [(k, v["ok"], v["n"], v["detail"]) for k, v in self.groups.items()]


def _child(rank, fn, nranks, outdir, args):
    res = {"rank": rank, "checks": [], "error": None}
    try:
        res["checks"] = fn(rank, nranks, outdir, *args)
    except BaseException:  # noqa: B902 - reported to the parent, then exit 1
        res["error"] = traceback.format_exc()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(res, f)
    os._exit(0 if res["error"] is None else 1)


def spawn_ranks(fn, nranks, timeout_s, args=()):
    """run fn(rank, nranks, tmpdir, *args) on nranks processes; returns
    (per-rank results dict, tmpdir, exit codes or None on timeout)"""
    outdir = tempfile.mkdtemp(prefix="ibct.")
    ctx = mp.start_processes(_child, args=(fn, nranks, outdir, args), nprocs=nranks,
                             join=False, start_method="spawn")
    deadline = time.time() + timeout_s
    procs = ctx.processes
    while time.time() < deadline and any(p.is_alive() for p in procs):
        time.sleep(0.1)
    timed_out = any(p.is_alive() for p in procs)
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(5)
    results = {}
    for r in range(nranks):
        path = os.path.join(outdir, "rank%d.json" % r)
        if os.path.exists(path):
            with open(path) as f:
                results[r] = json.load(f)
    codes = None if timed_out else [p.exitcode for p in procs]
    return results, outdir, codes


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, diag=()):
        """one TAP line; the diagnostics are printed only when it fails"""
        self.n += 1
        if not cond:
            self.failed += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, desc))
        for d in (() if cond else diag):
            for line in str(d).splitlines():
                print("# " + line)
        sys.stdout.flush()

    def skip(self, desc, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, desc, why))
        sys.stdout.flush()

    def merged(self, results, nranks, prefix, codes):
        """one TAP line per check group, merged over the ranks"""
        errors = [(r, results[r]["error"]) for r in results if results[r]["error"]]
        missing = [r for r in range(nranks) if r not in results]
        order = []
        merged = {}
        for r in sorted(results):
            for name, ok, n, detail in results[r]["checks"]:
                if name not in merged:
                    order.append(name)
                    merged[name] = [True, 0, []]
                m = merged[name]
                m[0] = m[0] and ok
                m[1] += n
                m[2] += ["rank %d: %s" % (r, d) for d in detail]
        for name in order:
            ok, n, detail = merged[name]
            self.ok(ok, "%s %s (%d checks)" % (prefix, name, n), detail[:6])
        self.ok(not errors and not missing and codes is not None and all(c == 0 for c in codes),
                "%s every rank finished cleanly" % prefix,
                ["rank %d raised:\n%s" % e for e in errors] +
                (["no result from ranks %s" % missing] if missing else []) +
                (["timed out"] if codes is None else ["exit codes %s" % codes]))
