#!/usr/bin/python3
"""bench/gemm/ort_matmul.py — writes the ONNX models bench/gemm/ort_matmul.js
times: ONNX Runtime's MatMul at gemm_bench.c's shapes.

    /usr/bin/python3 bench/gemm/ort_matmul.py --out DIR

For each weight shape (N, K) of gemm_bench.c (768x768, 2304x768, 3072x768,
768x3072, 50257x768) one model DIR/matmul_N_K.onnx, exported by
torch.onnx.export (opset 17) from a module whose forward is

    cat([ (x @ W_c)[:1] for c in copies ])      x [M, K] (M dynamic), W_c [K, N]

i.e. C one-MatMul nodes on C copies of the weight (initializers, which ORT
prepacks at session creation), each followed by a one-row Slice, so the
model's output stays C x N whatever M is. C is gemm_bench.c's count,
256 MiB / (N K 4 bytes) + 1: like gemm_bench's rotating copies, the
weights together exceed the caches (the L3 is 32 MiB here), so a few-row
MatMul streams its weight from DRAM as a model's layers do. A run of the
model is C MatMuls; ort_matmul.js reports run time / C per MatMul (the
Slices copy one row each: noise). No bias: ORT fuses MatMul + Add into a
Gemm-like kernel anyway, and the M x N adds are negligible next to the
M x N x K FMAs.

DIR/models.json lists {n, k, copies, file}; a model already written with
the same copies is kept (the directory is a cache, git-ignored)."""

import argparse
import json
import os
import sys

import torch

NKS = [(768, 768), (2304, 768), (3072, 768), (768, 3072), (50257, 768)]
OPSET = 17


class Copies(torch.nn.Module):
    def __init__(self, n, k, copies, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.rand(k, n, generator=g) * 2 - 1) for _ in range(copies)])

    def forward(self, x):
        return torch.cat([torch.matmul(x, w)[:1] for w in self.w], 0)


def copies_for(n, k):
    return (256 << 20) // (n * k * 4) + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    listing = os.path.join(args.out, "models.json")
    old = {}
    if os.path.exists(listing):
        with open(listing) as f:
            old = {(e["n"], e["k"]): e for e in json.load(f)}
    entries = []
    for n, k in NKS:
        c = copies_for(n, k)
        name = "matmul_%d_%d.onnx" % (n, k)
        path = os.path.join(args.out, name)
        e = {"n": n, "k": k, "copies": c, "file": name}
        if old.get((n, k)) != e or not os.path.exists(path):
            print("ort_matmul.py: exporting %s (%d copies of a %dx%d weight, %.0f MiB)" % (
                name, c, k, n, c * n * k * 4 / 2**20), file=sys.stderr, flush=True)
            m = Copies(n, k, c, seed=n * 7 + k).eval()
            with torch.no_grad():
                torch.onnx.export(m, (torch.zeros(8, k),), path, opset_version=OPSET,
                                  input_names=["x"], output_names=["y"],
                                  dynamic_axes={"x": {0: "m"}}, do_constant_folding=False)
            del m
        entries.append(e)
        with open(listing, "w") as f:  # after every model: an interrupted run keeps what it wrote
            json.dump(entries + [x for x in old.values() if (x["n"], x["k"]) not in
                                 {(y["n"], y["k"]) for y in entries}], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
