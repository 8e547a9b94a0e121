#!/usr/bin/env python3
"""bench/gemm/table.py — turns bench/gemm/run.sh's raw lines into markdown.

    python3 bench/gemm/table.py bench/gemm/work/results.jsonl [--threads T]

Per configuration and shape: the median over rounds of each round's median
call (GFLOP/s). The machine: CPU model and flags, the best fp32 FMA peak
(widest vector unit) of the probes run before and after; the DRAM read
bandwidth as the median of the read probes (one before, one per round,
one after: on a shared VM a single reading moves by +-25%, and the
median of readings interleaved with the rows is the bandwidth those rows
ran beside; each reading is the best of stream_read's 5 passes); load
averages, and how busy the rest of the machine kept the cores
while each configuration ran (median over rounds). For M <= 8 the weights
dominate the traffic: weight bytes / time is shown against the read
bandwidth.

The first tables put side by side what issue 12 compares: tfmc's packed
fp32 path (`packed`, kernels as the runtime picks them), its bf16 and int8
paths (`bf16`, `int8`), OpenBLAS with its best core type on this machine (of the
`openblas-*` configurations, the one with the highest geometric mean
GFLOP/s over all shapes; named in the header) and ONNX Runtime's MatMul
(`ort`), with % of the widest FMA peak the probe measured; for M = 1 and 8
the weight-streaming GB/s against the measured DRAM read bandwidth; and
the issue's GEMM targets met or missed. The full per-configuration tables
follow."""
import argparse
import json
import math
import statistics
from collections import defaultdict

ISA_DESC = {"avx512f": "AVX-512, 512-bit FMA", "avx2": "AVX2, 256-bit FMA"}


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
    fma, reads, loads = defaultdict(float), defaultdict(list), []
    labels = []
    for r in rows:
        if r.get("probe") == "fma":
            key = (r["threads"], r.get("isa", "avx2"))
            fma[key] = max(fma[key], r["gflops"])
        elif r.get("probe") == "read":
            reads[r["threads"]].append(r["gbytes_per_s"])
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
    read = {t: statistics.median(v) for t, v in reads.items()}
    for t, v in sorted(reads.items()):
        spread = (f"median of {len(v)} readings, {min(v):.1f}-{max(v):.1f}"
                  if len(v) > 1 else "one reading")
        print(f"- DRAM read (1 GiB stream), {t} thread{'s' if t > 1 else ''}: "
              f"{read[t]:.1f} GB/s ({spread})")
    print()
    print("| configuration | backend as the process named it | others busy (cores, median) |")
    print("|---|---|---|")
    for lab in labels:
        o = statistics.median(others[lab]) if others[lab] else float("nan")
        print(f"| {lab} | {backend[lab]} | {o:.2f} |")
    print()
    shapes = sorted({(m, n, k) for (_, m, n, k) in gf}, key=lambda s: (s[1], s[2], s[0]))
    bw = read.get(T)
    peak_isa = "avx512f" if fma.get((T, "avx512f")) else "avx2"
    peak = fma.get((T, peak_isa))
    bw_max = max(reads[T]) if reads.get(T) else None
    side_by_side(gf, gbps, labels, shapes, T, peak, peak_isa, bw, bw_max, backend)
    print()
    print("All configurations:")
    print()
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
    print()
    if bw:
        print(f"Decode rows (M <= 8): weight bytes / time in GB/s and % of the {T}-thread "
              f"DRAM read bandwidth ({bw:.1f} GB/s, the median probe reading; weights rotate "
              "through > 256 MiB):")
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
        print(f"% of the {T}-thread fp32 FMA peak ({peak:.0f} GFLOP/s, {ISA_DESC[peak_isa]}), "
              "M >= 128:")
        print()
        print("| M | N | K | " + " | ".join(labels) + " |")
        print("|---:|---:|---:|" + "---:|" * len(labels))
        for (m, n, k) in shapes:
            if m < 128:
                continue
            cells = ["%.0f%%" % (100 * statistics.median(gf[(l, m, n, k)]) / peak)
                     if gf[(l, m, n, k)] else "-" for l in labels]
            print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")


def med(d, key):
    return statistics.median(d[key]) if d.get(key) else None


def side_by_side(gf, gbps, labels, shapes, T, peak, peak_isa, bw, bw_max, backend):
    """The issue-12 view: packed, bf16, OpenBLAS at its best core type, ORT;
    then the targets (tfmc >= 1.1x OpenBLAS and >= 80% of peak for M >= 128;
    fp32 decode >= 85% of DRAM read bandwidth; bf16 decode >= 1.8x fp32)."""
    blas = [l for l in labels if l.startswith("openblas-")]

    def geomean(l):
        v = [med(gf, (l, m, n, k)) for (m, n, k) in shapes]
        v = [x for x in v if x]
        return math.exp(sum(math.log(x) for x in v) / len(v)) if v else 0
    best = max(blas, key=geomean) if blas else None
    cols = [c for c in ("packed", "bf16", "int8", best, "ort") if c and c in labels]
    if "packed" not in cols:
        return
    name = {"packed": "tfmc packed fp32", "bf16": "tfmc packed bf16", "int8": "tfmc packed int8",
            "ort": "ORT MatMul"}
    if best:
        core = backend.get(best, "").rsplit(" ", 1)[-1]  # "openblas core X": what it loaded
        name[best] = ("OpenBLAS %s (best core type here)" % core if best != "openblas-default" else
                      "OpenBLAS %s (its own pick, best here)" % core)
    peak_s = f"{peak:.0f} GFLOP/s, {ISA_DESC[peak_isa]}" if peak else "not measured"
    print(f"Side by side, {T} threads: GFLOP/s (% of the {T}-thread fp32 FMA peak, {peak_s}); "
          "OpenBLAS's core types ranked by geometric mean GFLOP/s over the shapes: "
          + ", ".join("%s %.1f" % (l[len("openblas-"):], geomean(l))
                      for l in sorted(blas, key=geomean, reverse=True)) + ".")
    print()
    ratio_cols = [c for c in (best, "ort") if c in cols]
    print("| M | N | K | " + " | ".join(name[c] for c in cols) + " | "
          + " | ".join("packed / " + ("OpenBLAS" if c == best else "ORT") for c in ratio_cols) + " |")
    print("|---:|---:|---:|" + "---:|" * (len(cols) + len(ratio_cols)))
    for (m, n, k) in shapes:
        cells = []
        for c in cols:
            v = med(gf, (c, m, n, k))
            cells.append("-" if v is None else "%.1f (%.0f%%)" % (v, 100 * v / peak) if peak
                         else "%.1f" % v)
        p = med(gf, ("packed", m, n, k))
        for c in ratio_cols:
            v = med(gf, (c, m, n, k))
            cells.append("%.2fx" % (p / v) if p and v else "-")
        print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")
    print()
    if bw:
        print(f"Decode (M = 1 and 8): weight bytes streamed per second, GB/s (% of the {T}-thread "
              f"DRAM read bandwidth, {bw:.1f} GB/s, the median probe reading; bf16 streams half "
              "the bytes, int8 about a "
              "quarter plus its scales); the weights rotate through > 256 MiB of copies, so "
              "they come from DRAM:")
        print()
        low = [c for c in ("bf16", "int8") if c in cols]
        print("| M | N | K | " + " | ".join(name[c] for c in cols) + " | "
              + " | ".join("%s speed-up over fp32" % c for c in low) + " |")
        print("|---:|---:|---:|" + "---:|" * (len(cols) + len(low)))
        for (m, n, k) in shapes:
            if m not in (1, 8):
                continue
            cells = []
            for c in cols:
                v = med(gbps, (c, m, n, k))
                cells.append("-" if v is None else "%.1f (%.0f%%)" % (v, 100 * v / bw))
            p = med(gf, ("packed", m, n, k))
            for c in low:
                b = med(gf, (c, m, n, k))
                cells.append("%.2fx" % (b / p) if p and b else "-")
            print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |")
        print()
    # the GEMM targets, shape by shape
    print("Targets (issue 12), shape by shape:")
    print()
    big = [s for s in shapes if s[0] >= 128]
    dec = [s for s in shapes if s[0] in (1, 8)]

    def verdict(desc, ok_list):
        ok_list = [(s, v) for s, v in ok_list if v is not None]
        if not ok_list:
            print(f"- {desc}: not measured")
            return
        miss = [s for s, v in ok_list if not v]
        print(f"- {desc}: met at {len(ok_list) - len(miss)} of {len(ok_list)} shapes"
              + ("" if not miss else "; missed at " + ", ".join("%dx%dx%d" % s for s in miss)))
    if best:
        verdict("tfmc packed >= 1.1x OpenBLAS (%s), M >= 128" % best[len("openblas-"):],
                [(s, None if not (med(gf, ("packed",) + s) and med(gf, (best,) + s)) else
                  med(gf, ("packed",) + s) >= 1.1 * med(gf, (best,) + s)) for s in big])
    if peak:
        verdict("tfmc packed >= 80% of the FMA peak, M >= 128",
                [(s, None if not med(gf, ("packed",) + s) else med(gf, ("packed",) + s) >= 0.8 * peak)
                 for s in big])
    for what, b in (("the median reading", bw), ("the highest reading", bw_max)):
        if b:
            verdict("tfmc packed fp32 decode >= 85%% of DRAM read bandwidth (%s, %.1f GB/s), "
                    "M = 1 and 8" % (what, b),
                    [(s, None if not med(gbps, ("packed",) + s)
                      else med(gbps, ("packed",) + s) >= 0.85 * b) for s in dec])
    for c, bound in (("bf16", 1.8), ("int8", 3.0)):
        if c in cols:
            verdict("tfmc %s decode >= %.1fx the fp32 decode speed, M = 1 and 8" % (c, bound),
                    [(s, None if not (med(gf, ("packed",) + s) and med(gf, (c,) + s)) else
                      med(gf, (c,) + s) >= bound * med(gf, ("packed",) + s)) for s in dec])


if __name__ == "__main__":
    main()
