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
import sys

import workloads as wl

FW_ORDER = ["tfmc-jit", "tfmc-exe", "tfmc-c", "torch", "torch-tuned", "ort"]
FW_SHORT = {"tfmc-jit": "tfmc JIT", "tfmc-exe": "tfmc exe", "tfmc-c": "tfmc C",
            "torch": "PyTorch", "torch-tuned": "PyTorch tuned", "ort": "ORT"}

# (workload, what, framework, baseline, bound): time ratio fw/baseline <= bound,
# or for "rss" peak RSS ratio.
TARGETS = [
    ("bert_b1", "time", "tfmc-jit", "torch-tuned", 1.0),
    ("bert_b1", "time", "tfmc-jit", "torch", 0.25),
    ("gpt2_prefill", "time", "tfmc-jit", "torch-tuned", 1.0),
    ("anatomy_tiny", "time", "tfmc-jit", "ort", 0.5),
    ("bert_long", "rss", "tfmc-jit", "torch-tuned", 0.6),
]


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


def cell(r):
    return ms(r["median_ms"]) if ok_result(r) else "n/a"


def ratio(a, b, key="median_ms"):
    if not (ok_result(a) and ok_result(b)):
        return None
    if key == "rss_kb":
        return a["rss_kb"] / b["rss_kb"] if a.get("rss_kb") and b.get("rss_kb") else None
    return a[key] / b[key]


def write(R, path, workloads=None):
    workloads = workloads or [w for w in wl.WORKLOADS if w.name in R["timing"]]
    L = []
    add = L.append
    i = R["info"]
    peak2 = peak1 = None
    for e in R["ceilings"].get("fma") or []:
        if isinstance(e, dict):
            if e["threads"] == 2:
                peak2 = e["gflops"]
            if e["threads"] == 1:
                peak1 = e["gflops"]
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
        "fastest of the sweep below" if R.get("sweep") else "default, no sweep in this run"))
    if i.get("scrubbed_env"):
        add("| removed from the caller's env | %s |" % ", ".join(i["scrubbed_env"]))
    add("| suite run time | %.1f min |" % (R.get("elapsed_s", 0) / 60))
    busy = [p for p in R["phases"] if p["phase"].startswith("time ")]
    if busy:
        n_idle = sum(1 for p in busy if p["idle"])
        add("| machine load | %d of %d timed phases started on an idle machine (< 0.5 busy cores "
            "per core); busy cores before a timed phase: median %.2f, max %.2f (see the load log) |" % (
                n_idle, len(busy), sorted(p["busy_cores"] for p in busy)[len(busy) // 2],
                max(p["busy_cores"] for p in busy)))
    add("")

    # ---- summary ----
    add("## Median time per forward (ms)")
    add("")
    add("One warm-up run, then N timed runs inside each process; median over the N.")
    add("")
    add("| workload | runs | " + " | ".join(FW_SHORT[f] for f in FW_ORDER) + " |")
    add("|---|---:|" + "---:|" * len(FW_ORDER))
    for w in workloads:
        T = R["timing"].get(w.name, {})
        add("| %s | %d | %s |" % (w.label, w.runs, " | ".join(cell(T.get(f)) for f in FW_ORDER)))
    add("")
    add("## Ratios (time / time; below 1 means tfmc is faster)")
    add("")
    cols = [("tfmc-jit", "torch"), ("tfmc-jit", "torch-tuned"), ("tfmc-jit", "ort"),
            ("tfmc-exe", "torch-tuned"), ("tfmc-c", "torch-tuned"), ("tfmc-exe", "tfmc-jit"),
            ("tfmc-c", "tfmc-jit")]
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
    add("## Targets (issue 5)")
    add("")
    add("| target | measured | verdict |")
    add("|---|---:|---|")
    for wname, what, fw, base, bound in TARGETS:
        W = wl.WORKLOAD_BY_NAME[wname]
        T = R["timing"].get(wname, {})
        if what == "time":
            desc = "%s: %s time <= %.2fx %s" % (W.label, FW_SHORT[fw], bound, FW_SHORT[base])
            r = ratio(T.get(fw), T.get(base))
        else:
            desc = "%s: %s peak RSS <= %.2fx %s" % (W.label, FW_SHORT[fw], bound, FW_SHORT[base])
            r = ratio(T.get(fw), T.get(base), "rss_kb")
        if r is None:
            missing = [x for x in (fw, base) if not ok_result(T.get(x))]
            add("| %s | - | not measured (%s: %s) |" % (
                desc, ", ".join(missing), "; ".join(why(T.get(x)) for x in missing)))
            continue
        if r <= bound:
            verdict = "**met** (%.0f%% margin)" % ((1 - r / bound) * 100)
        else:
            verdict = "**missed** by %.2fx: tfmc must get %.0f%% %s" % (
                r / bound, (1 - bound / r) * 100, "faster" if what == "time" else "smaller")
        add("| %s | %.2fx | %s |" % (desc, r, verdict))
    add("")

    # ---- detail ----
    add("## Per workload")
    add("")
    add("GFLOP/s use `tfmc check`'s count (linear layers + attention, full score "
        "matrices also for causal attention) times the batch; %% of peak is against the "
        "measured %d-thread FMA peak (%s GFLOP/s). Peak RSS is the whole process's "
        "(`/usr/bin/time`): runtime, weights, activations, and for the JIT the compiler. "
        "\"busy\" is the number of busy cores measured just before the process started." % (
            threads, "%.1f" % peak_t if peak_t else "?"))
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
            "cross-check | busy / loadavg before |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for fw in FW_ORDER:
            r = T.get(fw)
            if not r:
                continue
            ph = r.get("phase") or {}
            load = "%.2f / %s" % (ph["busy_cores"], ph["loadavg"]) if ph else "-"
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

    # ---- ceilings ----
    add("## Machine ceilings (measured by this run)")
    add("")
    add("| probe | 1 thread | %d threads |" % i.get("ncpu", 2))
    add("|---|---:|---:|")
    for key, label, field, unit in (("fma", "peak fp32 FMA (`bench/peak_fma.c`)", "gflops", "GFLOP/s"),
                                    ("read", "DRAM read, 1 GiB stream (`bench/stream_read.c`)",
                                     "gbytes_per_s", "GB/s")):
        e = R["ceilings"].get(key)
        if not isinstance(e, list):
            add("| %s | %s | |" % (label, (e or {}).get("error", "not measured")))
            continue
        vals = {x["threads"]: x[field] for x in e}
        add("| %s | %s %s | %s %s |" % (label, vals.get(1, "-"), unit, vals.get(i.get("ncpu", 2), "-"), unit))
    add("")

    # ---- sweep ----
    if R.get("sweep"):
        add("## PyTorch environment sweep (bert-base seq 128 batch 1)")
        add("")
        add("Each candidate is one process: warm-up, then timed runs. The fastest median "
            "becomes the tuned environment for every workload.")
        add("")
        add("| environment | median ms | min | max | busy before | |")
        add("|---|---:|---:|---:|---:|---|")
        for s in R["sweep"]:
            ph = s.get("phase") or {}
            chosen = "**chosen**" if s.get("label") == R.get("tuned_label") else ""
            if ok_result(s):
                add("| %s | %s | %s | %s | %.2f | %s |" % (
                    s["label"], ms(s["median_ms"]), ms(s["min_ms"]), ms(s["max_ms"]),
                    ph.get("busy_cores", 0), chosen))
            else:
                add("| %s | n/a | | | %.2f | %s |" % (s["label"], ph.get("busy_cores", 0), why(s)))
        add("")

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
        "max |out - ref| <= 1e-3 x max |ref|. Cells show max |out - ref| / max |ref|. "
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
    add("Before each phase the harness samples /proc/stat over 1 s windows and waits (at most "
        "15 s per phase, 180 s in total) until fewer than 0.5 cores per core are busy; "
        "`idle` says whether it got there.")
    add("")
    add("| t (s) | phase | loadavg (1/5/15 min) | busy cores | waited s | idle |")
    add("|---:|---|---|---:|---:|---|")
    for p in R["phases"]:
        add("| %.0f | %s | %s | %.2f | %.0f | %s |" % (p["t"], p["phase"], p["loadavg"], p["busy_cores"],
                                                    p["waited_s"], "yes" if p["idle"] else "no"))
    add("")
    with open(path, "w") as f:
        f.write("\n".join(L))


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
