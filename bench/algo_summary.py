#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""algo_summary.py - Markdown tables from bench/algo_campaign.sh output:
8-byte latency and 64 MiB bus bandwidth per algorithm and protocol (median
over every run of a configuration), and the tuner's pick against the best
measured configuration at each size, per run.

usage: bench/algo_summary.py OUTDIR
"""
import glob
import os
import re
import statistics
import sys

ALGOS = ["ring", "tree", "rd", "rabenseifner"]


def parse(path):
    run = {"path": path, "rows": [], "summary": [], "load": None}
    in_summary = False
    for line in open(path):
        m = re.match(r"# algo_timing: (\w+), (\d+) ranks over (\w+),.*load average ([\d.]+)", line)
        if m:
            run["coll"], run["n"], run["tp"], run["load"] = m.group(1), int(m.group(2)), m.group(3), float(m.group(4))
            continue
        m = re.match(r"# model: simple alpha ([\d.]+) us, ll alpha ([\d.]+) us, beta ([\d.]+)", line)
        if m:
            run["alpha"], run["alpha_ll"], run["beta"] = (float(m.group(i)) for i in (1, 2, 3))
            continue
        if line.startswith("# summary"):
            in_summary = True
            continue
        if line.startswith("#") or not line.strip() or line.split()[0] == "bytes":
            continue
        f = line.split()
        if in_summary:
            run["summary"].append({"bytes": int(f[0]), "best": f[1], "best_us": float(f[2]),
                                   "pick": f[3], "pick_us": float(f[4]),
                                   "slow": float(f[5].rstrip("%")), "auto_us": float(f[6])})
        else:
            run["rows"].append({"bytes": int(f[0]), "algo": f[1], "proto": f[2],
                                "time": float(f[4]), "busbw": float(f[5]), "min": float(f[6])})
    return run


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    out = sys.argv[1]
    runs = []
    for p in sorted(glob.glob(os.path.join(out, "*.txt"))):
        base = os.path.basename(p)
        if not re.match(r"(tune|eval\d*)-\w+-\d+\.txt$", base):
            continue
        r = parse(p)
        if "tp" not in r:       # unfinished run: no header yet
            continue
        r["kind"] = "tune" if base.startswith("tune") else "eval"
        r["name"] = base[:-4]
        runs.append(r)
    confs = sorted({(r["tp"], r["n"]) for r in runs}, key=lambda c: (c[0] != "shm", c[1]))

    print("Runs (load average at the start of each):\n")
    print("| run | ranks | transport | load | model alpha simple / ll, us (probe; evaluation runs: the file's base rows) |")
    print("| --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['name']} | {r['n']} | {r['tp']} | {fmt(r['load'])} | "
              f"{fmt(r.get('alpha'), 2)} / {fmt(r.get('alpha_ll'), 2)} |")

    def med(tp, n, algo, proto, size, key):
        vals = [row[key] for r in runs if (r["tp"], r["n"]) == (tp, n)
                for row in r["rows"] if row["bytes"] == size and row["algo"] == algo and row["proto"] == proto]
        return (statistics.median(vals), len(vals)) if vals else (None, 0)

    print("\n8-byte all-reduce latency, us (median over all runs of the configuration; "
          "simple / ll):\n")
    print("| ranks | transport | " + " | ".join(ALGOS) + " | runs |")
    print("| --- | --- |" + " --- |" * (len(ALGOS) + 1))
    for tp, n in confs:
        cells = []
        cnt = 0
        for a in ALGOS:
            s, c1 = med(tp, n, a, "simple", 8, "time")
            l, _ = med(tp, n, a, "ll", 8, "time")
            cnt = max(cnt, c1)
            cells.append(f"{fmt(s, 2)} / {fmt(l, 2)}")
        print(f"| {n} | {tp} | " + " | ".join(cells) + f" | {cnt} |")

    size = 64 << 20
    print("\n64 MiB all-reduce bus bandwidth, GB/s (median over all runs; busbw = algbw * 2(n-1)/n):\n")
    print("| ranks | transport | " + " | ".join(ALGOS) + " |")
    print("| --- | --- |" + " --- |" * len(ALGOS))
    for tp, n in confs:
        cells = [fmt(med(tp, n, a, "simple", size, "busbw")[0], 3) for a in ALGOS]
        print(f"| {n} | {tp} | " + " | ".join(cells) + " |")

    for kind, title in (("tune", "probe-only model (tuning runs)"),
                        ("eval", "model from the tuning file (evaluation runs)")):
        sel = [r for r in runs if r["kind"] == kind]
        if not sel:
            continue
        sizes = sorted({s["bytes"] for r in sel for s in r["summary"]})
        print(f"\nTuner's pick vs the best measured configuration, {title}: slowdown of the "
              "picked configuration, % (0 = the pick was the best):\n")
        print("| run | " + " | ".join(str(s) for s in sizes) + " | within 10% |")
        print("| --- |" + " --- |" * (len(sizes) + 1))
        for r in sel:
            by = {s["bytes"]: s for s in r["summary"]}
            cells = []
            ok = 0
            for s in sizes:
                if s in by:
                    cells.append(f"{by[s]['slow']:.0f} ({by[s]['pick']})" if by[s]["slow"] > 10
                                 else f"{by[s]['slow']:.0f}")
                    ok += by[s]["slow"] <= 10
                else:
                    cells.append("-")
            print(f"| {r['name']} | " + " | ".join(cells) + f" | {ok}/{len(by)} |")
        print(f"\nThe same with the fastest repetition instead of the median (less sensitive to "
              f"the other jobs on the machine):\n")
        print("| run | " + " | ".join(str(s) for s in sizes) + " | within 10% |")
        print("| --- |" + " --- |" * (len(sizes) + 1))
        for r in sel:
            cells = []
            ok = 0
            tot = 0
            for s in sizes:
                rows = [x for x in r["rows"] if x["bytes"] == s]
                forced = [x for x in rows if not x["algo"].startswith("auto:")]
                auto = [x for x in rows if x["algo"].startswith("auto:")]
                if not forced or not auto:
                    cells.append("-")
                    continue
                best = min(forced, key=lambda x: x["min"])
                pa, pp = auto[0]["algo"][5:], auto[0]["proto"]
                pick = [x for x in forced if x["algo"] == pa and x["proto"] == pp] or \
                       [x for x in forced if x["algo"] == pa and x["proto"] == "simple"]
                slow = (pick[0]["min"] / best["min"] - 1) * 100 if pick else float("nan")
                tot += 1
                ok += slow <= 10
                cells.append(f"{slow:.0f} ({pa}/{pp})" if slow > 10 else f"{slow:.0f}")
            print(f"| {r['name']} | " + " | ".join(cells) + f" | {ok}/{tot} |")

    reproducibility(runs, confs)


def reproducibility(runs, confs):
    """The tuner against an oracle that knows the best measured configuration
    of another pass: how often is the best configuration of pass j within
    10 % of the best in pass i (i != j, same configuration and size)? Where
    that is below 100 %, the best configuration itself is not reproducible
    from pass to pass, and no pick can be within 10 % in every pass."""
    sel = [r for r in runs if r["kind"] == "eval"]
    if not sel:
        return
    print("\nReproducibility: the tuner's pick within 10 % of the best (cells), against the best "
          "configuration of another pass of the same configuration priced in this pass "
          "(pairs of passes):\n")
    print("| ranks | transport | tuner | best of another pass |")
    print("| --- | --- | --- | --- |")
    tot = [0, 0, 0, 0]
    for tp, n in confs:
        rs = [r for r in sel if (r["tp"], r["n"]) == (tp, n)]
        t_ok = t_n = o_ok = o_n = 0
        for size in sorted({x["bytes"] for r in rs for x in r["rows"]}):
            times = []
            for r in rs:
                times.append({(x["algo"], x["proto"]): x["time"] for x in r["rows"]
                              if x["bytes"] == size and not x["algo"].startswith("auto:")})
                by = [x for x in r["summary"] if x["bytes"] == size]
                if by:
                    t_n += 1
                    t_ok += by[0]["slow"] <= 10
            for i, ti in enumerate(times):
                for j, tj in enumerate(times):
                    if i == j or not ti or not tj:
                        continue
                    best_j = min(tj, key=tj.get)
                    if best_j in ti:
                        o_n += 1
                        o_ok += ti[best_j] <= 1.10 * min(ti.values())
        print(f"| {n} | {tp} | {t_ok}/{t_n} | {o_ok}/{o_n} |")
        tot = [tot[0] + t_ok, tot[1] + t_n, tot[2] + o_ok, tot[3] + o_n]
    if tot[1] and tot[3]:
        print(f"| all | | {tot[0]}/{tot[1]} ({100 * tot[0] / tot[1]:.1f} %) | "
              f"{tot[2]}/{tot[3]} ({100 * tot[2] / tot[3]:.1f} %) |")


if __name__ == "__main__":
    main()
