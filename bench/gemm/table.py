#!/usr/bin/env python3
"""bench/gemm/table.py — turns bench/gemm/run.sh's raw lines into markdown.

    python3 bench/gemm/table.py bench/gemm/work/results.jsonl [--threads T]

Per configuration and shape: the median over rounds of each round's median
call (GFLOP/s). The machine: CPU model and flags, the best fp32 FMA peak
(widest vector unit) and DRAM read bandwidth of the probes run before and
after, load averages, and how busy the rest of the machine kept the cores
while each configuration ran (median over rounds). For M <= 8 the weights
dominate the traffic: weight bytes / time is shown against the read
bandwidth."""
import argparse
import json
import statistics
from collections import defaultdict


def cpu_info():
    model, flags = "?", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni"]
    return model, [f for f in wanted if f in flags]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rows = [json.loads(l) for l in open(args.results) if l.strip()]
    gf = defaultdict(list)  # (label, m, n, k) -> [gflops per round]
    gbps = defaultdict(list)
    backend, others = {}, defaultdict(list)
    fma, read, loads = defaultdict(float), defaultdict(float), []
    labels = []
    for r in rows:
        if r.get("probe") == "fma":
            key = (r["threads"], r.get("isa", "avx2"))
            fma[key] = max(fma[key], r["gflops"])
        elif r.get("probe") == "read":
            read[r["threads"]] = max(read[r["threads"]], r["gbytes_per_s"])
        elif "loadavg_before" in r or "loadavg_after" in r:
            loads.append(r.get("loadavg_before") or r.get("loadavg_after"))
        elif "others_busy_cores" in r:
            others[r["label"]].append(r["others_busy_cores"])
        elif "gflops" in r:
            if r["label"] not in labels:
                labels.append(r["label"])
            key = (r["label"], r["m"], r["n"], r["k"])
            gf[key].append(r["gflops"])
            gbps[key].append(r["weight_gbps"])
            backend[r["label"]] = r["backend"]
    model, flags = cpu_info()
    T = args.threads
    print(f"CPU: {model}; flags: {' '.join(flags)}; load average before / after: "
          + " / ".join(" ".join(l.split()[:3]) for l in loads))
    print()
    for (t, isa), v in sorted(fma.items()):
        print(f"- fp32 FMA peak, {isa}, {t} thread{'s' if t > 1 else ''}: {v:.0f} GFLOP/s")
    for t, v in sorted(read.items()):
        print(f"- DRAM read (1 GiB stream), {t} thread{'s' if t > 1 else ''}: {v:.1f} GB/s")
    print()
    print("| configuration | backend as the process named it | others busy (cores, median) |")
    print("|---|---|---|")
    for lab in labels:
        o = statistics.median(others[lab]) if others[lab] else float("nan")
        print(f"| {lab} | {backend[lab]} | {o:.2f} |")
    print()
    shapes = sorted({(m, n, k) for (_, m, n, k) in gf}, key=lambda s: (s[1], s[2], s[0]))
    print(f"GFLOP/s, {T} threads, median of {max(len(v) for v in gf.values())} rounds "
          "(best of each row in bold):")
    print()
    print("| M | N | K | " + " | ".join(labels) + " |")
    print("|---:|---:|---:|" + "---:|" * len(labels))
    for (m, n, k) in shapes:
        vals = [statistics.median(gf[(l, m, n, k)]) if gf[(l, m, n, k)] else None
                for l in labels]
        best = max(v for v in vals if v is not None)
        cells = [("**%.1f**" % v if v == best else "%.1f" % v) if v is not None else "-"
                 for v in vals]
        print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")
    bw = read.get(T)
    peak = fma.get((T, "avx512f")) or fma.get((T, "avx2"))
    print()
    if bw:
        print(f"Decode rows (M <= 8): weight bytes / time in GB/s and % of the {T}-thread "
              f"DRAM read bandwidth ({bw:.1f} GB/s; weights rotate through > 256 MiB):")
        print()
        print("| M | N | K | " + " | ".join(labels) + " |")
        print("|---:|---:|---:|" + "---:|" * len(labels))
        for (m, n, k) in shapes:
            if m > 8:
                continue
            cells = []
            for l in labels:
                v = gbps.get((l, m, n, k))
                cells.append("%.1f (%.0f%%)" % (statistics.median(v), 100 * statistics.median(v) / bw)
                             if v else "-")
            print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")
    if peak:
        print()
        print(f"% of the {T}-thread fp32 FMA peak ({peak:.0f} GFLOP/s), M >= 128:")
        print()
        print("| M | N | K | " + " | ".join(labels) + " |")
        print("|---:|---:|---:|" + "---:|" * len(labels))
        for (m, n, k) in shapes:
            if m < 128:
                continue
            cells = ["%.0f%%" % (100 * statistics.median(gf[(l, m, n, k)]) / peak)
                     if gf[(l, m, n, k)] else "-" for l in labels]
            print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
