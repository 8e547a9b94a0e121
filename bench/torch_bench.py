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
A generation workload (kind "decode", bench/decode.py) runs whole greedy
generations instead, with a KV cache: N = 0 is one untimed generation
(the cross-check), else a warm-up generation of decode.WARMUP_IDS ids and N
timed whole ones; OUT gets
`generated` and `generated_lengths` (as tfmc writes them) and the JSON
line adds per timed generation "prefill_ms", "token_ms" (decode time / (new
ids - 1)), "encode_ms"; "runs_ms" are the whole generations.
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
    w = wl.WORKLOAD_BY_NAME[args.workload]
    if args.runs < (0 if w.kind == "decode" else 1) or args.threads < 1:
        ap.error("--runs and --threads must be >= 1 (--runs >= 0 for a generation workload)")
    if w.kind == "decode":
        return generate(w, args)
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


def generate(w, args):
    """The generation workloads: greedy with a KV cache (decode.greedy)."""
    import numpy as np
    import decode
    mdir = wl.model_dir(args.work, w.model)
    wdir = os.path.join(args.work, "workloads", w.name)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    inner = w.model.build(randomise=False)
    wl.load_weights_into(inner, os.path.join(mdir, "weights.safetensors"))
    inner.eval()
    tensors, _ = wl.stio.read(os.path.join(wdir, "inputs.safetensors"))
    src = torch.from_numpy(np.array(tensors[w.model.inputs[0]], copy=True))
    load_ms = (time.perf_counter() - t0) * 1e3
    gens = []
    with torch.inference_mode():
        # the warm-up: WARMUP_IDS ids when timed runs follow (the weights and
        # the allocator are warm after a few steps; the out-of-the-box row
        # takes up to seconds per token on a busy machine), else all of them
        r = decode.greedy(w, inner, [src], min(w.new_tokens, decode.WARMUP_IDS) if args.runs
                          else w.new_tokens)
        warmup_ms = r["total_ms"]
        for _ in range(args.runs):
            gens.append(decode.greedy(w, inner, [src], w.new_tokens))
    ids = (gens[-1] if gens else r)["ids"]
    wl.stio.write(args.outputs, {"generated": np.array([ids], dtype=np.int64),
                                 "generated_lengths": np.array([len(ids)], dtype=np.int64)})
    _, core, blas_threads = openblas_in_process()
    per_tok = [g["decode_ms"] / max(1, len(g["ids"]) - 1) for g in gens]
    print(json.dumps({"framework": "torch", "version": torch.__version__,
                      "threads": torch.get_num_threads(), "torch_threads": torch.get_num_threads(),
                      "blas_core": core, "blas_threads": blas_threads,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp default"),
                      "load_ms": load_ms, "warmup_ms": warmup_ms,
                      "runs_ms": [g["total_ms"] for g in gens],
                      "prefill_ms": [g["prefill_ms"] for g in gens], "token_ms": per_tok,
                      "encode_ms": [g["encode_ms"] for g in gens], "new_tokens": len(ids),
                      "median_ms": statistics.median([g["total_ms"] for g in gens]) if gens else None}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
