#!/usr/bin/python3
"""tools/train_lm_example.py -- trains the text-generating example in examples/add/.

Run with Debian's PyTorch (python3-torch, CPU):

    /usr/bin/python3 tools/train_lm_example.py            # train, evaluate, write files
    /usr/bin/python3 tools/train_lm_example.py --eval-only  # reload the weights, re-check

The model is a small GPT-2 (tools/reference_models.py GPT2LMHeadModel:
Hugging Face's names, Conv1D weights, fused c_attn, pre-norm, gelu_new,
learned positions, a final ln_f, lm_head tied to wte): a decoder-only
language model. tfmc reads its checkpoint with the spec's
`preset "hf-gpt2"`.

Task: character-level addition. A text is the digits of a, "+", the digits
of b, "=", the digits of a + b, then </s>; a and b have 1..3 digits (no
leading zeros), e.g. `4 0 6 + 5 9 7 = 1 0 0 3 </s>`. The prompt is everything
up to and including "=", and the model continues it with the sum and
</s>, so every continuation can be checked exactly. The loss is taken on
the continuation only (the prompt is random digits).

Held-out prompts are fresh: a fixed random 5% of the (a, b) pairs is never
trained on (training resamples those), and the held-out check draws 2000
prompts from that 5%, decodes them greedily (re-running the model over the
text so far, as a plain PyTorch loop does; stop at </s>) and counts exact
continuations. A few hundred pairs with one-digit operands exist, so the
held-out 5% of them is a handful; most held-out prompts have 3-digit
operands.

Everything is seeded (CPU, one thread). Weights are stored as F16 (the
model is evaluated again with the rounded weights, which are what tfmc
loads). Files written (to --out, default examples/add/):
  weights.safetensors   the state_dict under GPT2LMHeadModel's names (F16)
  model.tfm             the spec
  vocab.txt             line k is the symbol of token id k
  expected.txt          50 distinct held-out prompts (the README's first), a tab,
                        PyTorch's greedy continuation
"""
import argparse
import math
import os
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402
from reference_models import GPT2LMHeadModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = [str(d) for d in range(10)] + ["+", "=", "</s>"]  # digit d has id d
PLUS, EQ, EOS = 10, 11, 12
MAX_DIGITS = 3
MAX_POS = 16  # the longest text, 999+999=1998</s>, is 13 tokens
HELD_OUT_RATE = 0.05
N_EXPECTED = 50
MIN_MARGIN = 0.1  # top-1 minus top-2 logit at every step of expected.txt's continuations
README_PROMPT = (406, 597)  # the README's command: a held-out pair, carries all the way


def spec_text(a):
    return """# A small GPT-2 (tools/train_lm_example.py): a decoder-only language model
# (pre-norm, gelu_tanh, learned positions, final ln_f, lm_head tied to the
# token embedding) trained to continue "A + B =" with the digits of the sum
# and </s>, A and B of 1..3 digits. One symbol per token, spaces between.
#   build/tfmc run examples/add/model.tfm --weights examples/add/weights.safetensors \\
#       --vocab examples/add/vocab.txt --text "4 0 6 + 5 9 7 =" --generate 20
model add {
  arch        decoder
  vocab       %d
  d_model     %d
  heads       %d
  layers      %d
  ffn         %d gelu_tanh
  norm        pre eps 1e-5
  final_norm  yes
  position    learned max %d
  tokens      eos %d
  mask        decoder causal
  head        logits tied
}

weights add {
  preset "hf-gpt2"
}
""" % (len(VOCAB), a.d_model, a.heads, a.layers, 4 * a.d_model, MAX_POS, EOS)


def build(a):
    cfg = types.SimpleNamespace(vocab_size=len(VOCAB), n_positions=MAX_POS, n_embd=a.d_model,
                                n_head=a.heads, n_layer=a.layers, layer_norm_epsilon=1e-5,
                                attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    # GPT-2's initialisation: N(0, 0.02) for embeddings and Conv1D weights
    # (Conv1D does it itself), the residual projections scaled by
    # 1/sqrt(2 * layers)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Embedding):
                nn.init.normal_(mod.weight, std=0.02)
        for name, p in model.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * a.layers))
    return model


def digits(n):
    return [int(c) for c in str(n)]


def held_out_table(seed):
    """bool [1000, 1000]: the (a, b) pairs that are never trained on."""
    return torch.rand((10 ** MAX_DIGITS, 10 ** MAX_DIGITS),
                      generator=torch.Generator().manual_seed(seed)) < HELD_OUT_RATE


def operands(gen, n):
    """n operands: a number of digits uniform in 1..MAX_DIGITS, then the
    number uniform among those with that many digits."""
    nd = torch.randint(1, MAX_DIGITS + 1, (n,), generator=gen)
    lo = torch.where(nd == 1, torch.zeros_like(nd), 10 ** (nd - 1))
    hi = 10 ** nd
    return lo + (torch.rand(n, generator=gen) * (hi - lo)).long().clamp(max=hi - lo - 1)


def pairs(gen, n, table, want_held):
    """n pairs (a, b) whose table entry is want_held (rejection sampling)."""
    out = []
    while len(out) < n:
        a, b = operands(gen, 2 * n), operands(gen, 2 * n)
        keep = table[a, b] == want_held
        out += list(zip(a[keep].tolist(), b[keep].tolist()))
    return out[:n]


def prompt_ids(a, b):
    return digits(a) + [PLUS] + digits(b) + [EQ]


def batch(ps):
    """inputs [B,L] and targets [B,L] for texts prompt + sum + </s>: the
    target at t is the token t+1, -100 (ignored) inside the prompt and past
    the end; rows are right-padded with </s> (causal: padding on the right
    changes nothing before it)."""
    texts = [(prompt_ids(a, b), digits(a + b) + [EOS]) for a, b in ps]
    L = max(len(p) + len(c) for p, c in texts) - 1
    inp = torch.full((len(ps), L), EOS, dtype=torch.long)
    tgt = torch.full((len(ps), L), -100, dtype=torch.long)
    for i, (p, c) in enumerate(texts):
        t = p + c
        inp[i, :len(t) - 1] = torch.tensor(t[:-1])
        tgt[i, len(p) - 1:len(t) - 1] = torch.tensor(c)
    return inp, tgt


@torch.no_grad()
def greedy(model, prompts):
    """Each prompt continued greedily until </s> (not kept) or MAX_POS
    tokens: the whole text so far re-run per step, prompts of one length
    batched together. Returns {prompt tuple: continuation list} and the
    smallest top-1 minus top-2 logit of any step (a near tie could let f32
    rounding in another implementation pick another token)."""
    model.eval()
    out = {}
    margin = float("inf")
    by_len = {}
    for p in prompts:
        by_len.setdefault(len(p), []).append(p)
    for n, group in sorted(by_len.items()):
        ys = torch.tensor(group)
        done = torch.zeros(len(group), dtype=torch.bool)
        while ys.size(1) < MAX_POS and not done.all():
            logits, _ = model(ys, torch.ones_like(ys))
            nxt = logits[:, -1].argmax(-1)
            top = logits[:, -1].topk(2).values
            if (~done).any():
                margin = min(margin, float((top[:, 0] - top[:, 1])[~done].min()))
            nxt = torch.where(done, torch.full_like(nxt, EOS), nxt)
            ys = torch.cat([ys, nxt[:, None]], 1)
            done |= nxt == EOS
        for p, row in zip(group, ys[:, n:].tolist()):
            out[tuple(p)] = row[:row.index(EOS)] if EOS in row else row
    return out, margin


def accuracy(model, ps):
    prompts = [prompt_ids(a, b) for a, b in ps]
    got, _ = greedy(model, prompts)
    ok = sum(got[tuple(p)] == digits(a + b) for p, (a, b) in zip(prompts, ps))
    return ok / len(ps), got


def round_f16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


def text(ids):
    return " ".join(VOCAB[i] for i in ids)


def expected_pairs(held):
    """The pairs of expected.txt: the README's, then the first distinct
    held-out pairs, N_EXPECTED in all."""
    out = [README_PROMPT]
    for pr in held:
        if len(out) == N_EXPECTED:
            break
        if pr not in out:
            out.append(pr)
    return out


def expected_lines(model, held):
    ps = expected_pairs(held)
    got, margin = greedy(model, [prompt_ids(x, y) for x, y in ps])
    assert margin > MIN_MARGIN, "a near tie (margin %g) in expected.txt's continuations" % margin
    print("expected.txt: smallest top-1 minus top-2 logit of any step %.2f" % margin)
    return ["%s\t%s" % (text(prompt_ids(x, y)), text(got[tuple(prompt_ids(x, y))])) for x, y in ps]


def write(model, a, out, lines):
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for k, v in model.state_dict().items():
        arr = v.detach().numpy()
        tensors[k] = arr.astype("float16") if arr.dtype.kind == "f" else arr
    stio.write(os.path.join(out, "weights.safetensors"), tensors)
    with open(os.path.join(out, "model.tfm"), "w") as f:
        f.write(spec_text(a))
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "add"))
    ap.add_argument("--d-model", dest="d_model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--held-out", dest="held_out", type=int, default=2000)
    ap.add_argument("--log-every", dest="log_every", type=int, default=500)
    ap.add_argument("--eval-only", action="store_true",
                    help="load OUT/weights.safetensors instead of training; rewrite nothing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    table = held_out_table(a.seed + 7)
    assert table[README_PROMPT], "the README's prompt must be held out"
    held = pairs(torch.Generator().manual_seed(a.seed + 99), a.held_out, table, True)
    torch.manual_seed(a.seed)
    model = build(a)
    n_params = sum(p.numel() for p in model.parameters())
    print("torch %s, 1 thread; d_model %d, %d heads, %d layers, ffn %d; %d parameters"
          % (torch.__version__, a.d_model, a.heads, a.layers, 4 * a.d_model, n_params))
    if a.eval_only:
        st = stio.read(os.path.join(a.out, "weights.safetensors"))[0]
        model.load_state_dict({k: torch.from_numpy(v.astype("float32") if v.dtype.kind == "f" else v.copy())
                               for k, v in st.items()})
        acc, _ = accuracy(model, held)
        print("held-out exact continuations: %.2f%% of %d prompts" % (100 * acc, len(held)))
        with open(os.path.join(a.out, "expected.txt")) as f:
            lines = f.read().splitlines()
        mine = expected_lines(model, held)
        same = sum(x == y for x, y in zip(lines, mine))
        print("expected.txt: %d of %d lines are this run's continuations (%s)"
              % (same, len(lines), mine[0].replace("\t", " -> ")))
        return 0 if acc >= 0.99 and same == len(lines) == len(mine) else 1

    gen = torch.Generator().manual_seed(a.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = max(1, a.steps // 40)

    def lr_at(step):  # linear warm-up, then cosine decay to 1% of the peak
        if step < warm:
            return (step + 1) / warm
        return 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, a.steps - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    t0 = time.time()
    for step in range(a.steps):
        model.train()
        inp, tgt = batch(pairs(gen, a.batch, table, False))
        logits, _ = model(inp, torch.ones_like(inp))
        loss = F.cross_entropy(logits.reshape(-1, len(VOCAB)), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % a.log_every == 0:
            msg = "step %d loss %.4f" % (step + 1, loss.item())
            if (step + 1) % (4 * a.log_every) == 0:
                msg += " held-out(200) %.1f%%" % (100 * accuracy(model, held[:200])[0])
            print("%s (%.0fs)" % (msg, time.time() - t0), flush=True)
    train_s = time.time() - t0
    print("training time %.0fs (%d steps of %d texts)" % (train_s, a.steps, a.batch))
    acc32, _ = accuracy(model, held)
    round_f16(model)
    acc, _ = accuracy(model, held)
    print("held-out exact continuations: %.2f%% of %d prompts (F32 weights %.2f%%)"
          % (100 * acc, len(held), 100 * acc32))
    if acc < 0.99:
        print("not good enough: not writing", file=sys.stderr)
        return 1
    lines = expected_lines(model, held)
    print("README prompt: %s" % lines[0].replace("\t", " -> "))
    write(model, a, a.out, lines)
    print("wrote %s/: weights.safetensors (%d bytes), model.tfm, vocab.txt, expected.txt"
          % (a.out, os.path.getsize(os.path.join(a.out, "weights.safetensors"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
