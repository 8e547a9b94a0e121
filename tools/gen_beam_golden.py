#!/usr/bin/python3
"""Golden for beam search on the command line (tfmc run --generate N --beams K
--length-penalty A), decoder and encoder_decoder.

Loads the committed generation goldens' models in PyTorch (tests/generate/gpt2:
tools/gen_generate_golden.py's GPT-2; tests/generate/seq2seq:
tools/gen_translate_golden.py's pytorch-seq2seq model) and runs a reference
beam search written from its definition in runtime/rt_sample.h (the same
rules tools/gen_sample_refs.py checks the runtime's RtBeam against), with
every step's logits from a full forward pass over the prefix (no cache): the
prompt (GPT-2) or <sos> (seq2seq, the source encoded) plus the beam's
tokens. Log-probs are log_softmax in float64 of PyTorch's float32 logits.

Rules: every (beam, token) candidate scored sum + logprob, sorted by
(-score, beam, token), the first 2K looked at; an eos candidate of rank < K
finishes a hypothesis, any other extends a live beam until K; at max_new
every live beam finishes; finished hypotheses keep the best K by (-score,
finish order), score = sum / len**alpha with len counting the eos; done
early when K are finished and the best live sum over L**alpha (L = max_new
if alpha > 0 and the sum < 0, else the next length) cannot beat the worst
kept. max_new is N capped so that prompt + generated <= max_len.

Each case must be decided by more than MIN_GAP everywhere (adjacent
candidate sums around the ranks that matter, the final ranking), so f32
rounding differences between tfmc and PyTorch cannot flip it. Writes
tests/generate/beam/cases, one case per line:

    DIR K ALPHA N | SOURCE OR PROMPT IDS | EXPECTED IDS

tests/generate/run_beam.sh runs them through tfmc on a backend.
Re-run: /usr/bin/python3 tools/gen_beam_golden.py
"""
import math
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402
from reference_models import (GPT2LMHeadModel, S2SDecoder, S2SEncoder,  # noqa: E402
                              S2SSeq2Seq)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tests", "generate")
MIN_GAP = 1e-4


def load(model, path):
    st = stio.read(path)[0]
    model.load_state_dict({k: torch.from_numpy(v.astype("float32")) for k, v in st.items()},
                          strict=True)
    model.eval()
    return model


def gpt2():
    cfg = types.SimpleNamespace(vocab_size=100, n_positions=64, n_embd=32, n_head=4, n_layer=2,
                                layer_norm_epsilon=1e-5, attn_pdrop=0.0, resid_pdrop=0.0,
                                embd_pdrop=0.0)
    model = load(GPT2LMHeadModel(cfg), os.path.join(GEN, "gpt2", "weights.safetensors"))

    def logits_for(prompt):
        def f(toks):
            ids = torch.tensor([prompt + toks])
            out, _ = model(ids, torch.ones_like(ids))
            return out[0, -1]
        return f
    return model, logits_for, 64, -1


def seq2seq():
    dev = torch.device("cpu")
    model = S2SSeq2Seq(S2SEncoder(43, 32, 2, 4, 64, 0.1, dev), S2SDecoder(47, 32, 2, 4, 64, 0.1, dev),
                       1, 1, dev)
    load(model, os.path.join(GEN, "seq2seq", "weights.safetensors"))

    def logits_for(src):
        src_t = torch.tensor([src])
        src_mask = model.make_src_mask(src_t)
        enc = model.encoder(src_t, src_mask)

        def f(toks):
            trg = torch.tensor([[2] + toks])
            out, _ = model.decoder(trg, enc, model.make_trg_mask(trg), src_mask)
            return out[0, -1]
        return f
    return model, logits_for, 100, 3


class Tight(Exception):
    pass


def beam_search(next_logits, V, K, max_new, eos, alpha):
    """rt_sample.h's beam search; raises Tight when a decision is closer than MIN_GAP."""
    def lenpow(n):
        return float(n) ** alpha

    def gap_check(values, what):
        for a, b in zip(values, values[1:]):
            if abs(a - b) < MIN_GAP:
                raise Tight("%s: %.3g apart" % (what, abs(a - b)))

    live = [([], 0.0)]
    finished = []  # (score, order, tokens)
    order = 0
    for step in range(max_new):
        cands = []
        for b, (toks, s) in enumerate(live):
            lp = torch.log_softmax(next_logits(toks).double(), dim=0).tolist()
            cands += [(s + lp[v], b, v) for v in range(V)]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        gap_check([c[0] for c in cands[: 2 * K + 1]], "step %d candidates" % step)
        cands = cands[: 2 * K]
        new_live = []
        for rank, (sc, b, v) in enumerate(cands):
            if len(new_live) == K:
                break
            if v == eos:
                if rank < K:
                    finished.append((sc / lenpow(step + 1), order, live[b][0] + [v]))
                    order += 1
                continue
            new_live.append((live[b][0] + [v], sc))
        finished.sort(key=lambda h: (-h[0], h[1]))
        finished = finished[:K]
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
            bound = best / lenpow(L)
            if abs(bound - finished[-1][0]) < MIN_GAP:
                raise Tight("step %d early stop" % step)
            if bound <= finished[-1][0]:
                break
    gap_check([h[0] for h in finished[:2]], "final ranking")
    return finished[0][2]


def main():
    gp_model, gp_logits, gp_max, gp_eos = gpt2()
    s2_model, s2_logits, s2_max, s2_eos = seq2seq()
    with open(os.path.join(GEN, "gpt2", "prompt")) as f:
        prompt = [int(x) for x in f.read().split()]
    with open(os.path.join(GEN, "seq2seq", "sources")) as f:
        sources = [[int(x) for x in line.split()] for line in f if line.strip()]
    want = [
        # dir, K, alpha, N, ids
        ("gpt2", 3, 1.0, 12, prompt),
        ("gpt2", 4, 0.0, 10, prompt[:3]),
        ("gpt2", 2, -0.5, 8, prompt),
        ("seq2seq", 3, 2.0, 30, sources[0]),
        ("seq2seq", 4, 2.0, 30, sources[1]),
        ("seq2seq", 2, 1.5, 30, sources[2]),
        ("seq2seq", 3, 3.0, 12, sources[2]),
        ("seq2seq", 5, 0.0, 30, sources[1]),
    ]
    lines = []
    with torch.no_grad():
        for name, K, alpha, N, ids in want:
            if name == "gpt2":
                fn, V, eos, max_new = gp_logits(ids), 100, gp_eos, min(N, max(1, gp_max - len(ids)))
            else:
                fn, V, eos, max_new = s2_logits(ids), 47, s2_eos, min(N, max(1, s2_max - 1))
            try:
                best = beam_search(fn, V, K, max_new, eos, alpha)
            except Tight as e:
                print("skipped %s K=%d alpha=%g: too close (%s)" % (name, K, alpha, e))
                continue
            lines.append("%s %d %g %d | %s | %s" % (name, K, alpha, N, " ".join(map(str, ids)),
                                                   " ".join(map(str, best))))
            print(lines[-1])
    assert len(lines) >= 5, "too few decisive cases"
    os.makedirs(os.path.join(GEN, "beam"), exist_ok=True)
    with open(os.path.join(GEN, "beam", "cases"), "w") as f:
        f.write("# made by tools/gen_beam_golden.py: DIR K ALPHA N | IDS | EXPECTED\n")
        f.writelines(line + "\n" for line in lines)


if __name__ == "__main__":
    main()
