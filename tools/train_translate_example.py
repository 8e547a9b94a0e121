#!/usr/bin/python3
"""tools/train_translate_example.py -- trains the translation example in examples/reverse/.

Run with Debian's PyTorch (python3-torch, CPU):

    /usr/bin/python3 tools/train_translate_example.py            # train, evaluate, write files
    /usr/bin/python3 tools/train_translate_example.py --eval-only  # reload the weights, re-check

The model is bentrevett/pytorch-seq2seq's "Attention is All You Need"
Seq2Seq (tools/reference_models.py S2SEncoder / S2SDecoder / S2SSeq2Seq:
post-norm, learned positions, embeddings scaled by sqrt(hid_dim), every
padding mask), small: hid_dim 64, 4 heads, 2 + 2 layers, pf_dim 128. tfmc
reads its checkpoint with the spec's `preset "pytorch-seq2seq"`.

Task: translate a word, 1..10 lowercase letters, into the same letters in
reverse order. The source is the letters' ids (no <s> / </s>); the target
is <s>, the reversed letters, </s>. A task whose answers can be checked
exactly: the held-out check decodes 2000 fresh random words greedily (as
pytorch-seq2seq's translate_sentence does: re-decode the target so far,
stop at </s>) and counts exact matches.

Everything is seeded. Weights are stored as F16 (the model is evaluated
again with the rounded weights, which are what tfmc loads). Files written
(to --out, default examples/reverse/):
  weights.safetensors   the state_dict under its own names (F16)
  model.tfm             the spec
  vocab.txt             line k is the symbol of token id k
  expected.txt          8 held-out words and PyTorch's greedy translation of each
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402
from reference_models import S2SDecoder, S2SEncoder, S2SSeq2Seq  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAD, BOS, EOS, UNK = 0, 1, 2, 3
VOCAB = ["<pad>", "<s>", "</s>", "<unk>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
MAX_WORD = 10
MAX_POS = 16  # positions: a target is <s> + 10 letters (+ </s> fed to nothing)
D, HEADS, LAYERS, PF = 64, 4, 2, 128

SPEC = """# A small translation model (tools/train_translate_example.py): pytorch-seq2seq's
# Seq2Seq (post-norm, learned positions, sqrt(d_model)-scaled embeddings)
# trained to translate a word of 1..10 lowercase letters into the same
# letters reversed. Source: the letters; target: <s> reversed letters </s>.
#   build/tfmc run examples/reverse/model.tfm --weights examples/reverse/weights.safetensors \\
#       --vocab examples/reverse/vocab.txt --text "h e l l o" --generate 20
model reverse {
  arch        encoder_decoder
  vocab       %d
  d_model     %d
  heads       %d
  layers      encoder %d decoder %d
  ffn         %d relu
  norm        post eps 1e-5
  position    learned max %d
  embed_scale sqrt_d_model
  tokens      pad %d bos %d eos %d
  mask        encoder padding
  mask        decoder causal padding
  mask        cross padding
  head        logits
}

weights reverse {
  preset "pytorch-seq2seq"
}
""" % (len(VOCAB), D, HEADS, LAYERS, LAYERS, PF, MAX_POS, PAD, BOS, EOS)


def build(dropout):
    dev = torch.device("cpu")
    enc = S2SEncoder(len(VOCAB), D, LAYERS, HEADS, PF, dropout, dev, max_length=MAX_POS)
    dec = S2SDecoder(len(VOCAB), D, LAYERS, HEADS, PF, dropout, dev, max_length=MAX_POS)
    return S2SSeq2Seq(enc, dec, PAD, PAD, dev)


def words(gen, n):
    """n random words: lists of letter ids, lengths 1..MAX_WORD."""
    lens = torch.randint(1, MAX_WORD + 1, (n,), generator=gen).tolist()
    return [torch.randint(4, len(VOCAB), (k,), generator=gen).tolist() for k in lens]


def batch(ws):
    """src [B,S] (padded), tgt [B,T] = <s> reversed </s> (padded)."""
    S = max(len(w) for w in ws)
    src = torch.full((len(ws), S), PAD, dtype=torch.long)
    tgt = torch.full((len(ws), S + 2), PAD, dtype=torch.long)
    for i, w in enumerate(ws):
        src[i, :len(w)] = torch.tensor(w)
        tgt[i, :len(w) + 2] = torch.tensor([BOS] + w[::-1] + [EOS])
    return src, tgt


@torch.no_grad()
def greedy(model, ws):
    """translate_sentence, batched: encode once, re-decode the target so far,
    until every row said </s> (rows that did are padded on)."""
    src, _ = batch(ws)
    src_mask = model.make_src_mask(src)
    enc = model.encoder(src, src_mask)
    ys = torch.full((len(ws), 1), BOS, dtype=torch.long)
    done = torch.zeros(len(ws), dtype=torch.bool)
    for _ in range(MAX_WORD + 1):
        out, _ = model.decoder(ys, enc, model.make_trg_mask(ys), src_mask)
        nxt = out[:, -1].argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt == EOS
        if done.all():
            break
    res = []
    for row in ys[:, 1:].tolist():
        res.append(row[:row.index(EOS)] if EOS in row else row)
    return res


def accuracy(model, ws):
    model.eval()
    got = []
    for i in range(0, len(ws), 500):
        got += greedy(model, ws[i:i + 500])
    return sum(g == w[::-1] for g, w in zip(got, ws)) / len(ws), got


def round_f16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


def write(model, out, held_out, got):
    os.makedirs(out, exist_ok=True)
    tensors = {k: v.detach().numpy().astype("float16") for k, v in model.state_dict().items()}
    stio.write(os.path.join(out, "weights.safetensors"), tensors)
    with open(os.path.join(out, "model.tfm"), "w") as f:
        f.write(SPEC)
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(out, "expected.txt"), "w") as f:
        for w, g in list(zip(held_out, got))[:8]:
            f.write("%s\t%s\n" % (" ".join(VOCAB[i] for i in w), " ".join(VOCAB[i] for i in g)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "reverse"))
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--eval-only", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    held_out = words(torch.Generator().manual_seed(99), 2000)
    if args.eval_only:
        model = build(0.0)
        st = stio.read(os.path.join(args.out, "weights.safetensors"))[0]
        model.load_state_dict({k: torch.from_numpy(v.astype("float32")) for k, v in st.items()})
        acc, _ = accuracy(model, held_out)
        print("held-out exact match: %.2f%% of %d words" % (100 * acc, len(held_out)))
        return 0 if acc >= 0.99 else 1
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = build(0.0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    warm = 200

    def lr_at(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, args.steps - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    t0 = time.time()
    for step in range(args.steps):
        model.train()
        src, tgt = batch(words(gen, 64))
        out, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(out.reshape(-1, len(VOCAB)), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % 250 == 0:
            print("step %d loss %.4f (%.0fs)" % (step + 1, loss.item(), time.time() - t0), flush=True)
        if (step + 1) % 1000 == 0:
            acc, _ = accuracy(model, held_out[:200])
            print("step %d loss %.4f held-out(200) %.1f%% (%.0fs)"
                  % (step + 1, loss.item(), 100 * acc, time.time() - t0), flush=True)
    model.eval()
    round_f16(model)
    acc, got = accuracy(model, held_out)
    print("held-out exact match with F16 weights: %.2f%% of %d words" % (100 * acc, len(held_out)))
    if acc < 0.99:
        print("not good enough: not writing", file=sys.stderr)
        return 1
    write(model, args.out, held_out, got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
