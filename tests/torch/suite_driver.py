#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""suite_driver.py - run PyTorch's own distributed test suite
(torch/testing/_internal/distributed/distributed_test.py, shipped with
torch) against a backend, the way upstream's test_distributed_spawn.py does
for Gloo (which Debian does not ship).

usage: suite_driver.py [--backend ibcoll|gloo] [--world-size N] [-k SUBSTR]...
                       [--json FILE] [--tap] [--ibcoll-as-gloo]

Every test runs in WORLD_SIZE fresh processes (the suite's own
MultiProcessTestCase spawning). For a backend that is not built in, the
driver registers it (import ibcoll_torch) and adds it to the suite's
"plugin", "ddp" and "subgroup" feature sets before the suite is imported,
since the suite's skip decorators read those sets at class definition.
Prints one line per test (PASS, SKIP with the reason, FAIL/ERROR with the
first line of the error), then totals; --json writes them all; --tap
prints TAP instead (a failed test is "not ok"; skips are "ok # SKIP").

--ibcoll-as-gloo runs the suite as for Gloo (BACKEND=gloo, so the tests
that the suite restricts to Gloo run too, which are most of Gloo's passes)
while every "gloo" process group that init_process_group and new_group make
is an ibcoll one: the suite's name lookup of ProcessGroupGloo in
torch.distributed.distributed_c10d is pointed at ProcessGroupIbcoll, whose
profiler events are then named "gloo:<op>" as the tests expect. Only a
measurement device: tests that check the group's class then fail for that
reason, and get_backend() says gloo.

Two stand-ins, because Debian's torch lacks them: `expecttest` (a module
the suite's common_utils imports; only its TestCase base is used here),
and the driver itself. The per-test bound is the suite's
DISTRIBUTED_TESTS_DEFAULT_TIMEOUT (set to 120 s here unless given).
"""
import os
import sys
import time
import types
import unittest

if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        _et = types.ModuleType("expecttest")
        _et.ACCEPT = False

        class _ExpectTestCase(unittest.TestCase):
            pass

        _et.TestCase = _ExpectTestCase
        sys.modules["expecttest"] = _et


def _opt(name, default):
    """an option of our command line, read before the suite parses argv"""
    if name in sys.argv:
        i = sys.argv.index(name)
        if i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return default


# the environment the suite reads at import, inherited by its processes
if "--ibcoll-as-gloo" in sys.argv:
    os.environ["IBCT_SUITE_AS_GLOO"] = "1"
    os.environ["BACKEND"] = "gloo"
AS_GLOO = os.environ.get("IBCT_SUITE_AS_GLOO") == "1"
os.environ["BACKEND"] = os.environ.get("BACKEND") or _opt("--backend", "ibcoll")
os.environ["WORLD_SIZE"] = os.environ.get("WORLD_SIZE") or _opt("--world-size", "2")
os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")
BACKEND = os.environ["BACKEND"]

_argv = sys.argv
sys.argv = sys.argv[:1]          # common_utils parses sys.argv when imported
import torch  # noqa: E402,F401
import torch.testing._internal.common_distributed as _cd  # noqa: E402

if BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
    import ibcoll_torch  # noqa: F401 - registers "ibcoll"
    for _feature in ("plugin", "ddp", "subgroup"):
        _cd.DistTestCases.backend_feature[_feature].add(BACKEND)
if AS_GLOO:
    import ibcoll_torch
    import torch.distributed.distributed_c10d as _c10d

    def _ibcoll_in_gloos_place(store, rank, size, timeout=_c10d.default_pg_timeout):
        return ibcoll_torch.ProcessGroupIbcoll(store, rank, size, timeout,
                                               profiling_prefix="gloo")

    _RealGloo = _c10d.ProcessGroupGloo
    _real_wrapper = _c10d._create_process_group_wrapper

    def _wrapper_with_real_gloo(*args, **kwargs):
        # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps a group in a checker whose
        # helper must be Gloo's own class
        _c10d.ProcessGroupGloo = _RealGloo
        try:
            return _real_wrapper(*args, **kwargs)
        finally:
            _c10d.ProcessGroupGloo = _ibcoll_in_gloos_place

    _c10d.ProcessGroupGloo = _ibcoll_in_gloos_place
    _c10d._create_process_group_wrapper = _wrapper_with_real_gloo

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

sys.argv = _argv


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Result(unittest.TestResult):
    def __init__(self, tap):
        super().__init__()
        self.rows = []
        self.tap = tap
        self.t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.time()

    def _row(self, test, status, why=""):
        name = test.id().split(".")[-1]
        why = " ".join(str(why).split())
        row = {"test": name, "status": status, "why": why, "seconds": time.time() - self.t0}
        self.rows.append(row)
        n = len(self.rows)
        if self.tap:
            if status == "PASS":
                print("ok %d - %s" % (n, name))
            elif status == "SKIP":
                print("ok %d - %s # SKIP %s" % (n, name, why[:200]))
            else:
                print("not ok %d - %s (%s)" % (n, name, status))
                print("# " + why[:600])
        else:
            print("%-5s %-70s %6.1f s %s" % (status, name, row["seconds"], why[:300]))
        sys.stdout.flush()

    def addSuccess(self, test):
        self._row(test, "PASS")

    def addSkip(self, test, reason):
        self._row(test, "SKIP", reason)

    def _err_line(self, test, err):
        lines = self._exc_info_to_string(err, test).strip().splitlines()
        # the error text, not the traceback: the last lines that are not frames
        tail = [ln for ln in lines if ln and not ln.startswith(" ")][-3:]
        return " | ".join(tail)

    def addFailure(self, test, err):
        self._row(test, "FAIL", self._err_line(test, err))

    def addError(self, test, err):
        self._row(test, "ERROR", self._err_line(test, err))

    def addExpectedFailure(self, test, err):
        self._row(test, "XFAIL", self._err_line(test, err))

    def addUnexpectedSuccess(self, test):
        self._row(test, "XPASS")


def main():
    import argparse
    import json
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default=BACKEND)
    p.add_argument("--world-size", default=os.environ["WORLD_SIZE"])
    p.add_argument("-k", action="append", default=[], help="run tests whose name has SUBSTR")
    p.add_argument("--json")
    p.add_argument("--tap", action="store_true")
    p.add_argument("--ibcoll-as-gloo", action="store_true")
    a = p.parse_args()
    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    if a.k:
        names = [n for n in names if any(k in n for k in a.k)]
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    res = _Result(a.tap)
    t0 = time.time()
    if not a.tap:
        print("# %s, %s ranks, %d tests, torch %s" % ("ibcoll as gloo" if AS_GLOO else BACKEND,
                                                      a.world_size, len(names),
                                                      torch.__version__))
    suite.run(res)
    totals = {}
    for r in res.rows:
        totals[r["status"]] = totals.get(r["status"], 0) + 1
    summary = "%s at %s ranks: %d tests in %.0f s: %s" % (
        "ibcoll as gloo" if AS_GLOO else BACKEND, a.world_size, len(res.rows), time.time() - t0,
        ", ".join("%d %s" % (v, k) for k, v in sorted(totals.items())))
    if a.tap:
        print("1..%d" % len(res.rows))
    print("# " + summary)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "backend": BACKEND, "as_gloo": AS_GLOO,
                       "world_size": a.world_size,
                       "torch": torch.__version__, "tests": res.rows}, f, indent=1)
    bad = totals.get("FAIL", 0) + totals.get("ERROR", 0) + totals.get("XPASS", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
