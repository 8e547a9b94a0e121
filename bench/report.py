"""bench/report.py — turns bench.py's raw results (WORK/results.json) into
bench/RESULTS.md: summary and ratio tables, the issue's targets met or
missed and by how much, per-workload detail (GFLOP/s, % of the measured
peak, peak RSS, cross-check error, machine load before the run), the
machine ceilings, the PyTorch environment sweep, build times and the load
log. Also runnable alone:  /usr/bin/python3 bench/report.py WORK/results.json OUT.md

Invariants: a number is printed only when the run that produced it passed
its cross-check; a failed, skipped or mismatching run shows why instead.
"""

import json
import os
import re
import statistics
import sys

import workloads as wl

FW_ORDER = ["tfmc-jit", "tfmc-jit-bf16", "tfmc-jit-nopack", "tfmc-jit-O0", "tfmc-exe", "tfmc-c",
            "torch", "torch-tuned", "ort"]
FW_SHORT = {"tfmc-jit": "tfmc JIT", "tfmc-jit-bf16": "tfmc JIT bf16",
            "tfmc-jit-nopack": "tfmc JIT no-pack", "tfmc-jit-O0": "tfmc JIT -O0",
            "tfmc-exe": "tfmc exe", "tfmc-c": "tfmc C",
            "torch": "PyTorch", "torch-tuned": "PyTorch tuned", "ort": "ORT"}

# (issue, workload, what, framework, baseline, bound, needs): time ratio
# fw/baseline <= bound, or for "rss" peak RSS ratio; needs: a CPU flag the
# target is conditional on (None: always).
TARGETS = [
    (5, "bert_b1", "time", "tfmc-jit", "torch-tuned", 1.0, None),
    (5, "bert_b1", "time", "tfmc-jit", "torch", 0.25, None),
    (5, "gpt2_prefill", "time", "tfmc-jit", "torch-tuned", 1.0, None),
    (5, "anatomy_tiny", "time", "tfmc-jit", "ort", 0.5, None),
    (5, "bert_long", "rss", "tfmc-jit", "torch-lower", 0.6, None),
    (11, "bert_b1", "time", "tfmc-jit", "ort", 0.85, None),
    (11, "gpt2_prefill", "time", "tfmc-jit", "ort", 0.85, None),
    (11, "anatomy_tiny", "time", "tfmc-jit", "ort", 0.35, None),
    (11, "bert_long", "time", "tfmc-jit", "ort", 0.5, None),
    (12, "bert_b1", "time", "tfmc-jit", "ort", 0.8, None),
    (12, "gpt2_prefill", "time", "tfmc-jit", "ort", 0.8, None),
    (12, "bert_b1", "time", "tfmc-jit-bf16", "ort", 0.5, "avx512_bf16"),
]


ISA_DESC = {"avx512f": "AVX-512 (512-bit FMA)", "avx2": "AVX2 (256-bit FMA)"}


def all_timings(R):
    """Every {framework: result} table of the run: the forward workloads'
    and the generation workloads'."""
    return list(R["timing"].values()) + [D["timing"] for D in (R.get("decode") or {}).values()
                                         if D.get("timing")]


def ran_with(R, fw):
    """What row fw ran with: (threads, matmuls, BLAS core type, wait policy
    and environment), from what the processes reported about themselves
    where they did (PyTorch, ORT) and from the run's settings otherwise."""
    i = R["info"]
    t = i.get("threads", 2)
    gemm = i.get("tfmc_gemm") or "?"
    rs = [r for T in all_timings(R) for r in [T.get(fw)] if ok_result(r)]

    def seen(key):
        vals = sorted({str(r[key]) for r in rs if r.get(key) is not None})
        return "/".join(vals) if vals else "?"
    if fw.startswith("tfmc"):
        pool = "tfmc's own pool (atomic hand-off; workers spin up to 1 ms between jobs, then sleep on a condition variable)"
        ks = re.search(r"(\S+) kernels", gemm)
        kernels = "`%s` kernels" % ks.group(1) if ks else "kernels"
        cs = re.search(r"core (\w+)", gemm)
        blas = ("OpenBLAS %s (set by tfmc's runtime)" % cs.group(1) if "set by tfmc" in gemm else
                "OpenBLAS %s" % cs.group(1)) if cs else "no OpenBLAS (%s)" % gemm
        packed = ("fp32 weights packed once (`pack-weights`), `rt_linear_packed` with tfmc's %s "
                  "(chosen by cpuid)" % kernels)
        unpacked = "`rt_linear` per linear: %s sgemm, single-threaded calls split over tfmc's pool" % blas
        what = {"tfmc-jit-bf16": "bf16 weights packed once (`--weights-dtype bf16`), "
                                 "`rt_linear_packed_bf16` with tfmc's %s (vdpbf16ps where the CPU "
                                 "has AVX512_BF16)" % kernels,
                "tfmc-jit-nopack": "`--disable-pass=pack-weights`: " + unpacked,
                "tfmc-jit-O0": "`-O0`, no graph or loop passes, so no `pack-weights`: " + unpacked}.get(
                    fw, packed)
        core = blas if fw in ("tfmc-jit-nopack", "tfmc-jit-O0") else \
            "- (the packed linears call no BLAS)"
        return "%d (`--threads %d`)" % (t, t), what, core, pool + "; no environment variables"
    if fw in ("torch", "torch-tuned"):
        env = R.get("tuned_env", {}) if fw == "torch-tuned" else {}
        return ("torch %s, OpenBLAS %s" % (seen("torch_threads"), seen("blas_threads")),
                "OpenBLAS sgemm (addmm), eager ops on libgomp",
                seen("blas_core") + (" (`OPENBLAS_CORETYPE=%s`)" % env["OPENBLAS_CORETYPE"]
                                     if env.get("OPENBLAS_CORETYPE") else " (OpenBLAS's own pick)"),
                "OMP_WAIT_POLICY: %s; env: %s" % (seen("omp_wait_policy"), " ".join(
                    "`%s=%s`" % kv for kv in sorted(env.items())) or "none"))
    if fw == "ort":
        return ("intra-op %s, inter-op %s" % (seen("intra_op_threads"), seen("inter_op_threads")),
                "MLAS (ORT's own GEMM, weights prepacked at session creation)", "- (no BLAS)",
                "%s; no environment variables" % seen("allow_spinning"))
    return "?", "?", "?", "?"


def ok_result(r):
    return bool(r) and not r.get("error") and not r.get("skipped") and \
        (r.get("check") or {}).get("ok") and r.get("median_ms") is not None


def ms(x):
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


def mb(kb):
    return "-" if kb is None else "%.0f" % (kb / 1024.0)


def why(r):
    if not r:
        return "not run"
    if r.get("skipped"):
        return "skipped: " + r["skipped"]
    if r.get("error"):
        return "failed: " + r["error"]
    c = r.get("check") or {}
    if not c.get("ok"):
        return "output mismatch: " + c.get("message", "")
    return ""


DISTURBED = 0.25  # others' cores during a run above which its cell is marked


def cell(r):
    if not ok_result(r):
        return "n/a"
    return ms(r["median_ms"]) + (" *" if (r.get("others_cores") or 0) > DISTURBED else "")


def ratio(a, b, key="median_ms"):
    if not (ok_result(a) and ok_result(b)):
        return None
    if key == "rss_kb":
        return a["rss_kb"] / b["rss_kb"] if a.get("rss_kb") and b.get("rss_kb") else None
    return a[key] / b[key]


def write(R, path, workloads=None, decodes=None):
    if workloads is None:
        workloads = [w for w in wl.WORKLOADS if w.name in R["timing"]]
    if decodes is None:
        decodes = [w for w in wl.DECODE_WORKLOADS if w.name in (R.get("decode") or {})]
    L = []
    add = L.append
    i = R["info"]
    peak2 = peak1 = None
    peak_isa = "avx2"  # older probes printed no isa: 256-bit FMAs
    for e in R["ceilings"].get("fma") or []:
        if isinstance(e, dict):
            if e["threads"] == 2:
                peak2 = e["gflops"]
            if e["threads"] == 1:
                peak1 = e["gflops"]
            peak_isa = e.get("isa", peak_isa)
    peak_desc = ISA_DESC.get(peak_isa, peak_isa)
    threads = i.get("threads", 2)
    peak_t = peak2 if threads >= 2 else peak1

    add("# tfmc benchmark results")
    add("")
    add("Written by `bench/run.sh` (see `bench/README.md` for the method). "
        "Do not edit by hand; re-run the suite.")
    add("")
    add("| | |")
    add("|---|---|")
    add("| date | %s |" % i.get("date"))
    add("| CPU | %s, %d cores%s, %s; %s GB RAM; Linux %s |" % (
        i.get("cpu"), i.get("ncpu"), " (KVM guest)" if i.get("hypervisor") else "", i.get("isa"),
        i.get("mem_gb"), i.get("kernel")))
    add("| tfmc | commit %s%s, Release build; %d threads (`--threads %d`), no environment variables |" % (
        i.get("tfmc_commit"), " + %d uncommitted files" % i["tfmc_dirty_files"]
        if i.get("tfmc_dirty_files") else "", threads, threads))
    add("| PyTorch | %s (Debian python3-torch), eager fp32, `torch.set_num_threads(%d)`, "
        "`torch.inference_mode()`; BLAS: %s |" % (i.get("torch"), threads, i.get("openblas")))
    add("| ONNX Runtime | onnxruntime-node %s (CPU EP; node %s), graph optimisation `all`, "
        "%d intra-op threads, opset %d export |" % (i.get("onnxruntime_node"), i.get("node"), threads,
                                                     wl.OPSET))
    add("| C compiler | %s, emitted C built with `make CFLAGS=\"%s\"` (OpenBLAS loaded at run time) |" % (
        "; ".join(i.get("cc") or []), i.get("c_flags")))
    add("| LLVM | %s |" % i.get("llvm"))
    add("| tuned PyTorch env | `%s` (%s) |" % (
        " ".join("%s=%s" % kv for kv in sorted(R.get("tuned_env", {}).items())) or "(none)",
        ("wait policy and malloc fixed, `OPENBLAS_CORETYPE` from this run's BLAS probe"
         if (R.get("blas_probe") or {}).get("chosen") else "fixed") +
        ("; the sweep below is the evidence" if R.get("sweep") else "; no sweep in this run")))
    if i.get("scrubbed_env"):
        add("| removed from the caller's env | %s |" % ", ".join(i["scrubbed_env"]))
    add("| suite run time | %.1f min |" % (R.get("elapsed_s", 0) / 60))
    oth = sorted(r.get("others_cores") or 0 for T in all_timings(R) for r in T.values()
                 if ok_result(r))
    if oth:
        add("| others' load during timed runs | median %.2f cores, max %.2f; %d of %d runs "
            "above %.2f |" % (oth[len(oth) // 2], oth[-1], sum(1 for x in oth if x > DISTURBED),
                              len(oth), DISTURBED))
    busy = [p for p in R["phases"] if p["phase"].startswith("time ")]
    if busy:
        n_idle = sum(1 for p in busy if p["idle"])
        add("| machine load | %d of %d timed phases started on an idle machine (< %g busy core "
            "per core); busy cores before a timed phase: median %.2f, max %.2f (see the load log) |" % (
                n_idle, len(busy), (i.get("idle") or {}).get("threshold_per_core", 0.5), sorted(p["busy_cores"] for p in busy)[len(busy) // 2],
                max(p["busy_cores"] for p in busy)))
    add("")

    add("## What each row ran with")
    add("")
    add("| row | threads | matmuls | BLAS core type | wait policy, environment |")
    add("|---|---|---|---|---|")
    for fw in FW_ORDER:
        if any(fw in T for T in all_timings(R)):
            add("| %s | %s |" % (FW_SHORT[fw], " | ".join(x.replace("|", "/") for x in ran_with(R, fw))))
    add("")
    bp = R.get("blas_probe")
    if bp:
        add("The tuned PyTorch row's core type comes from this run's probe (`bench/blas_probe.py`: "
            "one bert-base layer's four linears through `torch.nn.functional.linear`, 128 tokens, "
            "`OMP_WAIT_POLICY=PASSIVE`, %d interleaved round%s; median ms per layer; `(unset)` is "
            "OpenBLAS's own pick, a control): %s. Chosen: **%s**." % (
                bp["rounds"], "s" if bp["rounds"] > 1 else "", "; ".join(
                    "%s %s" % (c, ("%.1f ms (%s kernels)" % (bp["median_layer_ms"][c], next(
                        (e["core"] for e in bp["runs"] if e["coretype"] == c and e.get("core")), "?")))
                        if c in bp.get("median_layer_ms", {}) else "failed: " + "; ".join(
                            e.get("error", "") for e in bp["runs"] if e["coretype"] == c)[:160])
                    for c in bp["candidates"] + ["(unset)"]), bp.get("chosen") or "none"))
        add("")

    if workloads:
        # ---- summary ----
        add("## Median time per forward (ms)")
        add("")
        add("Every workload runs in interleaved rounds (each round runs every row once, one "
            "process each: one warm-up run, then N timed runs); a cell is the median of the round "
            "medians, `runs` counts the timed runs over all rounds. "
            "`*`: other processes used more than %.2f cores on average while this one ran "
            "(see \"others during\" below)." % DISTURBED)
        add("")
        add("| workload | runs | " + " | ".join(FW_SHORT[f] for f in FW_ORDER) + " |")
        add("|---|---:|" + "---:|" * len(FW_ORDER))
        for w in workloads:
            T = R["timing"].get(w.name, {})
            counts = sorted({x.get("runs") for x in T.values() if ok_result(x)})
            add("| %s | %s | %s |" % (w.label, "/".join(str(c) for c in counts) or "-",
                                      " | ".join(cell(T.get(f)) for f in FW_ORDER)))
        add("")
        add("## Ratios (time / time; below 1 means tfmc is faster)")
        add("")
        cols = [("tfmc-jit", "torch"), ("tfmc-jit", "torch-tuned"), ("tfmc-jit", "ort"),
                ("tfmc-jit-bf16", "ort"), ("tfmc-jit-bf16", "tfmc-jit"), ("tfmc-jit", "tfmc-jit-nopack"),
                ("tfmc-exe", "torch-tuned"), ("tfmc-c", "torch-tuned"), ("tfmc-exe", "tfmc-jit"),
                ("tfmc-c", "tfmc-jit"), ("tfmc-jit", "tfmc-jit-O0")]
        add("| workload | " + " | ".join("%s / %s" % (FW_SHORT[a], FW_SHORT[b]) for a, b in cols) + " |")
        add("|---|" + "---:|" * len(cols))
        for w in workloads:
            T = R["timing"].get(w.name, {})
            cells = []
            for a, b in cols:
                r = ratio(T.get(a), T.get(b))
                cells.append("-" if r is None else "%.2fx" % r)
            add("| %s | %s |" % (w.label, " | ".join(cells)))
        add("")

        # ---- targets ----
        add("## Targets (issues 5, 11 and 12)")
        add("")

        add("| issue | target | measured | verdict |")
        add("|---:|---|---:|---|")
        for issue, wname, what, fw, base, bound, needs in TARGETS:
            W = wl.WORKLOAD_BY_NAME[wname]
            T = R["timing"].get(wname, {})
            if wname not in R["timing"]:
                continue
            if needs and needs not in (i.get("flags") or []):
                add("| %d | %s: %s time <= %.2fx %s | - | not applicable: the CPU has no %s |" % (
                    issue, W.label, FW_SHORT[fw], bound, FW_SHORT[base], needs.upper()))
                continue
            add_cell = "| %d " % issue
            if what == "time":
                desc = "%s: %s time <= %.2fx %s" % (W.label, FW_SHORT[fw], bound, FW_SHORT[base])
                r = ratio(T.get(fw), T.get(base))
            else:
                # the lower of PyTorch's two peak RSS values (the tuned env's malloc
                # settings may keep more memory; the target is against PyTorch at its best)
                cands = [T.get(x) for x in ("torch", "torch-tuned") if ok_result(T.get(x))]
                lower = min(cands, key=lambda x: x.get("rss_kb") or 1e30) if cands else None
                T = dict(T, **{"torch-lower": lower})
                desc = "%s: %s peak RSS <= %.2fx PyTorch's (the lower of its two runs)" % (
                    W.label, FW_SHORT[fw], bound)
                r = ratio(T.get(fw), T.get(base), "rss_kb")
            if r is None:
                missing = [x for x in (fw, base) if not ok_result(T.get(x))]
                FW_SHORT.setdefault("torch-lower", "PyTorch")
                add(add_cell + "| %s | - | not measured (%s: %s) |" % (
                    desc, ", ".join(missing), "; ".join(why(T.get(x)) for x in missing)))
                continue
            if r <= bound:
                verdict = "**met** (%.1f%% below the bound)" % ((1 - r / bound) * 100)
            elif what == "time":
                verdict = "**missed**: tfmc needs a %.3fx speed-up (%.1f%% less time)" % (
                    r / bound, (1 - bound / r) * 100)
            else:
                verdict = "**missed**: tfmc needs %.1f%% less memory" % ((1 - bound / r) * 100)
            if what == "time":
                a, b = T[fw], T[base]
                if a.get("min_ms") is not None and b.get("min_ms") is not None and \
                        a["min_ms"] <= bound * b["max_ms"] and bound * b["min_ms"] <= a["max_ms"]:
                    verdict += "; the min-max ranges overlap (a tie within this run's noise)"
            add(add_cell + "| %s | %.3fx | %s |" % (desc, r, verdict))
        add("")

        # ---- detail ----
        add("## Per workload")
        add("")
        add("GFLOP/s use `tfmc check`'s count (linear layers + attention, full score "
            "matrices also for causal attention) times the batch; %% of peak is against the "
            "measured %d-thread FMA peak (%s GFLOP/s, %s). Peak RSS is the whole process's "
            "(`/usr/bin/time`): runtime, weights, activations, and for the JIT the compiler. "
            "\"busy before\" is the number of busy cores measured just before the process "
            "started; \"others during\" is the CPU (in cores) that other processes on the "
            "machine used while it ran, the disturbance the timing suffered." % (
                threads, "%.1f" % peak_t if peak_t else "?", peak_desc))
        add("")
        for w in workloads:
            T = R["timing"].get(w.name, {})
            f = R["flops"].get(w.model.name, {})
            flops = f.get("per_sequence")
            binp = batch_of(w)
            total = flops * binp if flops else None
            add("### %s" % w.label)
            add("")
            add("Model `%s`: %s. %s FLOP per forward%s." % (
                w.model.name, w.model.title, "%.2f G" % (total / 1e9) if total else "?",
                "" if not f.get("arena_bytes") else "; tfmc activation arena %.1f MB" % (
                    f["arena_bytes"] / 1e6)))
            add("")
            add("| framework | median ms | min | max | runs | GFLOP/s | % peak | peak RSS MB | "
                "cross-check | busy before | others during | loadavg before |")
            add("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
            for fw in FW_ORDER:
                r = T.get(fw)
                if not r:
                    continue
                ph = r.get("phase") or {}
                load = "%.2f | %s | %s" % (
                    ph.get("busy_cores", 0),
                    "-" if r.get("others_cores") is None else "%.2f" % r["others_cores"],
                    ph.get("loadavg", "-"))
                if not ok_result(r):
                    add("| %s | n/a | | | | | | %s | %s | %s |" % (
                        FW_SHORT[fw], mb(r.get("rss_kb")), why(r).replace("|", "/"), load))
                    continue
                gf = total / (r["median_ms"] * 1e-3) / 1e9 if total else None
                add("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |" % (
                    FW_SHORT[fw], ms(r["median_ms"]), ms(r.get("min_ms")), ms(r.get("max_ms")),
                    r.get("runs", 0), "%.1f" % gf if gf else "-",
                    "%.0f%%" % (100 * gf / peak_t) if gf and peak_t else "-", mb(r.get("rss_kb")),
                    "%.1e" % r["check"]["rel"], load))
            add("")
            rm = [(fw, T[fw]["round_medians_ms"]) for fw in FW_ORDER
                  if ok_result(T.get(fw)) and T[fw].get("round_medians_ms")]
            if rm:
                add("Run in %d interleaved rounds (every framework once per round); the median is "
                    "the median of the round medians, min/max/runs/RSS/others over all rounds. "
                    "Round medians (ms): %s." % (len(rm[0][1]), "; ".join(
                        "%s %s" % (FW_SHORT[fw], " / ".join(ms(x) for x in meds)) for fw, meds in rm)))
                add("")

    if decodes:
        decode_sections(R, decodes, add, threads)

    # ---- ceilings ----
    add("## Machine ceilings (measured by this run)")
    add("")
    add("| probe | 1 thread | %d threads |" % i.get("ncpu", 2))
    add("|---|---:|---:|")
    for key, label, field, unit in (("fma", "peak fp32 FMA, %s (`bench/peak_fma.c`)" % peak_desc,
                                     "gflops", "GFLOP/s"),
                                    ("read", "DRAM read, 1 GiB stream (`bench/stream_read.c`)",
                                     "gbytes_per_s", "GB/s")):
        e = R["ceilings"].get(key)
        if not e:
            errs = [x.get("error") for x in R["ceilings"].get(key + "_runs", []) if x.get("error")]
            add("| %s | %s | |" % (label, "; ".join(errs) or "not measured"))
            continue
        vals = {x["threads"]: x[field] for x in e}
        add("| %s | %s %s | %s %s |" % (label, vals.get(1, "-"), unit, vals.get(i.get("ncpu", 2), "-"), unit))
    add("")
    add("Best of two measurements (before and after the timing phase; a busy neighbour can "
        "only lower a ceiling):")
    add("")
    for key in ("fma", "read"):
        for run in R["ceilings"].get(key + "_runs", []):
            if run.get("error"):
                continue
            field = "gflops" if key == "fma" else "gbytes_per_s"
            add("- %s %s (busy before: %.2f cores): %s" % (
                "peak FMA" if key == "fma" else "DRAM read", run["when"], run["busy_cores"],
                ", ".join("%d thread%s %.1f" % (x["threads"], "s" if x["threads"] > 1 else "", x[field])
                          for x in run["results"])))
    add("")

    # ---- sweep ----
    if R.get("sweep"):
        add("## PyTorch environment sweep")
        add("")
        add("The tuned environment (`%s`, see `bench/README.md`: the wait policy and malloc "
            "settings fixed, the core type from this run's BLAS probe); these runs are the "
            "evidence for it, measured in this run. Each cell is one process (warm-up, then "
            "timed runs): median ms, and in brackets the cores other processes used meanwhile. "
            "Rounds interleave the candidates." % R.get("tuned_label"))
        add("")
        names = []
        for s in R["sweep"]:
            if s.get("workload", "bert_b1") not in names:
                names.append(s.get("workload", "bert_b1"))
        for wname in names:
            runs = [s for s in R["sweep"] if s.get("workload", "bert_b1") == wname]
            rounds = sorted({s.get("round", 1) for s in runs})
            add("%s:" % wl.WORKLOAD_BY_NAME[wname].label)
            add("")
            add("| environment | " + " | ".join("round %d" % k for k in rounds) +
                " | mean | min of all runs | peak RSS MB | |")
            add("|---|" + "---:|" * (len(rounds) + 3) + "---|")
            labels = []
            for s in runs:
                if s["label"] not in labels:
                    labels.append(s["label"])
            for label in labels:
                cells, meds, mins, rss, notes = [], [], [], [], []
                for k in rounds:
                    s = next((x for x in runs if x["label"] == label and x.get("round", 1) == k), None)
                    if ok_result(s):
                        cells.append("%s (%.2f)" % (ms(s["median_ms"]), s.get("others_cores") or 0))
                        meds.append(s["median_ms"])
                        mins.append(s["min_ms"])
                        rss.append(s.get("rss_kb") or 0)
                    else:
                        cells.append("n/a")
                        notes.append(why(s))
                tuned = "**tuned**" if label == R.get("tuned_label") else ""
                add("| %s | %s | %s | %s | %s | %s |" % (
                    label, " | ".join(cells), ms(sum(meds) / len(meds)) if meds else "-",
                    ms(min(mins)) if mins else "-", mb(max(rss)) if rss else "-",
                    "; ".join([tuned] + notes).strip("; ")))
            add("")

    # ---- profile ----
    if R.get("profile"):
        add("## Where tfmc's time goes")
        add("")
        add("`perf record -e cpu-clock` over the tfmc executable (load, warm-up and the timed "
            "runs; the runs dominate). Share of samples; generated kernels are grouped by op, "
            "`sgemm_*` is OpenBLAS, `__expf_fma`, `__erff`, `__tanhf`, ... are libm called "
            "per element, `fnv_update` is the weights checksum at load time (not in the timed "
            "runs).")
        add("")
        for w in workloads:
            p = R["profile"].get(w.name)
            if p:
                add("- **%s** (%d runs): %s" % (w.label, p["runs"], ", ".join(
                    ("`%s` %.0f%%" if " " not in name else "%s %.0f%%") % (name, pct) for name, pct in p["top"] if pct >= 1)))
        add("")

    if workloads:
        # ---- builds ----
        add("## Build and compile times")
        add("")
        add("| model | JIT compile (in `tfmc run`) | `tfmc build` | `tfmc emit-c` + make |")
        add("|---|---:|---:|---:|")
        for m in wl.MODELS.values():
            b = R["builds"].get(m.name)
            if b is None:
                continue
            jit = [r.get("compile_ms") for w in workloads if w.model is m
                   for r in [R["timing"].get(w.name, {}).get("tfmc-jit")] if r and r.get("compile_ms")]
            e = b.get("exe") or {}
            c = b.get("c") or {}
            add("| %s | %s | %s | %s |" % (
                m.name, "%.2f s" % (jit[0] / 1e3) if jit else "-",
                ("%.1f s" % e["seconds"]) if e and not e.get("error") else (e.get("error") or "-"),
                ("%.1f s + %.1f s" % (c["seconds_emit"], c.get("seconds_make", 0)))
                if c and not c.get("error") else (c.get("error") or "-").replace("|", "/")))
        add("")

        # ---- correctness ----
        add("## Cross-check before timing")
        add("")
        add("Every framework ran every workload once before anything was timed; outputs are "
            "compared with PyTorch's fp32 reference (written by `bench/prepare.py`): pass when "
            "max |out - ref| <= 1e-3 x max |ref| (5e-2 for the bf16 row: bf16 keeps 8 bits of "
            "mantissa). Cells show max |out - ref| / max |ref|. "
            "(PyTorch's two environments run the same code; it is checked once here, and every "
            "timed run's outputs are checked again.)")
        add("")
        fws = [f for f in FW_ORDER if f != "torch"]
        add("| workload | " + " | ".join(FW_SHORT[f] for f in fws) + " |")
        add("|---|" + "---|" * len(fws))
        for w in workloads:
            C = R["check"].get(w.name, {})
            cells = []
            for f in fws:
                e = C.get(f)
                if not e:
                    cells.append("-")
                elif e["state"] == "ok":
                    cells.append("ok %.1e" % e["check"]["rel"])
                else:
                    cells.append(e["state"].replace("|", "/")[:120])
            add("| %s | %s |" % (w.label, " | ".join(cells)))
        add("")

    # ---- notes and load log ----
    if R.get("notes"):
        add("## Notes")
        add("")
        for n in R["notes"]:
            add("- " + n)
        add("")
    add("## Load log")
    add("")
    idle = i.get("idle") or {"threshold_per_core": 0.5, "wait_s": 15, "budget_s": 180}
    add("Before each phase the harness samples /proc/stat over 1 s windows and waits (at most "
        "%g s per phase, %g s in total) until less than %g core per core is busy; "
        "`idle` says whether it got there." % (idle["wait_s"], idle["budget_s"],
                                               idle["threshold_per_core"]))
    add("")
    add("| t (s) | phase | loadavg (1/5/15 min) | busy cores | waited s | idle |")
    add("|---:|---|---|---:|---:|---|")
    for p in R["phases"]:
        add("| %.0f | %s | %s | %.2f | %.0f | %s |" % (p["t"], p["phase"], p["loadavg"], p["busy_cores"],
                                                    p["waited_s"], "yes" if p["idle"] else "no"))
    add("")
    with open(path, "w") as f:
        f.write("\n".join(L))


DECODE_ROWS = ["tfmc-jit", "tfmc-exe", "torch", "torch-tuned", "ort"]
MEMORY_BOUND = 1.10  # issue 10: peak RSS within 10% of weights + arena + KV cache


def read_readings(R, threads):
    """Every DRAM read probe of the run at `threads` threads (GB/s): the
    ceilings' (before and after the timing) and the one just before each
    roofline workload's tfmc process. On this shared VM they range over a
    factor of two within minutes (28-58 GB/s), so the roofline is set at
    their median, the bandwidth the decode runs had beside them; the best
    is shown too."""
    got = [e["gbytes_per_s"] for run in R["ceilings"].get("read_runs") or []
           for e in run.get("results") or [] if e.get("threads") == threads]
    if not got:  # results written before read_runs existed: the best one
        got = [e["gbytes_per_s"] for e in R["ceilings"].get("read") or []
               if isinstance(e, dict) and e.get("threads") == threads]
    for D in (R.get("decode") or {}).values():
        for fw in ("tfmc-jit", "tfmc-exe"):
            r = (D.get("timing") or {}).get(fw)
            if ok_result(r):
                got += r.get("round_read_gbps") or ([r["read_gbps"]] if r.get("read_gbps") else [])
    return got


def verdict(r, bound, what="time"):
    if r is None:
        return "not measured"
    if r <= bound:
        return "**met** (%.1f%% below the bound)" % ((1 - r / bound) * 100)
    if what == "time":
        return "**missed**: tfmc needs a %.3fx speed-up (%.1f%% less time)" % (r / bound, (1 - bound / r) * 100)
    return "**missed**: %.1f%% more than the bound" % ((r / bound - 1) * 100)


def decode_sections(R, decodes, add, threads):
    """Issue 10's generation benchmark: the table per workload, the targets,
    the memory run."""
    DEC = R.get("decode") or {}
    readings = read_readings(R, threads)
    bw = statistics.median(readings) if readings else None
    bw_best = max(readings) if readings else None
    add("## Generation: greedy decoding with a KV cache")
    add("")
    add("Each run is one whole greedy generation (batch 1, %d threads): the prompt as one step "
        "(the *prefill*; for the encoder-decoder the bos step after the encoder), then one step "
        "per new id. *ms per decoded token* is the time from the end of the prefill to the last "
        "id (every later step and every argmax) / (new ids - 1), as `tfmc run --generate "
        "--repeat` reports it (`runtime/rt_generate.c`); *whole* is encode + prefill + decode of "
        "one sequence. A process runs one warm-up generation (tfmc a whole one, as `--repeat` "
        "does; PyTorch and ORT 16 ids), then N timed ones; a cell is the "
        "median of the round medians of interleaved rounds (every row once per round). Every "
        "run's ids must equal PyTorch's, all of them (`bench/decode.py`'s reference, itself "
        "checked against full forward passes of every prefix); a run that differs is reported, "
        "not timed. `*`: others used more than %.2f cores while it ran." % (threads, DISTURBED))
    add("")
    add("| row | what runs |")
    add("|---|---|")
    add("| tfmc JIT | `tfmc run SPEC --weights W --inputs IN --generate N --outputs OUT --threads %d "
        "--repeat R` (the step program with its KV cache; `-O2`, fp32 packed weights) |" % threads)
    add("| tfmc exe | `tfmc build SPEC --weights W -o EXE --max-beams 1`, then `EXE --inputs IN "
        "--generate N --outputs OUT --threads %d --repeat R` |" % threads)
    add("| PyTorch, PyTorch tuned | `bench/torch_bench.py`: `bench/decode.py`'s loop, out of the "
        "box and in the tuned environment: GPT-2 as transformers runs it with `past_key_values` "
        "(K/V grown by `torch.cat`, the LM head on the last position only, "
        "`logits_to_keep=1`), seq2seq as pytorch-seq2seq's modules with a self-attention K/V "
        "cache and the cross-attention K/V projected once per source; `torch.inference_mode()` |")
    add("| ORT | `bench/ort_decode.js`: onnxruntime-node over the GPT-2 step exported by "
        "`torch.onnx.export` (opset %d; `input_ids`, `position_ids`, `past.N.key/value` in, "
        "last-position `logits` and `present.N.key/value` out); prefill with empty past "
        "tensors; each step feeds the previous presents back as returned |" % wl.OPSET)
    add("")
    for w in decodes:
        D = DEC.get(w.name) or {}
        T = D.get("timing") or {}
        ref = D.get("reference") or {}
        add("### %s" % w.label)
        add("")
        add("Model `%s` (%s), spec `%s`. PyTorch's reference: %d ids, %d distinct (random "
            "weights), smallest top-1 minus top-2 logit over the steps %s (how far fp32 rounding "
            "is from flipping an id). %s" % (
                w.model.name, w.model.title, (D.get("plan") or {}).get("spec", "?"),
                ref.get("new_tokens", w.new_tokens), ref.get("distinct_ids", 0),
                "%.3g" % ref["min_margin"] if ref.get("min_margin") is not None else "?",
                "No eos in the spec: every run makes all %d ids." % w.new_tokens
                if not dict(w.model.facts.get("tokens") or []).get("eos") else
                "The spec has eos %d; the source was picked so that PyTorch's %d ids hold no eos "
                "(and no pad), prepare.py refuses one that does, and every run must make all %d "
                "ids." % (dict(w.model.facts["tokens"])["eos"], w.new_tokens, w.new_tokens)))
        add("")
        add("| row | encode ms | prefill ms | ms / decoded token | whole generation ms | runs | "
            "peak RSS MB | ids | busy before | others during |")
        add("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for fw in DECODE_ROWS:
            r = T.get(fw)
            if not r:
                continue
            ph = r.get("phase") or {}
            load = "%.2f | %s" % (ph.get("busy_cores", 0), "-" if r.get("others_cores") is None
                                  else "%.2f" % r["others_cores"])
            if not ok_result(r):
                add("| %s | n/a | | | | | %s | %s | %s |" % (FW_SHORT[fw], mb(r.get("rss_kb")),
                                                          why(r).replace("|", "/"), load))
                continue
            star = " *" if (r.get("others_cores") or 0) > DISTURBED else ""
            add("| %s | %s | %s | %s%s | %s | %d | %s | %s | %s |" % (
                FW_SHORT[fw], ms(r.get("encode_ms")) if r.get("encode_ms") else "-",
                ms(r.get("prefill_ms")), ms(r.get("token_ms")), star, ms(r["median_ms"]),
                r.get("runs", 0), mb(r.get("rss_kb")), r["check"].get("summary", ""), load))
        add("")
        rm = [(fw, T[fw]) for fw in DECODE_ROWS if ok_result(T.get(fw)) and T[fw].get("round_token_ms")]
        if rm:
            add("Round medians, ms per decoded token / whole generation ms: %s." % "; ".join(
                "%s %s" % (FW_SHORT[fw], ", ".join("%s / %s" % (ms(a), ms(b)) for a, b in zip(
                    r["round_token_ms"], r["round_medians_ms"]))) for fw, r in rm))
            add("")
        C = D.get("check") or {}
        if C:
            add("Checked before timing (one generation each): %s." % "; ".join(
                "%s %s" % (FW_SHORT[f], e["state"] if e["state"] != "ok" else
                           e["check"].get("summary", "ok")) for f, e in C.items()))
            add("")
        plan = D.get("plan") or {}
        lin = plan.get("linear_flops_per_token")
        if w.name == "gpt2_decode" and lin:
            wbytes = lin / 2 * 4
            roof = wbytes / (bw * 1e9) * 1e3 if bw else None
            roof_best = wbytes / (bw_best * 1e9) * 1e3 if bw_best else None
            add("DRAM roofline: every linear's fp32 weights (the tied LM head included: %.1f M "
                "multiply-adds per token, `tfmc check`) are read once per decoded token, %.1f MB; "
                "at the measured %d-thread read bandwidth (`bench/stream_read.c`: the median of "
                "the run's %d readings, the ceilings' two and one just before each tfmc "
                "process, %s GB/s; they ranged %s GB/s) that takes **%s ms** per token; at the "
                "highest reading, %s ms. (The KV cache adds %.1f MB per token at the last of the "
                "%d positions, not counted.)" % (
                    lin / 2e6, wbytes / 1e6, threads, len(readings), "%.1f" % bw if bw else "?",
                    "%.1f-%.1f" % (min(readings), max(readings)) if readings else "?", ms(roof),
                    ms(roof_best),
                    2 * w.model.facts["layers"] * (ref.get("input_len", 0) + w.new_tokens) *
                    w.model.facts["d_model"] * 4 / 1e6, ref.get("input_len", 0) + w.new_tokens))
            add("")
            if roof:
                add("| row | ms / token | / roofline | / roofline at the highest reading | "
                    "weight bytes streamed per second |")
                add("|---|---:|---:|---:|---:|")
                for fw in DECODE_ROWS:
                    r = T.get(fw)
                    if ok_result(r):
                        add("| %s | %s | %.2fx | %.2fx | %.1f GB/s |" % (
                            FW_SHORT[fw], ms(r["token_ms"]), r["token_ms"] / roof,
                            r["token_ms"] / roof_best, wbytes / r["token_ms"] / 1e6))
                add("")
            D["_roof"] = roof
            # each tfmc round against the bandwidth measured just before it
            paired = {}
            for fw in ("tfmc-jit", "tfmc-exe"):
                r = T.get(fw)
                if not ok_result(r):
                    continue
                toks = r.get("round_token_ms") or ([r["token_ms"]] if r.get("token_ms") else [])
                bws = r.get("round_read_gbps") or ([r["read_gbps"]] if r.get("read_gbps") else [])
                if toks and len(toks) == len(bws):
                    paired[fw] = [(t, b, t / (wbytes / (b * 1e9) * 1e3)) for t, b in zip(toks, bws)]
            if paired:
                add("Paired with the bandwidth of the moment (a `stream_read` at %d threads just "
                    "before each tfmc process): per round, ms per token / the roofline at that "
                    "bandwidth: %s (median %s). For information only: on a shared VM the probe "
                    "moves by a third between runs seconds apart while nothing else runs in the "
                    "VM, more than tfmc's time does, and a ratio below 1 means the probe read "
                    "less than the decode streamed; the target below is judged against the "
                    "median of the run's readings." % (
                        threads, "; ".join("%s %s" % (FW_SHORT[fw], ", ".join(
                            "%s ms at %.1f GB/s = %.2fx" % (ms(t), b, x) for t, b, x in v))
                            for fw, v in paired.items()), ", ".join(
                            "%s %.2fx" % (FW_SHORT[fw], statistics.median(x for _, _, x in v))
                            for fw, v in paired.items())))
                add("")
    # ---- targets ----
    add("### Targets (issue 10)")
    add("")
    add("| target | measured | verdict |")
    add("|---|---:|---|")
    g = DEC.get("gpt2_decode") or {}
    if g:
        T = g.get("timing") or {}
        roof = g.get("_roof")
        for fw in ("tfmc-jit", "tfmc-exe"):
            r = T.get(fw)
            x = r["token_ms"] / roof if ok_result(r) and roof else None
            add("| gpt2-small: %s ms per decoded token <= 1.15x the DRAM roofline (%s ms, the "
                "median read probe) | %s | %s |" % (
                    FW_SHORT[fw], ms(roof), "%.3fx (%s ms)" % (x, ms(r["token_ms"])) if x else "-",
                    verdict(x, 1.15)))

        for fw in ("tfmc-jit", "tfmc-exe"):
            a, b = T.get(fw), T.get("ort")
            x = a["token_ms"] / b["token_ms"] if ok_result(a) and ok_result(b) else None
            add("| gpt2-small: %s ms per decoded token <= 0.8x ORT's | %s | %s |" % (
                FW_SHORT[fw], "%.3fx (%s / %s ms)" % (x, ms(a["token_ms"]), ms(b["token_ms"]))
                if x else "-", verdict(x, 0.8) if x else "not measured (%s)" % why(b)))
    s2 = DEC.get("seq2seq_decode") or {}
    if s2:
        T = s2.get("timing") or {}
        a = T.get("tfmc-jit")
        for base in ("torch-tuned", "torch"):
            b = T.get(base)
            x = a["median_ms"] / b["median_ms"] if ok_result(a) and ok_result(b) else None
            add("| seq2seq 24 -> 24: tfmc JIT whole generation <= 0.5x %s's | %s | %s |" % (
                FW_SHORT[base], "%.3fx (%s / %s ms)" % (x, ms(a["median_ms"]), ms(b["median_ms"]))
                if x else "-", verdict(x, 0.5)))
    mem_rows = []
    for w in decodes:
        D = DEC.get(w.name) or {}
        m, plan = D.get("memory"), D.get("plan") or {}
        if not m:
            continue
        parts = [plan.get(k) for k in ("weight_bytes", "step_arena_bytes", "kv_cache_bytes")]
        total = sum(parts) if all(p is not None for p in parts) else None
        ok = not m.get("error") and not m.get("skipped") and (m.get("check") or {}).get("ok")
        x = m["rss_kb"] * 1024 / total if ok and total and m.get("rss_kb") else None
        add("| %s: tfmc exe generating %d ids after the %d-token prompt, peak RSS <= %.2fx "
            "(weights + step arena + KV cache) | %s | %s |" % (
                w.model.name, m.get("new_tokens", 0), (D.get("reference") or {}).get("input_len", 0),
                MEMORY_BOUND, "%.3fx (%.1f MB)" % (x, m["rss_kb"] * 1024 / 1e6) if x else "-",
                verdict(x, MEMORY_BOUND, "rss") if x else "not measured (%s)" % (
                    m.get("skipped") or m.get("error") or (m.get("check") or {}).get("message"))))
        mem_rows.append((w, m, plan, total))
    add("")
    for w, m, plan, total in mem_rows:
        exe = (DEC.get(w.name) or {}).get("exe") or {}
        wfile = exe.get("weights_file_bytes")
        if not wfile and exe.get("path") and os.path.exists(exe["path"] + ".weights"):
            wfile = os.path.getsize(exe["path"] + ".weights")
        add("Memory (%s): `tfmc check %s` plans weights %.1f MB (every parameter as f32, the "
            "tied matrix once), a step arena of %.1f MB and a KV cache of %.1f MB (batch 1, all "
            "max_len positions), %.1f MB together; the executable (`--max-beams 1`, its weights "
            "file `EXE.weights` of %s MB mapped: the forward program's weights, which the step "
            "program shares, a tied matrix stored once in the LM head's panels) peaked at %s MB "
            "(`/usr/bin/time`) generating %d ids (%s)." % (
                w.model.name, plan.get("spec"), (plan.get("weight_bytes") or 0) / 1e6,
                (plan.get("step_arena_bytes") or 0) / 1e6, (plan.get("kv_cache_bytes") or 0) / 1e6,
                (total or 0) / 1e6, "%.1f" % (wfile / 1e6) if wfile else "?",
                "%.1f" % (m["rss_kb"] * 1024 / 1e6) if m.get("rss_kb") else "-",
                m.get("new_tokens", 0), (m.get("check") or {}).get("summary") or m.get("error")
                or m.get("skipped")))
        add("")


def batch_of(w):
    return int(next(iter(w.inputs().values())).shape[0])


def main():
    if len(sys.argv) != 3:
        print("usage: report.py RESULTS.json OUT.md", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        R = json.load(f)
    write(R, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
