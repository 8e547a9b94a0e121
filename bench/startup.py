#!/usr/bin/env python3
"""bench/startup.py — time to the first result: one whole process that loads a
model and runs it once, as a user running it per request sees it.

    bench/startup.py [--tfmc build/tfmc] [--vs-tfmc OTHER] [--work bench/work]
                     [--rounds 7] [--threads 2] [--write FILE]

For each workload bench/run.sh prepared (bert_b1, gpt2_prefill; run it
first), side by side in interleaved rounds (a slow stretch of a shared
machine hits every configuration alike; the first round is a warm-up that
also fills the page cache, not counted; each round runs the
configurations in its own seeded random order, so no row always follows
the same one):

  tfmc exe   the executable `tfmc build` writes (built here, with --tfmc,
             into WORK/startup/): map the packed-weights file, verify its
             checksum, bind the inputs, run once, write the outputs
  tfmc JIT   `tfmc run`: read the safetensors checkpoint, map it onto the
             spec, pack the weights, compile with LLVM, run once
  ORT        `node bench/ort_bench.js MODEL.onnx ... 1`: node's start, the
             session (graph optimisation "all"), a warm-up run and one
             timed run (so one run more than the others); its own
             load + warm-up time is reported beside

--vs-tfmc OTHER adds both tfmc rows for another build of tfmc (an older
commit, say: its executables built with it into WORK/startup/vs/), in the
same rounds.

Whole-process wall time from outside (medians, min-max), 2 threads each
(--threads), outputs written to WORK/startup/out/. Prints a markdown table;
--write FILE also writes it there with the CPU and the load.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = [("bert_b1", "bert_base"), ("gpt2_prefill", "gpt2_small")]


def run(cmd, log):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
    wall = time.time() - t0
    with open(log, "a") as f:
        f.write("$ %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    if p.returncode != 0:
        sys.exit("startup: %s failed (exit %d), see %s" % (cmd[0], p.returncode, log))
    return wall, p.stdout


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "tfmc"))
    ap.add_argument("--vs-tfmc")
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--write")
    a = ap.parse_args()
    sdir = os.path.join(a.work, "startup")
    out = os.path.join(sdir, "out")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(sdir, "log.txt")
    open(log, "w").close()
    t = str(a.threads)
    configs = []  # (workload, label, cmd)
    for wname, model in WORKLOADS:
        mdir, wdir = os.path.join(a.work, "models", model), os.path.join(a.work, "workloads", wname)
        spec, weights = os.path.join(mdir, "model.tfm"), os.path.join(mdir, "weights.safetensors")
        onnx, inputs = os.path.join(mdir, "model.onnx"), os.path.join(wdir, "inputs.safetensors")
        if not all(os.path.exists(p) for p in (spec, weights, onnx, inputs)):
            sys.exit("startup: %s is not prepared in %s: run bench/run.sh first" % (wname, a.work))
        o = lambda fw: os.path.join(out, "%s_%s.safetensors" % (wname, fw))  # noqa: E731
        for tfmc, tag, edir in [(a.tfmc, "", sdir), (a.vs_tfmc, " (--vs-tfmc)", os.path.join(
                sdir, "vs"))][:2 if a.vs_tfmc else 1]:
            exe = os.path.join(edir, model, model)
            # built by this tfmc on every call (not timed): an executable
            # left by an earlier call may come from another commit
            os.makedirs(os.path.dirname(exe), exist_ok=True)
            for old in (exe, exe + ".weights"):
                if os.path.lexists(old):
                    os.unlink(old)
            run([tfmc, "build", spec, "--weights", weights, "-o", exe], log)
            configs += [
                (wname, "tfmc exe" + tag,
                 [exe, "--inputs", inputs, "--outputs", o("exe"), "--threads", t]),
                (wname, "tfmc JIT" + tag, [tfmc, "run", spec, "--weights", weights, "--inputs",
                                           inputs, "--outputs", o("jit"), "--threads", t]),
            ]
        configs.append((wname, "ORT", ["node", os.path.join(HERE, "ort_bench.js"), onnx, inputs,
                                       o("ort"), "1", t]))
    walls = {i: [] for i in range(len(configs))}
    ort_first = {i: [] for i in range(len(configs))}
    load0 = open("/proc/loadavg").read().split()[:3]
    for r in range(a.rounds + 1):
        # each round in its own order (seeded): on a KVM guest that hands
        # freed pages back to the host, a process that allocates soon after
        # another freed gigabytes finds them backed, one that allocates
        # seconds later pays the host's faults (tfmc run bert-base: ~1 s
        # more); a fixed order would charge that to the same rows
        order = list(range(len(configs)))
        random.Random(r).shuffle(order)
        for i in order:
            _, label, cmd = configs[i]
            wall, so = run(cmd, log)
            if r == 0:
                continue  # warm-up: page cache, node's modules
            walls[i].append(wall)
            if label == "ORT":
                j = json.loads(so.strip().splitlines()[-1])
                ort_first[i].append(j["load_ms"] + j["warmup_ms"])
    load1 = open("/proc/loadavg").read().split()[:3]
    lines = ["CPU: %s, %d threads each, %d interleaved rounds after a warm-up; load average "
             "%s before, %s after." % (cpu_model(), a.threads, a.rounds, " ".join(load0),
                                       " ".join(load1)),
             "",
             "| workload | configuration | whole process, s: median (min-max) | ratio to ORT |",
             "|---|---|---:|---:|"]
    for i, (wname, label, _) in enumerate(configs):
        med = statistics.median(walls[i])
        ort = [k for k, c in enumerate(configs) if c[0] == wname and c[1] == "ORT"][0]
        note = ""
        if ort_first[i]:
            note = " (session + first run in process: %.0f ms)" % statistics.median(ort_first[i])
        lines.append("| %s | %s%s | %.3f (%.3f-%.3f) | %.2fx |" % (
            wname, label, note, med, min(walls[i]), max(walls[i]),
            med / statistics.median(walls[ort])))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.write:
        with open(a.write, "w") as f:
            f.write("# Time to the first result (bench/startup.py, %s)\n\n%s" % (
                time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), text))


if __name__ == "__main__":
    main()
