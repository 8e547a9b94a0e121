#!/usr/bin/python3
"""bench/blas_probe.py — how fast PyTorch's BLAS runs one bert-base layer's
linears in this process's environment (the OPENBLAS_CORETYPE the caller set).

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/blas_probe.py [--threads 2] [--seconds 0.15]

bench.py runs it once per plausible OpenBLAS core type, in interleaved
rounds, and gives the tuned PyTorch row the fastest (bench/README.md, "The
tuned PyTorch environment"). Times torch.nn.functional.linear (addmm: what
nn.Linear runs, weight [N, K], bias) at the four linear shapes of one
bert-base layer at 128 tokens (QKV 2304x768, attention out 768x768, FFN up
3072x768, FFN down 768x3072), fp32, torch.set_num_threads(THREADS), under
torch.inference_mode(): per shape a few warm-up calls, then calls for
SECONDS; the median call. Prints one JSON line:
    {"core": the kernels OpenBLAS loaded (openblas_get_corename),
     "blas_threads", "torch_threads", "library",
     "shapes": [{"m", "n", "k", "ms", "gflops"}...],
     "layer_ms": the sum of the medians}
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [(128, 2304, 768), (128, 768, 768), (128, 3072, 768), (128, 768, 3072)]


def openblas_in_process():
    """The OpenBLAS that PyTorch loaded (Debian: libopenblasp-r0.3.*.so behind
    libblas.so.3), asked for its core name and thread count; (path, core,
    threads), or Nones when no OpenBLAS is mapped."""
    with open("/proc/self/maps") as f:
        paths = sorted({l.split()[-1] for l in f if "libopenblas" in l and l.split()[-1].startswith("/")})
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, no second copy
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return path, lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None, None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0.15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = []
    with torch.inference_mode():
        for m, n, k in SHAPES:
            x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
            for _ in range(3):
                F.linear(x, w, b)
            times, t_all = [], 0.0
            while t_all < args.seconds or len(times) < 5:
                a = time.perf_counter()
                F.linear(x, w, b)
                dt = time.perf_counter() - a
                times.append(dt)
                t_all += dt
            med = statistics.median(times)
            out.append({"m": m, "n": n, "k": k, "ms": med * 1e3, "gflops": 2.0 * m * n * k / med * 1e-9})
    path, core, blas_threads = openblas_in_process()
    print(json.dumps({"core": core, "blas_threads": blas_threads, "torch_threads": torch.get_num_threads(),
                      "library": path, "shapes": out, "layer_ms": sum(s["ms"] for s in out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
