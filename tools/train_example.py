#!/usr/bin/python3
"""tools/train_example.py -- trains the digit-sorting model in examples/sort/.

Run with Debian's PyTorch (python3-torch, CPU):

    /usr/bin/python3 tools/train_example.py            # train, evaluate, write files
    /usr/bin/python3 tools/train_example.py --eval-only  # reload the weights, re-check

The model is an encoder-only Transformer that tfmc's spec language expresses
exactly (examples/sort/model.tfm): a token embedding plus a learned position
embedding (no scaling), a pre-norm nn.TransformerEncoder with a final
LayerNorm, and a Linear head giving logits [B,S,V] at every position.

Task: the input is 1..16 digits, right-padded with <pad> (id 0); the padding
mask is derived from the pad id. The target at position t is the t-th
smallest input digit, so argmax over the logits reads out the sorted
sequence. Positions past the length are ignored by the loss.

Everything is seeded: a re-run on the same PyTorch build reproduces the same
weights. Files written (to --out, default examples/sort/):
  weights.safetensors   the model's state_dict under its own names (F32)
  model.tfm             the spec, with a weights block mapping those names
  vocab.txt             line k is the symbol of token id k
  inputs.safetensors    `tokens` I64 [8,16]: 8 test sequences of different lengths
  expected.safetensors  `logits` F32 [8,16,11]: PyTorch's output for them
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- vocabulary --------------------------------------------------------------

PAD = 0
VOCAB = ["<pad>"] + [str(d) for d in range(10)]  # digit d has id d + 1
MAX_LEN = 16

# ---- model -------------------------------------------------------------------


class SortModel(nn.Module):
    """tok + pos -> pre-norm TransformerEncoder (final norm) -> Linear head.

    The attribute names fix the state_dict names the spec's weights block
    maps: tok.weight, pos.weight, encoder.* (tfmc's "torch.nn" preset),
    out.weight / out.bias."""

    def __init__(self, vocab, d_model, heads, layers, d_ff, max_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, d_ff, dropout=0.0, activation="relu",
            layer_norm_eps=1e-5, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(
            layer, layers, norm=nn.LayerNorm(d_model, eps=1e-5),
            enable_nested_tensor=False)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        # tokens [B,S] int64 -> logits [B,S,V]
        s = tokens.shape[1]
        positions = torch.arange(s, device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)[None, :, :]  # [B,S,d]
        x = self.encoder(x, src_key_padding_mask=tokens.eq(PAD))
        return self.out(x)


def spec_text(a):
    """The tfmc spec for SortModel(a): README "The spec language"."""
    return f"""\
# Sorts 1..16 digits: `--text "7 3 9 1 3 0 8 2"` prints 0 1 2 3 3 7 8 9.
# An encoder-only Transformer trained by tools/train_example.py (PyTorch
# nn.TransformerEncoder, norm_first=True, a final LayerNorm, learned
# positions); logits at position t pick the t-th smallest input digit.
model sort {{
  arch        encoder
  vocab       {len(VOCAB)}
  d_model     {a.d_model}
  heads       {a.heads}
  layers      {a.layers}
  ffn         {a.d_ff} relu
  norm        pre eps 1e-5
  final_norm  yes
  position    learned max {MAX_LEN}
  tokens      pad {PAD}
  mask        encoder padding
  head        logits
}}

weights sort {{
  preset "torch.nn"               # encoder.layers.{{i}}.self_attn, linear1/2, norm1/2, encoder.norm
  embed = tensor "tok.weight"
  pos   = tensor "pos.weight"
  head  = linear "out"            # out.weight [{len(VOCAB)},{a.d_model}], out.bias
}}
"""


# ---- data --------------------------------------------------------------------


def make_batch(n, gen, min_len=1, max_len=MAX_LEN):
    """n random digit sequences of random length in [min_len, max_len].

    Returns tokens [n,MAX_LEN] int64 (right-padded with PAD) and targets
    [n,MAX_LEN] int64: the sorted tokens, -100 (ignored) past the length."""
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=gen)
    digits = torch.randint(1, 11, (n, MAX_LEN), generator=gen)
    real = torch.arange(MAX_LEN)[None, :] < lengths[:, None]
    tokens = torch.where(real, digits, torch.zeros_like(digits))
    # pads sort after every digit when given the key 11
    sorted_tok, _ = torch.sort(torch.where(real, digits, torch.full_like(digits, 11)), dim=1)
    targets = torch.where(real, sorted_tok, torch.full_like(digits, -100))
    return tokens, targets


def accuracy(model, tokens, targets):
    """(fraction of whole sequences exactly right, fraction of real positions right)."""
    model.eval()
    with torch.no_grad():
        pred = model(tokens).argmax(-1)
    real = targets.ne(-100)
    ok = pred.eq(targets) | ~real
    seq = ok.all(dim=1).float().mean().item()
    pos = (pred.eq(targets) & real).sum().item() / real.sum().item()
    return seq, pos


# ---- safetensors (a minimal reader and writer) --------------------------------

_ST_DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def st_write(path, tensors):
    """Writes {name: tensor} as safetensors: u64 LE header length, a JSON
    header padded with spaces to a multiple of 8, then the raw LE data in
    the header's order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype not in _ST_DTYPES:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        tag, _ = _ST_DTYPES[t.dtype]
        data = t.numpy().astype(_ST_DTYPES[t.dtype][1]).tobytes()
        header[name] = {"dtype": tag, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def st_read(path):
    """Reads a safetensors file written by st_write (F32 / I64) into tensors."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        np_dtype = {"F32": "<f4", "I64": "<i8"}[info["dtype"]]
        b, e = info["data_offsets"]
        arr = np.frombuffer(raw[base + b:base + e], dtype=np_dtype).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


# ---- the example batch -------------------------------------------------------

# 8 sequences of 8 different lengths; the first is the README's command.
EXAMPLES = [
    "7 3 9 1 3 0 8 2",
    "5",
    "9 0",
    "4 4 1",
    "8 6 7 5 3 0 9",
    "2 7 1 8 2 8 1 8 2 8 4 5",
    "3 1 4 1 5 9 2 6 5 3 5 8 9 7",
    "9 8 7 6 5 4 3 2 1 0 0 1 2 3 4 5",
]


def example_tokens():
    tokens = torch.zeros(len(EXAMPLES), MAX_LEN, dtype=torch.int64)
    for r, text in enumerate(EXAMPLES):
        ids = [VOCAB.index(s) for s in text.split()]
        tokens[r, :len(ids)] = torch.tensor(ids)
    return tokens


def decode(ids):
    return " ".join(VOCAB[i] for i in ids)


# ---- main --------------------------------------------------------------------


def spec_forward(w, tokens, layers, heads, eps=1e-5):
    """The forward pass as README "The forward pass, as the spec describes it"
    states it for model.tfm, written from the weight map (names as stored)
    with plain tensor ops: a check, independent of nn.TransformerEncoder,
    that the spec describes what PyTorch computed.

    x = embed(tokens) + pos[0..S-1]; per layer (pre-norm):
      x = x + attn(norm1(x)); x = x + ffn(norm2(x))
    x = enc_norm(x); logits = x @ head.weight^T + head.bias
    attn: softmax(Q K^T / sqrt(d/H) + mask) V per head, keys at pad positions
    masked_fill(-1e9); ffn: w2(relu(w1(x)))."""
    def norm(x, p):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def linear(x, wt, b):
        return x @ wt.t() + b

    bsz, s = tokens.shape
    d = w["tok.weight"].shape[1]
    dh = d // heads
    keep = tokens.ne(PAD)  # [B,S] keys that are real tokens
    x = w["tok.weight"][tokens] + w["pos.weight"][:s][None]  # [B,S,d]
    for i in range(layers):
        p = f"encoder.layers.{i}."
        h = norm(x, p + "norm1")
        wq, wk, wv = w[p + "self_attn.in_proj_weight"].split(d)  # split: [3d,d] -> q,k,v
        bq, bk, bv = w[p + "self_attn.in_proj_bias"].split(d)

        def heads_of(t):  # [B,S,d] -> [B,H,S,dh]
            return t.reshape(bsz, s, heads, dh).transpose(1, 2)

        q, k, v = heads_of(linear(h, wq, bq)), heads_of(linear(h, wk, bk)), heads_of(linear(h, wv, bv))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)  # [B,H,S,S]
        scores = scores.masked_fill(~keep[:, None, None, :], -1e9)
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(bsz, s, d)
        x = x + linear(ctx, w[p + "self_attn.out_proj.weight"], w[p + "self_attn.out_proj.bias"])
        h = norm(x, p + "norm2")
        h = linear(torch.relu(linear(h, w[p + "linear1.weight"], w[p + "linear1.bias"])),
                   w[p + "linear2.weight"], w[p + "linear2.bias"])
        x = x + h
    x = norm(x, "encoder.norm")
    return linear(x, w["out.weight"], w["out.bias"])


def build_model(a):
    return SortModel(len(VOCAB), a.d_model, a.heads, a.layers, a.d_ff, MAX_LEN)


def train(a, model):
    gen = torch.Generator().manual_seed(a.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98),
                            weight_decay=0.01)
    warmup = max(1, a.steps // 20)

    def lr_at(step):  # linear warm-up, then cosine decay to 2% of the peak
        if step < warmup:
            return (step + 1) / warmup
        p = (step - warmup) / max(1, a.steps - warmup)
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * p))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    probe = make_batch(1000, torch.Generator().manual_seed(a.seed + 2))
    t0 = time.time()
    for step in range(a.steps):
        model.train()
        tokens, targets = make_batch(a.batch, gen)
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % a.log_every == 0 or step == a.steps - 1:
            seq, pos = accuracy(model, *probe)
            print(f"step {step:6d}  loss {loss.item():.4f}  probe seq {seq:.4f} "
                  f"pos {pos:.4f}  lr {sched.get_last_lr()[0]:.2e}  "
                  f"{time.time() - t0:6.1f}s", flush=True)
    return time.time() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "examples", "sort"))
    p.add_argument("--d-model", dest="d_model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-ff", dest="d_ff", type=int, default=128)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-every", dest="log_every", type=int, default=250)
    p.add_argument("--held-out", dest="held_out", type=int, default=2000)
    p.add_argument("--eval-only", dest="eval_only", action="store_true",
                   help="load OUT/weights.safetensors instead of training; rewrite nothing")
    a = p.parse_args()
    out = os.path.normpath(a.out)

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = build_model(a)
    n_params = sum(t.numel() for t in model.parameters())
    print(f"torch {torch.__version__}, {a.threads} thread(s); params {n_params} "
          f"({4 * n_params / 1024:.0f} KiB F32)")

    if a.eval_only:
        model.load_state_dict(st_read(os.path.join(out, "weights.safetensors")))
        train_s = 0.0
    else:
        print(f"d_model {a.d_model} heads {a.heads} layers {a.layers} d_ff {a.d_ff} "
              f"steps {a.steps} batch {a.batch} lr {a.lr} seed {a.seed}")
        train_s = train(a, model)
        print(f"training time {train_s:.1f}s")

    # held-out: fresh sequences from a generator the training never used
    held = make_batch(a.held_out, torch.Generator().manual_seed(a.seed + 999))
    seq, pos = accuracy(model, *held)
    print(f"held-out: {a.held_out} random sequences of length 1..{MAX_LEN}: "
          f"{100 * seq:.2f}% exactly sorted, {100 * pos:.3f}% of positions right")
    for n in (1, 8, 16):
        part = make_batch(500, torch.Generator().manual_seed(a.seed + 1000 + n), n, n)
        print(f"  length {n:2d}: {100 * accuracy(model, *part)[0]:.2f}% of 500 exactly sorted")

    # the example batch; expected logits from the plain (non-fast-path)
    # PyTorch forward: with grad enabled, nn.TransformerEncoderLayer runs
    # the documented Python math rather than the fused inference kernel
    tokens = example_tokens()
    model.eval()
    logits = model(tokens).detach()
    with torch.no_grad():
        fast = model(tokens)
    real = tokens.ne(PAD)
    diff = (fast - logits).abs()[real].max().item()
    print(f"example batch: fast-path vs plain forward, max |diff| at real positions {diff:.2e}")
    with torch.no_grad():
        by_spec = spec_forward(model.state_dict(), tokens, a.layers, a.heads)
    spec_diff = (by_spec - logits).abs().max().item()
    print(f"example batch: spec formula vs PyTorch, max |diff| over all positions {spec_diff:.2e}")
    if spec_diff > 1e-4:
        print("error: the spec's forward pass does not match PyTorch's", file=sys.stderr)
        return 1
    pred = logits.argmax(-1)
    for r, text in enumerate(EXAMPLES):
        n = len(text.split())
        want = " ".join(sorted(text.split()))
        got = decode(pred[r, :n].tolist())
        print(f"  {text:34s} -> {got:34s} {'ok' if got == want else 'WRONG, want ' + want}")

    if a.eval_only:
        ref = st_read(os.path.join(out, "expected.safetensors"))["logits"]
        print(f"expected.safetensors vs this run: max |diff| {(ref - logits).abs().max().item():.2e}")
        return 0

    os.makedirs(out, exist_ok=True)
    st_write(os.path.join(out, "weights.safetensors"), model.state_dict())
    st_write(os.path.join(out, "inputs.safetensors"), {"tokens": tokens})
    st_write(os.path.join(out, "expected.safetensors"), {"logits": logits})
    with open(os.path.join(out, "model.tfm"), "w") as f:
        f.write(spec_text(a))
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")

    # read the weights back: same names, same values
    back = st_read(os.path.join(out, "weights.safetensors"))
    sd = model.state_dict()
    assert sorted(back) == sorted(sd), "weights.safetensors: names differ"
    for k in sd:
        assert torch.equal(back[k], sd[k]), f"weights.safetensors: {k} differs"
    print(f"wrote {out}/: weights.safetensors "
          f"({os.path.getsize(os.path.join(out, 'weights.safetensors'))} bytes, "
          f"{len(sd)} tensors), model.tfm, vocab.txt, inputs.safetensors, expected.safetensors")
    return 0 if seq >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
