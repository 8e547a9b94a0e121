#!/usr/bin/python3
"""tools/gen_sample_refs.py — reference beam searches for runtime/rt_sample.c.

Writes tests/data/sample/beam_cases.txt: for each case, a fake "model" (a
table of random float32 logits indexed by (step, last token); the prompt's
last token is 0) and what a beam search over it must produce: each step's
(parent, token) rows and the finished hypotheses with their scores.
tests/runtime/test_sample.c replays the same model through rt_beam_step and
compares: identical parents and tokens, scores within 1e-6.

The search is written here from its definition in runtime/rt_sample.h, not
from the C code: log-probs by torch.log_softmax in float64; every (beam,
token) candidate scored sum + logprob, sorted by (-score, beam, token), the
first 2K looked at; an EOS candidate of rank < K finishes a hypothesis, any
other candidate extends a live beam until K; at max_new every live beam
finishes; hypotheses keep the best K by (-score, finish order), score =
sum / len**alpha (the formula of HF transformers' length_penalty, len =
generated tokens including EOS; HF leaves the EOS out); done early when K are finished and the best live sum
divided by L**alpha (L = max_new if alpha > 0 and sum < 0, else step + 1)
cannot beat the worst kept.

Run: /usr/bin/python3 tools/gen_sample_refs.py [--out FILE]. Deterministic
(random.Random seeds), so re-running rewrites byte-identical files.

File format (whitespace-separated, '#' lines are comments):
  case NAME V K MAX_NEW EOS ALPHA
  logits  MAX_NEW*V*V float32 values, row (s, t) = the logits at step s
          for a beam whose last token is t
  step S N_LIVE  then K parents, then K tokens      (one line per step)
  finished N     then N lines: hyp SCORE LEN TOKENS...
  end
"""
import argparse
import os
import random
import struct

import torch

CASES = [
    # name, V, K, max_new, eos, alpha, eos boost, seed
    ("v12_k3_alpha1", 12, 3, 8, 1, 1.0, 0.0, 1),
    ("v12_k4_alpha0", 12, 4, 8, 2, 0.0, 1.5, 2),
    ("v20_k2_alpha06", 20, 2, 6, 0, 0.6, 0.5, 3),
    ("v5_k4_negalpha", 5, 4, 6, 3, -0.5, 2.0, 4),
    ("v9_k1_greedy", 9, 1, 7, 4, 1.0, -1.0, 5),
    ("v10_k3_noeos", 10, 3, 5, -1, 1.0, 0.0, 6),
    ("v16_k5_early", 16, 5, 12, 7, 2.0, 3.0, 7),
    ("v16_k5_early_a0", 16, 5, 12, 7, 0.0, 3.0, 8),
    ("v3_k3_fewlive", 3, 3, 5, 0, 1.0, 1.0, 9),  # fewer than K live beams
    ("v1_k2_eos_only", 1, 2, 3, 0, 1.0, 0.0, 10),  # no live beam after step 0
]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_table(V, max_new, eos, boost, seed):
    rng = random.Random(seed)
    tab = []
    for s in range(max_new):
        for t in range(V):
            row = [f32(2.0 * rng.gauss(0.0, 1.0)) for _ in range(V)]
            if eos >= 0:
                row[eos] = f32(row[eos] + boost)
            tab.append(row)
    return tab


def beam_search(tab, V, K, max_new, eos, alpha):
    def lenpow(n):
        return float(n) ** alpha

    live = [([], 0.0)]  # (tokens, sum of log-probs)
    finished = []  # (score, order, tokens)
    order = 0
    steps = []
    for step in range(max_new):
        cands = []
        for b, (toks, s) in enumerate(live):
            last = toks[-1] if toks else 0
            row = torch.tensor(tab[step * V + last], dtype=torch.float64)
            lp = torch.log_softmax(row, dim=0).tolist()
            for v in range(V):
                cands.append((s + lp[v], b, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        cands = cands[: 2 * K]
        new_live, parents, tokens = [], [], []
        for rank, (sc, b, v) in enumerate(cands):
            if len(new_live) == K:
                break
            if v == eos:
                if rank < K:
                    finished.append((sc / lenpow(step + 1), order, live[b][0] + [v]))
                    order += 1
                continue
            new_live.append((live[b][0] + [v], sc))
            parents.append(b)
            tokens.append(v)
        finished.sort(key=lambda h: (-h[0], h[1]))
        finished = finished[:K]
        n_live = len(new_live)
        pad = eos if eos >= 0 else 0
        steps.append((n_live, parents + [0] * (K - n_live), tokens + [pad] * (K - n_live)))
        live = new_live
        if step + 1 >= max_new:
            for toks, s in live:
                finished.append((s / lenpow(step + 1), order, toks))
                order += 1
            finished.sort(key=lambda h: (-h[0], h[1]))
            finished = finished[:K]
            break
        if not live:
            break
        if len(finished) == K:
            best = live[0][1]
            L = max_new if alpha > 0 and best < 0 else step + 2
            if best / lenpow(L) <= finished[-1][0]:
                break
    return steps, finished


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "sample",
                                                  "beam_cases.txt"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    lines = ["# written by tools/gen_sample_refs.py; do not edit"]
    for name, V, K, max_new, eos, alpha, boost, seed in CASES:
        tab = make_table(V, max_new, eos, boost, seed)
        steps, fin = beam_search(tab, V, K, max_new, eos, alpha)
        lines.append(f"case {name} {V} {K} {max_new} {eos} {alpha!r}")
        lines.append("logits")
        for row in tab:
            lines.append(" ".join("%.9g" % x for x in row))
        for i, (n_live, par, tok) in enumerate(steps):
            lines.append(f"step {i} {n_live} " + " ".join(map(str, par)) + "  " +
                         " ".join(map(str, tok)))
        lines.append(f"finished {len(fin)}")
        for score, _, toks in fin:
            lines.append(f"hyp {score!r} {len(toks)} " + " ".join(map(str, toks)))
        lines.append("end")
        early = len(steps) < max_new
        print(f"{name}: {len(steps)} steps{' (stopped early)' if early else ''}, "
              f"best {fin[0][0]:.6f} {fin[0][2]}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
