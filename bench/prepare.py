#!/usr/bin/python3
"""bench/prepare.py — writes every benchmark model and workload to disk.

For each model of bench/workloads.py, under WORK/models/NAME/:
    model.tfm            the tfmc spec (model block + weights preset), also
                         written to bench/specs/NAME.tfm (committed)
    weights.safetensors  module.state_dict(), F32, the original names
    model.onnx           torch.onnx.export of the same module (opset 17,
                         dynamic batch axis, sequence lengths fixed)
and for each workload, under WORK/workloads/NAME/:
    inputs.safetensors   the token ids (int64)
    expected.safetensors PyTorch's fp32 outputs (the reference every
                         framework is checked against)
and for a generation workload (kind "decode", bench/decode.py) instead:
    inputs.safetensors   the prompt `tokens` or the source `src` [1,S] (int64)
    expected.safetensors PyTorch's greedy ids with a KV cache, `generated`
                         i64 [1,N] and `generated_lengths` i64 [1] (what
                         tfmc --generate --outputs writes), checked against
                         full forward passes of every prefix before writing
    decode.json          the smallest top-1 minus top-2 logit over the steps
                         (how far fp32 rounding is from flipping an id)
    model.tfm            the spec at the workload's max_len (when it has
                         one; also bench/specs/NAME.tfm)
    step.onnx            GPT-2 only: the step with past / present K/V
                         (decode.export_gpt2_step)

Usage: /usr/bin/python3 bench/prepare.py --work DIR [--only WORKLOAD]... [--fresh]

A model directory whose STAMP matches (hash of workloads.py, gen_goldens.py,
reference_models.py, safetensors_io.py and the torch version) is reused; --fresh rebuilds. A
directory is written under a temporary name and renamed when complete, so
an interrupted run never leaves a half-written model that looks finished.
Before anything is written the state_dict is checked against the spec's
weight map (gen_goldens.check_weight_map), so tfmc will accept the file.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import warnings

import torch

import workloads as wl

HERE = os.path.dirname(os.path.abspath(__file__))


def stamp():
    h = hashlib.sha256()
    for p in (os.path.join(HERE, "workloads.py"), os.path.join(HERE, "prepare.py"),
              os.path.join(HERE, "decode.py"),
              os.path.join(wl.ROOT, "tools", "gen_generate_golden.py"),
              os.path.join(wl.ROOT, "tools", "gen_goldens.py"),
              os.path.join(wl.ROOT, "tools", "reference_models.py"),
              os.path.join(wl.ROOT, "tools", "safetensors_io.py")):
        with open(p, "rb") as f:
            h.update(f.read())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def log(msg):
    print("prepare: " + msg, flush=True)


def export_onnx(wrapped, inputs, model, path):
    dyn = {n: {0: "batch"} for n in model.inputs + model.outputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapped, tuple(inputs), path, input_names=model.inputs,
                          output_names=model.outputs, opset_version=wl.OPSET,
                          do_constant_folding=True, dynamic_axes=dyn)


def prepare_model(model, work_loads, work, st, fresh):
    final = wl.model_dir(work, model)
    stamp_path = os.path.join(final, "STAMP")
    wdirs = [os.path.join(work, "workloads", w.name) for w in work_loads]
    if not fresh and os.path.exists(stamp_path) and all(
            os.path.exists(os.path.join(d, "STAMP")) for d in wdirs):
        with open(stamp_path) as f:
            same = f.read().strip() == st
        for d in wdirs:
            with open(os.path.join(d, "STAMP")) as f:
                same = same and f.read().strip() == st
        if same:
            log("%s: up to date" % model.name)
            return
    t0 = time.time()
    inner = model.build()
    wrapped = model.wrapped(inner)
    weights_text = 'preset "%s"' % model.preset
    n_map, n_ign = wl.gg.check_weight_map(model.name, model.facts, weights_text,
                                          set(inner.state_dict().keys()))
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(tmp, "model.tfm"), "w") as f:
        f.write(model.spec_text())
    # the committed copy, for readers of the repository (same bytes)
    os.makedirs(os.path.join(HERE, "specs"), exist_ok=True)
    with open(os.path.join(HERE, "specs", model.name + ".tfm"), "w") as f:
        f.write(model.spec_text())
    wl.stio.write(os.path.join(tmp, "weights.safetensors"),
                  wl.gg.weights_tensors(inner, "F32"),
                  {"format": "pt", "producer": "tfmc bench/prepare.py", "seed": str(model.seed)})
    n_params = sum(p.numel() for p in inner.parameters())
    log("%s: %.1fM parameters, weight map %d mapped + %d ignored, written in %.1f s"
        % (model.name, n_params / 1e6, n_map, n_ign, time.time() - t0))
    torch.set_num_threads(2)
    first = True
    for w, d in zip(work_loads, wdirs):
        if w.kind == "decode":
            prepare_decode(model, inner, w, d, st)
            continue
        inputs = w.inputs()
        names = model.inputs
        assert sorted(inputs) == sorted(names), (w.name, sorted(inputs), names)
        args = [inputs[n] for n in names]
        with torch.inference_mode():
            outs = wrapped(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        expected = {n: o.detach().contiguous().numpy() for n, o in zip(model.outputs, outs)}
        for n, a in expected.items():
            assert a.dtype.name == "float32" and (a == a).all() and abs(a).max() < 1e30, (w.name, n)
        wtmp = d + ".tmp"
        shutil.rmtree(wtmp, ignore_errors=True)
        os.makedirs(wtmp)
        wl.stio.write(os.path.join(wtmp, "inputs.safetensors"),
                      {n: t.numpy() for n, t in inputs.items()})
        wl.stio.write(os.path.join(wtmp, "expected.safetensors"), expected)
        with open(os.path.join(wtmp, "STAMP"), "w") as f:
            f.write(st + "\n")
        shutil.rmtree(d, ignore_errors=True)
        os.rename(wtmp, d)
        log("%s: inputs %s, outputs %s" % (
            w.name, ", ".join("%s%s" % (n, list(t.shape)) for n, t in inputs.items()),
            ", ".join("%s%s" % (n, list(a.shape)) for n, a in expected.items())))
        if first:
            t1 = time.time()
            export_onnx(wrapped, args, model, os.path.join(tmp, "model.onnx"))
            log("%s: ONNX opset %d exported in %.1f s (%.0f MB)" % (
                model.name, wl.OPSET, time.time() - t1,
                os.path.getsize(os.path.join(tmp, "model.onnx")) / 1e6))
            first = False
    with open(os.path.join(tmp, "STAMP"), "w") as f:
        f.write(st + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)


def prepare_decode(model, inner, w, d, st):
    """A generation workload's files (the docstring's list), written under a
    temporary name and renamed when complete. Refuses (AssertionError) ids
    that disagree with full forward passes, and for a model with an eos a
    reference that holds its eos or pad id: every framework must make all
    N ids and the cache must not need a padding mask."""
    import decode
    t0 = time.time()
    name = model.inputs[0]
    inputs = {name: w.inputs()[name]}
    with torch.inference_mode():
        r = decode.greedy(w, inner, [inputs[name]], w.new_tokens, keep_logits=True)
        full = decode.full_forward_ids(w, inner, [inputs[name]], r["ids"])
    ids = r["ids"]
    assert len(ids) == w.new_tokens
    assert full == ids, "%s: the KV-cache loop's ids differ from full forward passes" % w.name
    tokens = dict(model.facts.get("tokens") or [])
    for what in ("eos", "pad"):
        if what in tokens:
            assert tokens[what] not in ids, (
                "%s: PyTorch's greedy ids hold the %s id %d, so a framework could stop early or "
                "mask it; pick another input seed" % (w.name, what, tokens[what]))
    margin = min(float(t[0] - t[1]) for t in (torch.topk(l, 2).values for l in r["logits"]))
    wtmp = d + ".tmp"
    shutil.rmtree(wtmp, ignore_errors=True)
    os.makedirs(wtmp)
    wl.stio.write(os.path.join(wtmp, "inputs.safetensors"), {n: t.numpy() for n, t in inputs.items()})
    import numpy as np
    wl.stio.write(os.path.join(wtmp, "expected.safetensors"), {
        "generated": np.array([ids], dtype=np.int64),
        "generated_lengths": np.array([len(ids)], dtype=np.int64)})
    with open(os.path.join(wtmp, "decode.json"), "w") as f:
        json.dump({"min_margin": margin, "distinct_ids": len(set(ids)), "input_len":
                   int(inputs[name].shape[1]), "new_tokens": w.new_tokens}, f)
    if w.max_len:
        text = model.spec_text(w.max_len)
        with open(os.path.join(wtmp, "model.tfm"), "w") as f:
            f.write(text)
        with open(os.path.join(HERE, "specs", w.name + ".tfm"), "w") as f:
            f.write(text)
    if model.name == "gpt2_small":
        t1 = time.time()
        decode.export_gpt2_step(inner, os.path.join(wtmp, "step.onnx"))
        log("%s: GPT-2 step with past K/V exported to ONNX in %.1f s" % (w.name, time.time() - t1))
    with open(os.path.join(wtmp, "STAMP"), "w") as f:
        f.write(st + "\n")
    shutil.rmtree(d, ignore_errors=True)
    os.rename(wtmp, d)
    log("%s: %s %s, %d greedy ids (%d distinct; smallest top-2 margin %.3g), checked against "
        "full forward passes, in %.1f s" % (w.name, name, list(inputs[name].shape), len(ids),
                                            len(set(ids)), margin, time.time() - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", action="append", help="workload name (repeatable)")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    chosen = wl.WORKLOADS
    if args.only:
        for n in args.only:
            if n not in wl.WORKLOAD_BY_NAME:
                ap.error("unknown workload %r (have: %s)" % (
                    n, ", ".join(w.name for w in wl.WORKLOADS)))
        chosen = [w for w in wl.WORKLOADS if w.name in args.only]
    st = stamp()
    for model in wl.MODELS.values():
        mine = [w for w in wl.WORKLOADS if w.model is model]
        # a model is prepared with all its workloads, so the stamp covers them all
        if any(w in chosen for w in mine):
            prepare_model(model, mine, args.work, st, args.fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
