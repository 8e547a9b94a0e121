#!/usr/bin/python3
"""bench/torch_bench.py — times one workload in PyTorch eager, fp32.

    /usr/bin/python3 bench/torch_bench.py --work DIR --workload NAME
        --outputs OUT.safetensors --runs N [--threads 2]

Builds the workload's module (bench/workloads.py) without random init work
beyond PyTorch's own, reads weights.safetensors straight into its
parameters, sets torch.set_num_threads(THREADS), and under
torch.inference_mode() runs the forward once as warm-up, then N timed runs
(time.perf_counter around each call). Writes the last run's outputs to OUT
and prints one JSON line on stdout:
    {"framework": "torch", "version", "threads", "load_ms", "warmup_ms", "runs_ms": [...],
     "blas_core", "blas_threads", "torch_threads", "omp_wait_policy"}
The environment (OMP_*, OPENBLAS_*, GLIBC_TUNABLES, ...) is the caller's:
bench.py runs this script once out of the box and once tuned; the last
four fields say what this process ran with, as it sees itself: the kernels
the OpenBLAS it loaded picked (openblas_get_corename), OpenBLAS's and
PyTorch's thread counts, and libgomp's wait policy (OMP_WAIT_POLICY, or
libgomp's default: spin, then sleep).
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

import workloads as wl
from blas_probe import openblas_in_process


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--workload", required=True, choices=[w.name for w in wl.WORKLOADS])
    ap.add_argument("--outputs", required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.runs < 1 or args.threads < 1:
        ap.error("--runs and --threads must be >= 1")
    w = wl.WORKLOAD_BY_NAME[args.workload]
    mdir = wl.model_dir(args.work, w.model)
    wdir = os.path.join(args.work, "workloads", w.name)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    inner = w.model.build(randomise=False)
    wl.load_weights_into(inner, os.path.join(mdir, "weights.safetensors"))
    model = w.model.wrapped(inner)
    inputs = wl.read_inputs(os.path.join(wdir, "inputs.safetensors"), w.model)
    load_ms = (time.perf_counter() - t0) * 1e3
    times = []
    with torch.inference_mode():
        a = time.perf_counter()
        out = model(*inputs)
        warmup_ms = (time.perf_counter() - a) * 1e3
        for _ in range(args.runs):
            del out
            a = time.perf_counter()
            out = model(*inputs)
            times.append((time.perf_counter() - a) * 1e3)
    outs = out if isinstance(out, tuple) else (out,)
    wl.stio.write(args.outputs, {n: o.contiguous().numpy()
                                 for n, o in zip(w.model.outputs, outs)})
    _, core, blas_threads = openblas_in_process()
    print(json.dumps({"framework": "torch", "version": torch.__version__,
                      "threads": torch.get_num_threads(), "torch_threads": torch.get_num_threads(),
                      "blas_core": core, "blas_threads": blas_threads,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp default"),
                      "load_ms": load_ms,
                      "warmup_ms": warmup_ms, "runs_ms": times,
                      "median_ms": statistics.median(times)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
