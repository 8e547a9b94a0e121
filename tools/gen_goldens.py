#!/usr/bin/python3
"""tools/gen_goldens.py — PyTorch parity goldens for tfmc.

Builds, in PyTorch, small instances of every model family tfmc supports,
written the way each original codebase writes them (same module names, so
the state_dicts carry the real checkpoint names; same math, including each
codebase's mask fill value and LayerNorm flavour), and writes for each one

    tests/golden/NAME/model.tfm            the tfmc spec of that exact model
    tests/golden/NAME/weights.safetensors  model.state_dict(), names untouched
    tests/golden/NAME/inputs.safetensors   a padded batch (README "Inputs and outputs")
    tests/golden/NAME/expected.safetensors the reference outputs
    tests/golden/NAME/args                 extra `tfmc run` arguments (may be empty)

Run with Debian's PyTorch:  /usr/bin/python3 tools/gen_goldens.py [--only NAME]
[--check-only] [--out DIR]. Deterministic: fixed seeds, one thread, so
re-running rewrites byte-identical files.

Invariants and self-checks (any failure aborts before a file is written):
  - every parameter is randomised away from its init (norm gains 1+0.2N,
    biases 0.1N, linear weights U(+-1.5/sqrt(in)), embeddings 0.8N, or
    0.02-0.05N for BERT, anatomy and GPT-2 as trained ones are, so that the
    embedding LayerNorm's eps visibly matters), and
    perturbing any single parameter tensor moves the outputs by > 1e-3
    (except key-projection biases, which softmax provably ignores), so a
    model that ignores or misreads a parameter cannot pass;
  - the reference is computed in float64 from the stored (float32, or
    F16/BF16-rounded) weights; the float32 PyTorch run must agree with it
    to 1e-5 + 1e-5*|ref|, ten times tighter than the golden tolerance, so
    the golden is well conditioned;
  - each padded sequence run alone, unpadded, reproduces its rows of the
    batched outputs (the masks are what the original code builds);
  - family checks: per-head vs fused attention (anatomy), captured
    attention probabilities reproduce the layer output (torch.nn), causal
    independence of the future (gpt2), LayerNorm flavour matters (annotated);
  - every state_dict name is covered by the spec's weight map (preset from
    frontend/presets.c plus explicit rules) or an ignore pattern, and every
    name the map asks for exists;
  - outputs are finite with std > 1e-3; every directory is < 800 KB.

The model code is not run in training mode and never under torch.no_grad():
no_grad would switch torch.nn's transformer layers to their fast path, which
zeroes padded positions.
"""

import argparse
import ast
import copy
import math
import os
import re
import shlex
import sys
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_DIR_BYTES = 800 * 1024
MAX_TOTAL_BYTES = 6 * 1024 * 1024

# The model zoo: one module per family, as its codebase writes it.
from reference_models import *  # noqa: E402,F401,F403 (re-exported for bench/)


# ============================================================================
# Randomisation, inputs
# ============================================================================


def randomise(model, gen, gain=1.5, embed_std=0.8):
    """Moves every parameter far from its init; raises if one is missed.
    embed_std: a small value (as trained BERT / GPT-2 embeddings have) makes
    the embedding LayerNorm's input variance small enough for its eps to
    change the outputs visibly."""
    done = set()

    def put(p, value):
        if id(p) in done:
            return  # a tied parameter already set through its first owner
        with torch.no_grad():
            p.copy_(value)
        done.add(id(p))

    def uniform(shape, bound):
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound

    def randn(shape):
        return torch.randn(shape, generator=gen)

    for mod in model.modules():
        if isinstance(mod, nn.Linear):
            put(mod.weight, uniform(mod.weight.shape, gain / math.sqrt(mod.in_features)))
            if mod.bias is not None:
                put(mod.bias, 0.1 * randn(mod.bias.shape))
        elif isinstance(mod, Conv1D):
            put(mod.weight, uniform(mod.weight.shape, gain / math.sqrt(mod.weight.shape[0])))
            put(mod.bias, 0.1 * randn(mod.bias.shape))
        elif isinstance(mod, nn.Embedding):
            put(mod.weight, embed_std * randn(mod.weight.shape))
        elif isinstance(mod, nn.LayerNorm):
            put(mod.weight, 1 + 0.2 * randn(mod.weight.shape))
            put(mod.bias, 0.1 * randn(mod.bias.shape))
        elif isinstance(mod, AnnLayerNorm):
            put(mod.a_2, 1 + 0.2 * randn(mod.a_2.shape))
            put(mod.b_2, 0.1 * randn(mod.b_2.shape))
        elif isinstance(mod, nn.MultiheadAttention):
            put(mod.in_proj_weight, uniform(mod.in_proj_weight.shape,
                                            gain / math.sqrt(mod.embed_dim)))
            put(mod.in_proj_bias, 0.1 * randn(mod.in_proj_bias.shape))
    missed = [n for n, p in model.named_parameters() if id(p) not in done]
    if missed:
        raise RuntimeError("parameters not randomised: %s" % ", ".join(missed))


def round_params(model, dtype):
    """Rounds every float parameter to F16 or BF16 so the reference is
    computed from exactly the values stored in the weights file."""
    to = {"F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(to).float())


def padded_ids(gen, lengths, width, low, high, fill, dtype, bos=None, eos=None):
    """[B, width] ids: real tokens drawn from [low, high) (with bos/eos at the
    ends when given); positions past each length hold `fill` (the pad id),
    or fresh random ids when fill is None (a model told about padding only
    through lengths or a mask must not look at them)."""
    out = torch.randint(low, high, (len(lengths), width), generator=gen)
    for b, n in enumerate(lengths):
        assert 1 <= n <= width
        if bos is not None:
            out[b, 0] = bos
        if eos is not None and n > 1:
            out[b, n - 1] = eos
        if fill is not None:
            out[b, n:] = fill
    return out.to(dtype)


def mask_from_lengths(lengths, width, dtype):
    m = torch.zeros(len(lengths), width, dtype=dtype)
    for b, n in enumerate(lengths):
        m[b, :n] = 1
    return m


def kpm_from_lengths(lengths, width):
    """torch.nn key_padding_mask: True where the key is padding."""
    return mask_from_lengths(lengths, width, torch.int64) == 0


# ============================================================================
# Spec text and weight-map checking
# ============================================================================


def fmt_num(x):
    if isinstance(x, int):
        return str(x)
    s = "%g" % x
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), s)


def model_block(name, f):
    """The `model` block of a spec from a golden's facts (one source of truth
    for the spec text and for the weight-map check)."""
    lines = ["model %s {" % name]

    def kv(key, value):
        lines.append("  %-11s %s" % (key, value))

    kv("arch", f["arch"])
    v = f["vocab"]
    kv("vocab", "src %d tgt %d" % v if isinstance(v, tuple) else str(v))
    kv("d_model", f["d_model"])
    kv("heads", f["heads"])
    ly = f["layers"]
    kv("layers", "encoder %d decoder %d" % ly if isinstance(ly, tuple) else str(ly))
    kv("ffn", "%d %s" % f["ffn"])
    place, eps, unbiased = f["norm"]
    kv("norm", "%s eps %s%s" % (place, fmt_num(eps), " unbiased_std" if unbiased else ""))
    if f.get("final_norm"):
        kv("final_norm", f["final_norm"])
    kv("position", f["position"])
    if f.get("embed_scale"):
        kv("embed_scale", f["embed_scale"])
    if f.get("embed_norm") is not None:
        kv("embed_norm", "eps %s" % fmt_num(f["embed_norm"]))
    if f.get("token_types"):
        kv("token_types", f["token_types"])
    if f.get("tokens"):
        kv("tokens", " ".join("%s %d" % kv_ for kv_ in f["tokens"]))
    for m in f.get("masks", []):
        kv("mask", m)
    kv("head", f["head"])
    lines.append("}")
    return "\n".join(lines) + "\n"


def n_layers(f):
    ly = f["layers"]
    if f["arch"] == "encoder_decoder":
        return ly if isinstance(ly, tuple) else (ly, ly)
    return (ly, 0) if f["arch"] == "encoder" else (0, ly)


def canonical_targets(f):
    """The weight-map targets a model with these facts has (README
    "Canonical parameter names"), with [i] expanded. Returns (required,
    optional) sets; a tied head is optional (its stored copy may be absent)."""
    arch = f["arch"]
    two = arch == "encoder_decoder"
    req, opt = set(), set()
    req |= {"src_embed", "tgt_embed"} if two else {"embed"}
    if f["position"].startswith("learned"):
        req |= {"src_pos", "tgt_pos"} if two else {"pos"}
    if f.get("token_types"):
        req.add("token_type")
    if f.get("embed_norm") is not None:
        req |= {"src_embed_norm", "tgt_embed_norm"} if two else {"embed_norm"}
    n_enc, n_dec = n_layers(f)
    for i in range(n_enc):
        req |= {"enc[%d].%s" % (i, s) for s in
                ("attn.q", "attn.k", "attn.v", "attn.o", "norm1", "norm2", "ffn.w1", "ffn.w2")}
    for i in range(n_dec):
        req |= {"dec[%d].%s" % (i, s) for s in
                ("attn.q", "attn.k", "attn.v", "attn.o", "norm1", "norm2", "ffn.w1", "ffn.w2")}
        if two:
            req |= {"dec[%d].%s" % (i, s) for s in
                    ("cross.q", "cross.k", "cross.v", "cross.o", "norm3")}
    fn = (f.get("final_norm") or "no").split()
    if fn == ["yes"]:
        fn = {"encoder": ["encoder"], "decoder": ["decoder"]}.get(arch, ["encoder", "decoder"])
    if "encoder" in fn:
        req.add("enc.norm")
    if "decoder" in fn:
        req.add("dec.norm")
    head = f["head"].split()
    if head[0] in ("logits", "log_softmax"):
        (opt if "tied" in head else req).add("head")
    elif head[0] == "classifier":
        req.add("classifier")
        if "pooler" in head:
            req.add("pooler")
    return req, opt


def preset_texts():
    """{preset name: (base, rule text)} parsed out of frontend/presets.c."""
    with open(os.path.join(ROOT, "frontend", "presets.c")) as fh:
        src = fh.read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    out = {}
    for m in re.finditer(r'\{\s*"([^"]+)"\s*,\s*"([^"]*)"\s*,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}',
                         src):
        pieces = re.findall(r'"(?:[^"\\]|\\.)*"', m.group(3))
        out[m.group(1)] = (m.group(2), "".join(ast.literal_eval(p) for p in pieces))
    return out


def preset_source(base, root, source):
    """spec_preset_source: the root replaces the preset's base prefix; a
    source outside the base (an HF task head) is kept."""
    if root is None or not source.startswith(base):
        return source
    return root + source[len(base):]


def parse_rules(text, where):
    """Weight-block lines -> (preset, root, rules, ignores); root is None when
    not given. A rule is (target, xform, source, weight_suffix, bias_suffix)."""
    preset, root, rules, ignores = None, None, [], []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        tok = shlex.split(line)
        if tok[0] == "preset":
            preset = tok[1]
            if len(tok) == 4 and tok[2] == "root":
                root = tok[3]
        elif tok[0] == "ignore":
            ignores.append(tok[1])
        elif len(tok) >= 4 and tok[1] == "=":
            target, xform, source = tok[0], tok[2], tok[3]
            w, b = "weight", "bias"
            rest = tok[4:]
            while rest:
                if rest[0] == "weight":
                    w, rest = rest[1], rest[2:]
                elif rest[0] == "bias":
                    b, rest = rest[1], rest[2:]
                elif rest[0] == "no_bias":
                    b, rest = "", rest[1:]
                else:
                    raise ValueError("%s: cannot read rule %r" % (where, line))
            rules.append((target, xform, source, w, b))
        else:
            raise ValueError("%s: cannot read line %r" % (where, line))
    return preset, root, rules, ignores


def rule_sources(rule, i, heads):
    _, xform, src, w, b = rule
    src = src.replace("{i}", str(i))
    if xform in ("tensor", "tied"):
        return [src]
    if xform == "heads":
        srcs = [src.replace("{h}", str(h)) for h in range(heads)]
    elif xform in ("linear", "conv1d", "norm", "split", "split_conv1d"):
        srcs = [src]
    else:
        raise ValueError("unknown transform %r" % xform)
    return [s + "." + w for s in srcs] + ([s + "." + b for s in srcs] if b else [])


def rule_covers(target, i):
    """The concrete targets a rule target covers for layer i."""
    t = target.replace("[i]", "[%d]" % i)
    if t.endswith(".qkv"):
        return [t[:-3] + c for c in "qkv"]
    return [t]


def check_weight_map(name, facts, weights_text, state_names):
    """Emulates the weight map (preset from presets.c + explicit rules, with
    root and ignore patterns) against the real state_dict names."""
    presets = preset_texts()
    preset, root, rules, ignores = parse_rules(weights_text, name)
    explicit = [(r, False) for r in rules]
    pre = []
    if preset:
        if preset not in presets:
            raise RuntimeError("%s: preset %r not in frontend/presets.c" % (name, preset))
        base, ptext = presets[preset]
        _, _, prules, pign = parse_rules(ptext, "preset " + preset)
        pre = [((t, x, preset_source(base, root, s), w, b), True)
               for (t, x, s, w, b) in prules]
        ignores = ignores + [preset_source(base, root, p) for p in pign]
    req, opt = canonical_targets(facts)
    have = req | opt
    n_enc, n_dec = n_layers(facts)
    covered = {}     # concrete target -> rule
    produced = {}    # tensor name -> concrete target
    problems = []
    for rule, from_preset in explicit + pre:
        target = rule[0]
        layers = [0]
        if target.startswith("enc[i]"):
            layers = range(n_enc)
        elif target.startswith("dec[i]"):
            layers = range(n_dec)
        for i in layers:
            concrete = [t for t in rule_covers(target, i) if t in have]
            if not concrete:
                if not from_preset:
                    problems.append("explicit rule for %s: the model has no such target" % target)
                continue
            if any(t in covered for t in concrete):
                if from_preset:
                    continue  # an explicit rule overrides this preset rule
                problems.append("two rules for %s" % target)
                continue
            for t in concrete:
                covered[t] = rule
            for s in rule_sources(rule, i, facts["heads"]):
                if s in produced:
                    problems.append("%s read by two rules" % s)
                produced[s] = concrete[0]
    for t in sorted(req - set(covered)):
        problems.append("no rule for target %s" % t)
    for s in sorted(produced):
        if s not in state_names:
            problems.append("map wants %s (for %s), not in the state_dict" % (s, produced[s]))
    pats = [re.compile(re.escape(p).replace(r"\{i\}", r"\d+").replace(r"\{h\}", r"\d+")
                       .replace(r"\*", ".*")) for p in ignores]
    n_ignored = 0
    for s in sorted(state_names):
        if s in produced:
            continue
        if any(p.fullmatch(s) for p in pats):
            n_ignored += 1
            continue
        problems.append("state_dict tensor %s is neither mapped nor ignored" % s)
    if problems:
        raise RuntimeError("%s: weight map does not fit the state_dict:\n  %s" %
                           (name, "\n  ".join(problems)))
    return len(produced), n_ignored


# ============================================================================
# The goldens
# ============================================================================


class Golden:
    """One golden: how to build the model, its inputs, its forward pass (as
    tfmc outputs), and the facts its spec is written from."""

    def __init__(self, name, facts, weights, args, build, make_inputs, forward,
                 seq_of_input, seq_of_output, weight_dtype="F32", extra_check=None,
                 header=""):
        self.name, self.facts, self.weights, self.args = name, facts, weights, args
        self.build, self.make_inputs, self.forward = build, make_inputs, forward
        self.seq_of_input = seq_of_input    # input name -> "src"|"tgt"|"tok" (axis 1) or "len"
        self.seq_of_output = seq_of_output  # output name -> seq key per axis from 1 (or None)
        self.weight_dtype = weight_dtype
        self.extra_check = extra_check
        self.header = header

    def spec_text(self):
        out = self.header.rstrip() + "\n" if self.header else ""
        out += model_block(self.name, self.facts)
        out += "\nweights %s {\n" % self.name
        out += "".join("  %s\n" % l for l in self.weights.strip().splitlines())
        out += "}\n"
        return out


def golden_annotated():
    PAD, BOS, EOS = 2, 0, 1  # the Multi30k example's <blank>, <s>, </s>
    SV, TV, D, H, N, FF = 50, 60, 32, 4, 2, 64
    src_len, tgt_len = [5, 7, 3], [6, 2, 4]

    def build(gen):
        model = ann_make_model(SV, TV, N=N, d_model=D, d_ff=FF, h=H, max_len=100)
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"src": padded_ids(gen, src_len, 7, 3, SV, PAD, torch.int64, BOS, EOS),
                "tgt": padded_ids(gen, tgt_len, 6, 3, TV, PAD, torch.int64, BOS, EOS)}

    def forward(model, inp):
        src, tgt = inp["src"], inp["tgt"]
        src_mask = (src != PAD).unsqueeze(-2)
        tgt_mask = (tgt != PAD).unsqueeze(-2)
        tgt_mask = tgt_mask & ann_subsequent_mask(tgt.size(-1)).type_as(tgt_mask.data)
        out = model.forward(src, tgt, src_mask, tgt_mask)
        return {"log_probs": model.generator(out),
                "attention": model.decoder.layers[0].self_attn.attn}

    def extra(model, inp, outs):
        # The unbiased-std LayerNorm must matter: nn.LayerNorm's flavour
        # gives a visibly different answer on this golden.
        m = clone_model(model)
        for mod in m.modules():
            if isinstance(mod, AnnLayerNorm):
                mod.forward = (lambda x, ln=mod: F.layer_norm(x, (x.size(-1),), ln.a_2,
                                                              ln.b_2, ln.eps))
        diff = (forward(m, inp)["log_probs"] - outs["log_probs"]).abs().max()
        assert diff > 1e-3, "LayerNorm flavour does not matter (%g)" % diff
        return "LN-flavour diff %.3g" % diff

    facts = dict(arch="encoder_decoder", vocab=(SV, TV), d_model=D, heads=H, layers=N,
                 ffn=(FF, "relu"), norm=("pre", 1e-6, True), final_norm="encoder decoder",
                 position="sinusoidal", embed_scale="sqrt_d_model",
                 tokens=[("pad", PAD), ("bos", BOS), ("eos", EOS)],
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="log_softmax")
    return Golden("annotated", facts, 'preset "annotated"', "--attention decoder.0",
                  build, make_inputs, forward,
                  {"src": "src", "tgt": "tgt"},
                  {"log_probs": ("tgt",), "attention": (None, "tgt", "tgt")},
                  extra_check=extra,
                  header="# The Annotated Transformer (harvardnlp, 2022): make_model(50, 60, N=2,\n"
                         "# d_model=32, d_ff=64, h=4), PositionalEncoding max_len 100; masks from\n"
                         "# the pad id as its Batch class builds them.")


def golden_seq2seq():
    PAD, SOS, EOS = 1, 2, 3
    IN, OUT, D, H, PF = 45, 55, 32, 4, 64
    ENC_L, DEC_L = 2, 3
    src_len, tgt_len = [6, 8, 4], [5, 3, 7]

    def build(gen):
        dev = torch.device("cpu")
        enc = S2SEncoder(IN, D, ENC_L, H, PF, 0.1, dev)
        dec = S2SDecoder(OUT, D, DEC_L, H, PF, 0.1, dev)
        model = S2SSeq2Seq(enc, dec, PAD, PAD, dev)
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"src": padded_ids(gen, src_len, 8, 4, IN, PAD, torch.int64, SOS, EOS),
                "tgt": padded_ids(gen, tgt_len, 7, 4, OUT, PAD, torch.int32, SOS, EOS)}

    def forward(model, inp):
        if next(model.parameters()).dtype == torch.float64:
            # the codebase's sqrt(hid_dim) buffers are float32 tensors
            for m in model.modules():
                if hasattr(m, "scale") and torch.is_tensor(m.scale):
                    m.scale = m.scale.double()
        output, attention = model(inp["src"], inp["tgt"].long())
        return {"logits": output, "attention": attention}

    facts = dict(arch="encoder_decoder", vocab=(IN, OUT), d_model=D, heads=H,
                 layers=(ENC_L, DEC_L), ffn=(PF, "relu"), norm=("post", 1e-5, False),
                 position="learned max 100", embed_scale="sqrt_d_model",
                 tokens=[("pad", PAD), ("bos", SOS), ("eos", EOS)],
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="logits")
    return Golden("seq2seq", facts, 'preset "pytorch-seq2seq"',
                  "--attention decoder.%d.cross" % (DEC_L - 1),
                  build, make_inputs, forward,
                  {"src": "src", "tgt": "tgt"},
                  {"logits": ("tgt",), "attention": (None, "tgt", "src")},
                  header="# bentrevett/pytorch-seq2seq \"6 - Attention is All You Need\": Seq2Seq with\n"
                         "# hid_dim 32, 2 encoder / 3 decoder layers, 4 heads, pf_dim 64, pad 1;\n"
                         "# the returned attention is the last decoder layer's cross-attention.")


def golden_anatomy():
    cfg = types.SimpleNamespace(vocab_size=80, hidden_size=48, num_attention_heads=4,
                                intermediate_size=96, hidden_dropout_prob=0.1,
                                max_position_embeddings=32, num_hidden_layers=2, num_labels=3)

    def build(gen):
        model = AnatTransformerForSequenceClassification(cfg)
        randomise(model, gen, embed_std=0.03)
        round_params(model, "F16")
        return model

    def make_inputs(gen):
        return {"tokens": torch.randint(0, cfg.vocab_size, (3, 9), generator=gen)}

    def forward(model, inp):
        probe = []
        for head in model.encoder.layers[0].attention.heads:
            head.probe = probe
        try:
            logits = model(inp["tokens"])
        finally:
            for head in model.encoder.layers[0].attention.heads:
                head.probe = None
        return {"class_logits": logits, "attention": torch.stack(probe, dim=1)}

    def extra(model, inp, outs):
        # per-head modules == one fused projection split into heads
        x = model.encoder.embeddings(inp["tokens"])
        worst = 0.0
        for layer in model.encoder.layers:
            hs = layer.layer_norm_1(x)
            mha = layer.attention
            wq = torch.cat([h.q.weight for h in mha.heads]); bq = torch.cat([h.q.bias for h in mha.heads])
            wk = torch.cat([h.k.weight for h in mha.heads]); bk = torch.cat([h.k.bias for h in mha.heads])
            wv = torch.cat([h.v.weight for h in mha.heads]); bv = torch.cat([h.v.bias for h in mha.heads])
            B, S, D = hs.shape
            Hn = len(mha.heads)
            split = (lambda t: t.view(B, S, Hn, D // Hn).transpose(1, 2))
            q, k, v = split(F.linear(hs, wq, bq)), split(F.linear(hs, wk, bk)), split(F.linear(hs, wv, bv))
            p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // Hn), dim=-1)
            fused = mha.output_linear((p @ v).transpose(1, 2).reshape(B, S, D))
            worst = max(worst, float((fused - mha(hs)).abs().max()))
            x = layer(x)
        assert worst < 1e-9, "per-head vs fused attention differ by %g" % worst
        return "per-head vs fused %.1e; %s" % (worst, eps_matters(
            model, forward, inp, outs, "encoder.embeddings.layer_norm"))

    facts = dict(arch="encoder", vocab=cfg.vocab_size, d_model=cfg.hidden_size,
                 heads=cfg.num_attention_heads, layers=cfg.num_hidden_layers,
                 ffn=(cfg.intermediate_size, "gelu"), norm=("pre", 1e-5, False),
                 position="learned max %d" % cfg.max_position_embeddings, embed_norm=1e-12,
                 head="classifier %d" % cfg.num_labels)
    return Golden("anatomy", facts, 'preset "anatomy"', "--attention encoder.0",
                  build, make_inputs, forward, {"tokens": "tok"},
                  {"class_logits": (), "attention": (None, "tok", "tok")},
                  weight_dtype="F16", extra_check=extra,
                  header="# \"NLP with Transformers\" ch. 3 TransformerForSequenceClassification: per-head\n"
                         "# AttentionHead q/k/v, pre-norm, embeddings LayerNorm eps 1e-12, no padding.\n"
                         "# Weights stored as F16.")


def golden_bert():
    cfg = types.SimpleNamespace(vocab_size=90, hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=128,
                                max_position_embeddings=40, type_vocab_size=2,
                                layer_norm_eps=1e-12, pad_token_id=0, num_labels=3,
                                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    CLS, SEP = 1, 2
    lens = [10, 6, 8]

    def build(gen):
        model = BertForSequenceClassification(cfg)
        randomise(model, gen, embed_std=0.02)
        return model

    def make_inputs(gen):
        ids = padded_ids(gen, lens, 10, 3, cfg.vocab_size, 0, torch.int64, CLS, SEP)
        types_ = torch.zeros_like(ids)
        for b, n in enumerate(lens):
            types_[b, n // 2:n] = 1   # second segment
        return {"tokens": ids, "token_types": types_,
                "mask": mask_from_lengths(lens, 10, torch.int64)}

    def forward(model, inp):
        logits, probs = model(inp["tokens"], inp["mask"], inp["token_types"])
        return {"class_logits": logits, "attention": probs[1]}

    facts = dict(arch="encoder", vocab=cfg.vocab_size, d_model=cfg.hidden_size,
                 heads=cfg.num_attention_heads, layers=cfg.num_hidden_layers,
                 ffn=(cfg.intermediate_size, "gelu"), norm=("post", 1e-12, False),
                 position="learned max %d" % cfg.max_position_embeddings, embed_norm=1e-12,
                 token_types=cfg.type_vocab_size, tokens=[("pad", 0)],
                 masks=["encoder padding"], head="classifier %d pooler" % cfg.num_labels)
    def extra(model, inp, outs):
        return eps_matters(model, forward, inp, outs, "bert.embeddings.LayerNorm")

    return Golden("bert", facts, 'preset "hf-bert"', "--attention encoder.1",
                  build, make_inputs, forward,
                  {"tokens": "tok", "token_types": "tok", "mask": "tok"},
                  {"class_logits": (), "attention": (None, "tok", "tok")},
                  extra_check=extra,
                  header="# Hugging Face BertForSequenceClassification (HF module names, post-norm,\n"
                         "# GELU erf, pooler + classifier), extended mask (1 - m) * finfo.min.")


def golden_gpt2():
    cfg = types.SimpleNamespace(vocab_size=100, n_positions=64, n_embd=32, n_head=4, n_layer=2,
                                layer_norm_epsilon=1e-5, attn_pdrop=0.1, resid_pdrop=0.1,
                                embd_pdrop=0.1)
    lens = [9, 4, 6]

    def build(gen):
        model = GPT2LMHeadModel(cfg)
        randomise(model, gen, embed_std=0.05)
        assert model.lm_head.weight is model.transformer.wte.weight
        return model

    def make_inputs(gen):
        return {"tokens": padded_ids(gen, lens, 9, 0, cfg.vocab_size, None, torch.int64),
                "lengths": torch.tensor(lens, dtype=torch.int64)}

    def forward(model, inp):
        mask = mask_from_lengths(inp["lengths"].tolist(), inp["tokens"].size(1), torch.int64)
        logits, weights = model(inp["tokens"], mask)
        return {"logits": logits, "attention": weights[0]}

    def extra(model, inp, outs):
        # causal: changing token 3 of the first (full-length) row leaves
        # positions 0..2 untouched and changes positions 3.. .
        changed = {k: v.clone() for k, v in inp.items()}
        changed["tokens"][0, 3] = (changed["tokens"][0, 3] + 7) % cfg.vocab_size
        after = forward(model, changed)["logits"]
        before = outs["logits"]
        past = float((after[0, :3] - before[0, :3]).abs().max())
        future = float((after[0, 3:] - before[0, 3:]).abs().max())
        assert past < 1e-12 and future > 1e-3, "causality check failed (%g, %g)" % (past, future)
        return "causal past %.1e future %.2f; %s" % (past, future, eps_matters(
            model, forward, inp, outs, "transformer.h.0.ln_1"))

    facts = dict(arch="decoder", vocab=cfg.vocab_size, d_model=cfg.n_embd, heads=cfg.n_head,
                 layers=cfg.n_layer, ffn=(4 * cfg.n_embd, "gelu_tanh"),
                 norm=("pre", 1e-5, False), final_norm="yes",
                 position="learned max %d" % cfg.n_positions,
                 masks=["decoder causal padding"], head="logits tied")
    return Golden("gpt2", facts, 'preset "hf-gpt2"', "--attention decoder.0",
                  build, make_inputs, forward, {"tokens": "tok", "lengths": "len"},
                  {"logits": ("tok",), "attention": (None, "tok", "tok")},
                  extra_check=extra,
                  header="# Hugging Face GPT2LMHeadModel (HF names, Conv1D weights, fused c_attn,\n"
                         "# gelu_new, ln_f, lm_head tied to wte and stored as a copy), padding\n"
                         "# through lengths -> attention_mask.")


def torch_capture_forward(run, attention):
    """Wraps a torch.nn forward so the named layer's probabilities are
    exported as "attention" and checked against the layer's output."""
    def forward(model, inp):
        if not attention:
            return run(model, inp)
        with AttentionCapture(torch_layer_mha(model, attention)) as cap:
            outs = run(model, inp)
        tol = 1e-9 if next(model.parameters()).dtype == torch.float64 else 1e-4
        assert cap.consistency_err < tol, "captured attention inconsistent (%g)" % cap.consistency_err
        outs["attention"] = cap.probs
        return outs
    return forward


def golden_torchnn_encoder_post_relu():
    V, D, H, FF, L = 70, 32, 4, 64, 2
    lens = [8, 5, 2]

    def build(gen):
        model = TorchEncoderModel(V, D, H, FF, L, norm_first=False, activation="relu",
                                  final_norm=False)
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"tokens": padded_ids(gen, lens, 8, 0, V, None, torch.int32),
                "lengths": torch.tensor(lens, dtype=torch.int32)}

    def run(model, inp):
        kpm = kpm_from_lengths(inp["lengths"].tolist(), inp["tokens"].size(1))
        return {"logits": model(inp["tokens"], kpm)}

    facts = dict(arch="encoder", vocab=V, d_model=D, heads=H, layers=L, ffn=(FF, "relu"),
                 norm=("post", 1e-5, False), position="sinusoidal",
                 masks=["encoder padding"], head="logits")
    return Golden("torchnn_encoder_post_relu", facts,
                  'preset "torch.nn"\nembed = tensor "embed.weight"\nhead = linear "head"',
                  "--attention encoder.1", build, make_inputs,
                  torch_capture_forward(run, "encoder.1"),
                  {"tokens": "tok", "lengths": "len"},
                  {"logits": ("tok",), "attention": (None, "tok", "tok")},
                  header="# nn.Embedding + sinusoidal positions + nn.TransformerEncoder(post-norm,\n"
                         "# relu, 2 layers, norm=None) + Linear head; padding through lengths.")


def golden_torchnn_encoder_pre_gelu_final():
    V, D, H, FF, L, C = 60, 48, 6, 96, 3, 4
    lens = [4, 7, 6]

    def build(gen):
        model = TorchEncoderModel(V, D, H, FF, L, norm_first=True, activation="gelu",
                                  final_norm=True, n_classes=C, embed_name="tok_emb",
                                  head_name="classifier")
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"tokens": padded_ids(gen, lens, 7, 0, V, None, torch.int64),
                "mask": mask_from_lengths(lens, 7, torch.int32)}

    def forward(model, inp):
        return {"class_logits": model(inp["tokens"], inp["mask"] == 0)}

    facts = dict(arch="encoder", vocab=V, d_model=D, heads=H, layers=L, ffn=(FF, "gelu"),
                 norm=("pre", 1e-5, False), final_norm="yes", position="sinusoidal",
                 masks=["encoder padding"], head="classifier %d" % C)
    return Golden("torchnn_encoder_pre_gelu_final", facts,
                  'preset "torch.nn"\nembed = tensor "tok_emb.weight"\n'
                  'classifier = linear "classifier"', "",
                  build, make_inputs, forward, {"tokens": "tok", "mask": "tok"},
                  {"class_logits": ()},
                  header="# nn.TransformerEncoder(norm_first=True, gelu, 3 layers, 6 heads,\n"
                         "# norm=nn.LayerNorm) + classifier on position 0; padding through mask.")


def golden_torchnn_transformer():
    SV, TV, D, H, FF, L = 50, 40, 32, 4, 64, 2
    src_len, tgt_len = [6, 3, 5], [2, 5, 4]

    def build(gen):
        model = TorchTransformerModel(SV, TV, D, H, L, L, FF, norm_first=False,
                                      activation="relu", log_softmax=False)
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"src": padded_ids(gen, src_len, 6, 0, SV, None, torch.int64),
                "tgt": padded_ids(gen, tgt_len, 5, 0, TV, None, torch.int64),
                "src_lengths": torch.tensor(src_len, dtype=torch.int64),
                "tgt_lengths": torch.tensor(tgt_len, dtype=torch.int64)}

    def run(model, inp):
        skpm = kpm_from_lengths(inp["src_lengths"].tolist(), inp["src"].size(1))
        tkpm = kpm_from_lengths(inp["tgt_lengths"].tolist(), inp["tgt"].size(1))
        return {"logits": model(inp["src"], inp["tgt"], skpm, tkpm)}

    facts = dict(arch="encoder_decoder", vocab=(SV, TV), d_model=D, heads=H, layers=L,
                 ffn=(FF, "relu"), norm=("post", 1e-5, False), final_norm="encoder decoder",
                 position="sinusoidal", embed_scale="sqrt_d_model",
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="logits")
    return Golden("torchnn_transformer", facts,
                  'preset "torch.nn" root "transformer."\n'
                  'src_embed = tensor "src_tok.weight"\ntgt_embed = tensor "tgt_tok.weight"\n'
                  'head = linear "generator"',
                  "--attention decoder.1", build, make_inputs,
                  torch_capture_forward(run, "decoder.1"),
                  {"src": "src", "tgt": "tgt", "src_lengths": "len", "tgt_lengths": "len"},
                  {"logits": ("tgt",), "attention": (None, "tgt", "tgt")},
                  header="# nn.Transformer(batch_first, post-norm, relu; encoder and decoder final\n"
                         "# norms) with src/tgt embeddings * sqrt(d_model), sinusoidal positions and\n"
                         "# a generator Linear; padding through src_lengths / tgt_lengths.")


def golden_torchnn_transformer_prenorm_gelu():
    SV, TV, D, H, FF = 44, 52, 48, 4, 80
    ENC_L, DEC_L = 1, 2
    src_len, tgt_len = [7, 2, 5], [3, 6, 1]

    def build(gen):
        model = TorchTransformerModel(SV, TV, D, H, ENC_L, DEC_L, FF, norm_first=True,
                                      activation="gelu", log_softmax=True)
        randomise(model, gen)
        return model

    def make_inputs(gen):
        return {"src": padded_ids(gen, src_len, 7, 0, SV, None, torch.int32),
                "tgt": padded_ids(gen, tgt_len, 6, 0, TV, None, torch.int32),
                "src_mask": mask_from_lengths(src_len, 7, torch.int32),
                "tgt_mask": mask_from_lengths(tgt_len, 6, torch.int32)}

    def run(model, inp):
        return {"log_probs": model(inp["src"], inp["tgt"], inp["src_mask"] == 0,
                                   inp["tgt_mask"] == 0)}

    facts = dict(arch="encoder_decoder", vocab=(SV, TV), d_model=D, heads=H,
                 layers=(ENC_L, DEC_L), ffn=(FF, "gelu"), norm=("pre", 1e-5, False),
                 final_norm="encoder decoder", position="sinusoidal",
                 embed_scale="sqrt_d_model",
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="log_softmax")
    return Golden("torchnn_transformer_prenorm_gelu", facts,
                  'preset "torch.nn" root "transformer."\n'
                  'src_embed = tensor "src_tok.weight"\ntgt_embed = tensor "tgt_tok.weight"\n'
                  'head = linear "generator"',
                  "--attention decoder.0.cross", build, make_inputs,
                  torch_capture_forward(run, "decoder.0.cross"),
                  {"src": "src", "tgt": "tgt", "src_mask": "src", "tgt_mask": "tgt"},
                  {"log_probs": ("tgt",), "attention": (None, "tgt", "src")},
                  header="# nn.Transformer(batch_first, norm_first=True, gelu, 1 encoder / 2 decoder\n"
                         "# layers) + log_softmax generator; padding through src_mask / tgt_mask.")


def golden_torchnn_encdec_modules():
    SV, TV, D, H, FF, L, MAXLEN, PAD = 48, 56, 40, 5, 72, 2, 32, 0
    src_len, tgt_len = [6, 4, 1], [5, 3, 2]

    def build(gen):
        model = TorchEncDecModel(SV, TV, D, H, L, FF, MAXLEN)
        randomise(model, gen)
        round_params(model, "BF16")
        return model

    def make_inputs(gen):
        return {"src": padded_ids(gen, src_len, 6, 1, SV, PAD, torch.int32),
                "tgt": padded_ids(gen, tgt_len, 5, 1, TV, PAD, torch.int32)}

    def run(model, inp):
        src, tgt = inp["src"], inp["tgt"]
        return {"logits": model(src, tgt, src == PAD, tgt == PAD)}

    facts = dict(arch="encoder_decoder", vocab=(SV, TV), d_model=D, heads=H, layers=L,
                 ffn=(FF, "relu"), norm=("post", 1e-5, False), final_norm="decoder",
                 position="learned max %d" % MAXLEN, tokens=[("pad", PAD)],
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="logits")
    return Golden("torchnn_encdec_modules", facts,
                  'preset "torch.nn"\n'
                  'src_embed = tensor "src_tok.weight"\ntgt_embed = tensor "tgt_tok.weight"\n'
                  'src_pos = tensor "src_pos.weight"\ntgt_pos = tensor "tgt_pos.weight"\n'
                  'head = linear "generator"',
                  "--attention encoder.0", build, make_inputs,
                  torch_capture_forward(run, "encoder.0"),
                  {"src": "src", "tgt": "tgt"},
                  {"logits": ("tgt",), "attention": (None, "src", "src")},
                  weight_dtype="BF16",
                  header="# Separate nn.TransformerEncoder (norm=None) and nn.TransformerDecoder\n"
                         "# (norm=nn.LayerNorm), post-norm relu, 5 heads, learned positions, no\n"
                         "# embedding scale; int32 ids, masks from pad id 0; weights stored as BF16.")



# ---- named intermediates as outputs (tfmc run/build --output NAME) ----


class OutputCapture:
    """Forward hooks that keep what the named modules return (the first
    element of a tuple), as tfmc's named intermediates; a module named as
    ("input", module) gives what it is called with (its first argument)."""

    def __init__(self, named_modules):
        self.named_modules, self.values, self.hooks = named_modules, {}, []

    def __enter__(self):
        for name, mod in self.named_modules:
            if isinstance(mod, tuple):
                def pre(m, args, name=name):
                    self.values[name] = args[0]
                self.hooks.append(mod[1].register_forward_pre_hook(pre))
                continue
            def hook(m, args, out, name=name):
                self.values[name] = out[0] if isinstance(out, tuple) else out
            self.hooks.append(mod.register_forward_hook(hook))
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()


def with_intermediates(g, name, modules_of, aliases):
    """Golden g's model and inputs with intermediates as extra outputs:
    modules_of(model) -> [(tfmc name, module)]; aliases: {name: captured
    name} for names that are the same value (hidden = encoder.out)."""
    base = g.forward

    def forward(model, inp):
        with OutputCapture(modules_of(model)) as cap:
            outs = base(model, inp)
        outs.pop("attention", None)
        outs.update(cap.values)
        for alias, of in aliases.items():
            outs[alias] = cap.values[of]
        return outs

    extra = [n for n, _ in modules_of(g.build(torch.Generator().manual_seed(0)))]
    wanted = extra + list(aliases)
    seq = {k: v for k, v in g.seq_of_output.items() if k != "attention"}
    return Golden(name, g.facts, g.weights, " ".join("--output " + w for w in sorted(wanted)),
                  g.build, g.make_inputs, forward, g.seq_of_input, seq,
                  header=g.header + "\n# Its named intermediates as outputs (--output).")


def golden_bert_outputs():
    g = golden_bert()
    tok = ("tok", None)

    def modules_of(model):
        bert = model.bert
        return [("embeddings", bert.embeddings), ("enc.0.out", bert.encoder.layer[0]),
                ("encoder.out", bert.encoder.layer[-1]), ("pooled", bert.pooler)]

    out = with_intermediates(g, "bert_outputs", modules_of, {"hidden": "encoder.out"})
    out.seq_of_output.update({"embeddings": tok, "enc.0.out": tok, "encoder.out": tok,
                              "hidden": tok, "pooled": (None,)})
    return out


def golden_gpt2_outputs():
    g = golden_gpt2()
    tok = ("tok", None)

    def modules_of(model):
        t = model.transformer
        return [("embeddings", t.drop), ("dec.0.out", t.h[0]), ("dec.1.out", t.h[1]),
                ("decoder.out", t.ln_f)]

    out = with_intermediates(g, "gpt2_outputs", modules_of, {"hidden": "decoder.out"})
    out.seq_of_output.update({"embeddings": tok, "dec.0.out": tok, "dec.1.out": tok,
                              "decoder.out": tok, "hidden": tok})
    return out

def golden_torchnn_transformer_outputs():
    g = golden_torchnn_transformer()
    src, tgt = ("src", None), ("tgt", None)

    def modules_of(model):
        t = model.transformer
        return [("src_embeddings", ("input", t.encoder)), ("enc.1.out", t.encoder.layers[1]),
                ("encoder.out", t.encoder), ("tgt_embeddings", ("input", t.decoder)),
                ("dec.0.out", t.decoder.layers[0]), ("decoder.out", t.decoder)]

    out = with_intermediates(g, "torchnn_transformer_outputs", modules_of,
                             {"hidden": "decoder.out"})
    out.seq_of_output.update({"src_embeddings": src, "enc.1.out": src, "encoder.out": src,
                              "tgt_embeddings": tgt, "dec.0.out": tgt, "decoder.out": tgt,
                              "hidden": tgt})
    return out


GOLDENS = [golden_annotated, golden_seq2seq, golden_anatomy, golden_bert,
           golden_torchnn_encoder_post_relu, golden_torchnn_encoder_pre_gelu_final,
           golden_torchnn_transformer, golden_torchnn_transformer_prenorm_gelu,
           golden_torchnn_encdec_modules, golden_gpt2,
           golden_bert_outputs, golden_gpt2_outputs, golden_torchnn_transformer_outputs]

# ============================================================================
# Checks and writing
# ============================================================================

# Key-projection biases add q.b_k to every score of a query row: softmax
# ignores them, so no test can see them.
INVARIANT_PARAMS = re.compile(r"(linears\.1\.bias|fc_k\.bias|\.k\.bias|\.key\.bias)$")


def clone_model(model):
    """deepcopy, after dropping tensors a forward pass left on modules (the
    Annotated MultiHeadedAttention keeps its last probabilities in .attn,
    which deepcopy refuses)."""
    for mod in model.modules():
        if isinstance(mod, AnnMultiHeadedAttention):
            mod.attn = None
    return copy.deepcopy(model)


def eps_matters(model, forward, inputs, outs, path):
    """The LayerNorm at `path` (attribute path) must see inputs of small
    enough variance that moving its eps between 1e-12 and 1e-5 changes the
    outputs visibly: a backend that drops or mistypes eps fails."""
    m = clone_model(model)
    ln = m
    for part in path.split("."):
        ln = ln[int(part)] if part.isdigit() else getattr(ln, part)
    ln.eps = 1e-5 if ln.eps < 1e-6 else 1e-12
    moved = detach_all(forward(m, inputs))
    delta = max(float((moved[k] - outs[k]).abs().max()) for k in outs)
    assert delta > 1e-3, "eps of %s does not matter (%g)" % (path, delta)
    return "eps(%s) %.2g" % (path, delta)


def detach_all(outs):
    return {k: v.detach() for k, v in outs.items()}


def slice_for(g, inputs, b):
    """Sequence b alone, without its padding."""
    lens = {}
    for name, kind in g.seq_of_input.items():
        if kind in ("src", "tgt", "tok"):
            t = inputs[name]
            if name in ("mask", "src_mask", "tgt_mask"):
                lens[kind] = int(t[b].sum())
    for name, kind in g.seq_of_input.items():
        if kind == "len":
            key = {"lengths": "tok", "src_lengths": "src", "tgt_lengths": "tgt"}[name]
            lens[key] = int(inputs[name][b])
    pad = dict(g.facts.get("tokens") or []).get("pad")
    for name, kind in g.seq_of_input.items():
        if kind in ("src", "tgt", "tok") and kind not in lens and pad is not None:
            lens[kind] = int((inputs[name][b] != pad).sum())
    for name, kind in g.seq_of_input.items():
        if kind in ("src", "tgt", "tok") and kind not in lens:
            lens[kind] = inputs[name].size(1)  # no padding at all
    single = {}
    for name, kind in g.seq_of_input.items():
        t = inputs[name][b:b + 1]
        single[name] = t if kind == "len" else t[:, :lens[kind]]
    return single, lens


def parse_spec_file(path):
    """(model name, facts, weights-block text) of a spec, read just far
    enough for the weight-map check (not a validator: tfmc check is)."""
    with open(path) as fh:
        text = fh.read()
    m = re.search(r"^model\s+(\w+)\s*\{(.*?)^\}", text, re.S | re.M)
    w = re.search(r"^weights\s+\w+\s*\{(.*?)^\}", text, re.S | re.M)
    if not m or not w:
        raise RuntimeError("%s: no model or weights block" % path)
    kv = {}
    for line in m.group(2).splitlines():
        tok = line.split("#", 1)[0].split()
        if tok:
            kv.setdefault(tok[0], []).append(tok[1:])
    one = {k: v[0] for k, v in kv.items()}
    layers = one["layers"]
    facts = dict(arch=one["arch"][0], heads=int(one["heads"][0]),
                 layers=(int(layers[1]), int(layers[3])) if layers[0] == "encoder"
                 else int(layers[0]),
                 position=" ".join(one["position"]),
                 token_types=int(one["token_types"][0]) if "token_types" in one else 0,
                 embed_norm=1e-5 if "embed_norm" in one else None,
                 final_norm=" ".join(one["final_norm"]) if "final_norm" in one else None,
                 head=" ".join(one["head"]))
    return m.group(1), facts, w.group(1)


def example_layouts():
    """{example file: a tiny model with the parameter layout of the model the
    example describes (same layer and head counts, tiny widths)}."""
    bert = types.SimpleNamespace(vocab_size=8, hidden_size=24, num_hidden_layers=12,
                                 num_attention_heads=12, intermediate_size=8,
                                 max_position_embeddings=8, type_vocab_size=2,
                                 layer_norm_eps=1e-12, pad_token_id=0, num_labels=2,
                                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    anat = types.SimpleNamespace(vocab_size=8, hidden_size=24, num_attention_heads=12,
                                 intermediate_size=8, hidden_dropout_prob=0.1,
                                 max_position_embeddings=8, num_hidden_layers=12, num_labels=3)
    gpt = types.SimpleNamespace(vocab_size=8, n_positions=8, n_embd=24, n_head=12, n_layer=12,
                                layer_norm_epsilon=1e-5, attn_pdrop=0.1, resid_pdrop=0.1,
                                embd_pdrop=0.1)
    dev = torch.device("cpu")
    return {
        "annotated.tfm": lambda: ann_make_model(8, 8, N=6, d_model=16, d_ff=8, h=8, max_len=8),
        "seq2seq.tfm": lambda: S2SSeq2Seq(S2SEncoder(8, 16, 3, 8, 8, 0.1, dev),
                                          S2SDecoder(8, 16, 3, 8, 8, 0.1, dev), 1, 1, dev),
        "anatomy.tfm": lambda: AnatTransformerForSequenceClassification(anat),
        "bert.tfm": lambda: BertForSequenceClassification(bert),
        "gpt2.tfm": lambda: GPT2LMHeadModel(gpt),
        "torchnn_encoder.tfm": lambda: TorchEncoderModel(8, 16, 8, 8, 6, False, "relu", False,
                                                         n_classes=2, embed_name="embed",
                                                         head_name="classifier"),
        "torchnn_transformer.tfm": lambda: TutorialSeq2SeqTransformer(3, 3, 16, 8, 8, 8),
        "torchnn_lm.tfm": lambda: TutorialTransformerModel(8, 16, 2, 8, 2),
    }


def check_examples():
    """Every examples/*.tfm weight block against its model's state_dict."""
    layouts = example_layouts()
    exdir = os.path.join(ROOT, "examples")
    found = sorted(f for f in os.listdir(exdir) if f.endswith(".tfm"))
    for fname in found:
        if fname not in layouts:
            raise RuntimeError("examples/%s: no PyTorch layout to check it against" % fname)
        name, facts, wtext = parse_spec_file(os.path.join(exdir, fname))
        names = set(layouts[fname]().state_dict().keys())
        n_mapped, n_ignored = check_weight_map("examples/" + fname, facts, wtext, names)
        print("%-34s map %d+%d ignored" % ("examples/" + fname, n_mapped, n_ignored))


def check_golden(g, model, inputs):
    """All the self-checks; returns (expected outputs, report line)."""
    # With grad disabled torch.nn's transformer layers take their fast path,
    # which is not the math the goldens describe at padded positions.
    assert torch.is_grad_enabled() and not model.training
    notes = []
    m64 = clone_model(model).double()
    out32 = detach_all(g.forward(model, inputs))
    out64 = detach_all(g.forward(m64, inputs))
    for k, v in out64.items():
        assert torch.isfinite(v).all(), "%s: %s not finite" % (g.name, k)
        assert float(v.std()) > 1e-3, "%s: %s degenerate (std %g)" % (g.name, k, float(v.std()))
        err = float(((out32[k].double() - v).abs() / (1e-5 + 1e-5 * v.abs())).max())
        assert err <= 1.0, "%s: %s float32 vs float64 off by %.2f x tolerance" % (g.name, k, err)
        notes.append("%s f32/f64 %.2f tol" % (k, err))
    if "attention" in out64:
        rows = out64["attention"].sum(-1)
        assert float((rows - 1).abs().max()) < 1e-9, "%s: attention rows do not sum to 1" % g.name
    # each sequence alone, unpadded, gives its rows of the batch
    worst = 0.0
    for b in range(next(iter(inputs.values())).size(0)):
        single, lens = slice_for(g, inputs, b)
        alone = detach_all(g.forward(m64, single))
        for k, axes in g.seq_of_output.items():
            idx = [slice(b, b + 1)]
            for ax in axes:
                idx.append(slice(None) if ax is None else slice(0, lens[ax]))
            worst = max(worst, float((out64[k][tuple(idx)] - alone[k]).abs().max()))
    assert worst < 1e-9, "%s: batched vs alone differ by %g" % (g.name, worst)
    notes.append("batch/alone %.0e" % worst)
    # every parameter matters
    gen = torch.Generator().manual_seed(1234)
    seen, weakest, n_checked = set(), (float("inf"), ""), 0
    for pname, p in m64.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if INVARIANT_PARAMS.search(pname):
            continue
        saved = p.detach().clone()
        trials = [saved + 0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype)]
        if p.dim() == 1:
            # what a loader that skipped this vector would use instead
            gain = re.search(r"(norm[^.]*|LayerNorm|ln_[^.]*)\.weight$|a_2$", pname)
            trials.append(torch.ones_like(saved) if gain else torch.zeros_like(saved))
        for value in trials:
            with torch.no_grad():
                p.copy_(value)
            moved = detach_all(g.forward(m64, inputs))
            with torch.no_grad():
                p.copy_(saved)
            delta = max(float((moved[k] - out64[k]).abs().max()) for k in out64)
            assert delta > 1e-3, "%s: changing %s moves outputs by only %g" % (g.name, pname, delta)
            weakest = min(weakest, (delta, pname))
        n_checked += 1
    notes.append("%d params matter (weakest %s %.2g)" % (n_checked, weakest[1], weakest[0]))
    if g.extra_check:
        notes.append(g.extra_check(m64, inputs, out64))
    return {k: v.float() for k, v in out64.items()}, "; ".join(notes)


def weights_tensors(model, dtype):
    out = {}
    for name, t in model.state_dict().items():
        arr = t.detach().cpu().numpy().copy()
        if arr.dtype == np.float32 and dtype == "F16":
            half = arr.astype(np.float16)
            assert np.array_equal(half.astype(np.float32), arr), name
            out[name] = half
        elif arr.dtype == np.float32 and dtype == "BF16":
            bits = stio.f32_to_bf16(arr)
            assert np.array_equal(stio.bf16_to_f32(bits).reshape(arr.shape), arr), name
            out[name] = stio.Raw("BF16", arr.shape, bits)
        else:
            out[name] = arr
    return out


def write_golden(g, model, inputs, expected, outdir):
    d = os.path.join(outdir, g.name)
    os.makedirs(d, exist_ok=True)
    files = {
        "weights.safetensors": stio.encode(weights_tensors(model, g.weight_dtype), {"format": "pt"}),
        "inputs.safetensors": stio.encode({k: v.numpy() for k, v in inputs.items()}),
        "expected.safetensors": stio.encode({k: v.numpy() for k, v in expected.items()}),
    }
    for fname, buf in files.items():
        stio.decode(buf, fname)  # round-trip through the validating reader
    files["model.tfm"] = g.spec_text().encode()
    files["args"] = (g.args + "\n").encode() if g.args else b""
    for fname, buf in files.items():
        with open(os.path.join(d, fname), "wb") as fh:
            fh.write(buf)
    total = sum(len(b) for b in files.values())
    assert total < MAX_DIR_BYTES, "%s: %d bytes, over the budget" % (g.name, total)
    back, _ = stio.read(os.path.join(d, "expected.safetensors"))
    for k, v in expected.items():
        assert np.array_equal(back[k], v.numpy())
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "golden"))
    ap.add_argument("--only", action="append", help="golden name (repeatable)")
    ap.add_argument("--check-only", action="store_true", help="run every check, write nothing")
    args = ap.parse_args()
    torch.set_num_threads(1)
    stio._selftest()
    names = [f.__name__[len("golden_"):] for f in GOLDENS]
    for n in args.only or []:
        if n not in names:
            ap.error("unknown golden %r (have: %s)" % (n, ", ".join(names)))
    total = 0
    for idx, make in enumerate(GOLDENS):
        g = make()
        if args.only and g.name not in args.only:
            continue
        gen = torch.Generator().manual_seed(1000 + idx)
        torch.manual_seed(1000 + idx)
        model = g.build(gen)
        model.eval()
        inputs = g.make_inputs(gen)
        n_mapped, n_ignored = check_weight_map(g.name, g.facts, g.weights,
                                               set(model.state_dict().keys()))
        expected, notes = check_golden(g, model, inputs)
        size = 0 if args.check_only else write_golden(g, model, inputs, expected, args.out)
        total += size
        print("%-34s %6d B  map %d+%d ignored; %s" % (g.name, size, n_mapped, n_ignored, notes))
    assert total < MAX_TOTAL_BYTES, "goldens total %d bytes, over the budget" % total
    print("total %d bytes" % total)
    if not args.only:
        check_examples()


if __name__ == "__main__":
    main()
