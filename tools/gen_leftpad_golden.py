#!/usr/bin/python3
"""Goldens for generation over a batch of padded prompts (tfmc run --generate
--inputs with B > 1).

Decoder: the small GPT-2 of tools/gen_generate_golden.py (the same seed, so
the same weights as tests/generate/gpt2/weights.safetensors, checked), with
an eos id, generates greedily for a left-padded batch of 3 prompts of
different lengths the way Hugging Face's generate does it for GPT-2:

    position_ids = attention_mask.cumsum(-1) - 1   (pads: 1, never read)
    the attention mask extended by a 1 per step, past keys / values
    a finished row (eos) gets pad_token_id fed, its ids no longer counted

It checks that each row's ids are those of its prompt alone (batch 1, no
padding, a KV cache), that no live step is a near tie, and writes

    tests/generate/leftpad/generate.tfm        the spec (preset hf-gpt2, eos set)
    tests/generate/leftpad/inputs.safetensors  tokens i64 [3,T] left-padded, mask i64 [3,T]
    tests/generate/leftpad/inputs_right.safetensors  the same prompts right-padded
    tests/generate/leftpad/expected.safetensors generated i64 [3,N] (-1 after a
                                               row's end), generated_lengths i64 [3],
                                               step_logits f32 [N,3,V] (a row's logits
                                               at each step it was live; 0 after)
    tests/generate/leftpad/bad_mask_*.safetensors  inputs to be refused (mask shape,
                                               a row of pads only, padding between real tokens)
    tests/generate/leftpad/expected            each row's ids, a line per row
    tests/generate/leftpad/prompts             each prompt alone, a line per row
    tests/generate/leftpad/steps               the --generate count

Encoder_decoder: the sources of tests/generate/seq2seq (made by
tools/gen_translate_golden.py; translate_sentence per source is its
`expected`) as one batch:

    tests/generate/seq2seq/batch.safetensors       src i64 [3,S] right-padded with <pad>
                                                   (the mask comes from the pad id)
    tests/generate/seq2seq/batch_left.safetensors  src left-padded, src_mask i64 [3,S]

tests/generate/run_leftpad.sh and tests/e2e/test_generate_batch.c read them.
Re-run: /usr/bin/python3 tools/gen_leftpad_golden.py
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402
from gen_generate_golden import CFG, SEED, SPEC, hf_step  # noqa: E402
from gen_goldens import randomise, weights_tensors  # noqa: E402
from reference_models import GPT2LMHeadModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "generate", "leftpad")
SEQ2SEQ = os.path.join(ROOT, "tests", "generate", "seq2seq")
PROMPTS = [[17, 3, 42, 8, 99, 5], [7, 23], [64, 1, 2, 90]]
PAD_FEED = 0  # the id HF feeds a finished row (pad_token_id); its logits are never read
N_NEW = 16
MIN_MARGIN = 1e-3
SEQ2SEQ_PAD = 1


def positions(mask):
    """prepare_inputs_for_generation: cumsum(mask) - 1, pads at 1."""
    pos = mask.long().cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


def hf_generate(model, tokens, mask, eos, n_new):
    """Greedy generation of a (left-padded) batch, HF style. Returns per
    row its ids, and per step the [B,V] logits and which rows were live."""
    rows = tokens.size(0)
    logits, past = hf_step(model, tokens, mask, positions(mask), [None] * CFG.n_layer)
    unfinished = torch.ones(rows, dtype=torch.long)
    ids = [[] for _ in range(rows)]
    steps, live = [], []
    for i in range(n_new):
        steps.append(logits.clone())
        live.append(unfinished.clone())
        nxt = torch.argmax(logits, dim=-1)
        nxt = nxt * unfinished + PAD_FEED * (1 - unfinished)
        for b in range(rows):
            if unfinished[b]:
                ids[b].append(int(nxt[b]))
        if eos is not None:
            unfinished = unfinished * (nxt != eos).long()
        if int(unfinished.max()) == 0 or i + 1 == n_new:
            break
        mask = torch.cat([mask, torch.ones(rows, 1, dtype=mask.dtype)], dim=1)
        logits, past = hf_step(model, nxt[:, None], mask, positions(mask)[:, -1:], past)
    return ids, steps, live


def pad_batch(prompts, left):
    t = max(len(p) for p in prompts)
    tokens = torch.zeros(len(prompts), t, dtype=torch.long)
    mask = torch.zeros(len(prompts), t, dtype=torch.long)
    for b, p in enumerate(prompts):
        sl = slice(t - len(p), t) if left else slice(0, len(p))
        tokens[b, sl] = torch.tensor(p)
        mask[b, sl] = 1
    return tokens, mask


def choose_eos(free_ids):
    """An eos that ends some row early and lets another run to N_NEW: a row's
    id at step 3..8 that row had not produced before and some other row never
    produces."""
    for b, row in enumerate(free_ids):
        for k in range(3, 9):
            e = row[k]
            if e in row[:k]:
                continue
            if any(e not in other for c, other in enumerate(free_ids) if c != b):
                return e
    raise SystemExit("no eos candidate: pick other prompts")


def decoder_golden():
    gen = torch.Generator().manual_seed(SEED)
    model = GPT2LMHeadModel(CFG)
    randomise(model, gen, gain=3.0, embed_std=0.1)
    model.eval()
    # the same weights as the batch-1 golden's
    ref, _ = stio.read(os.path.join(ROOT, "tests", "generate", "gpt2", "weights.safetensors"))
    for name, arr in weights_tensors(model, "F32").items():
        assert np.array_equal(ref[name], arr), "weights differ from tests/generate/gpt2: " + name
    tokens, mask = pad_batch(PROMPTS, left=True)
    with torch.no_grad():
        free, _, _ = hf_generate(model, tokens, mask, None, N_NEW)
        eos = choose_eos(free)
        ids, steps, live = hf_generate(model, tokens, mask, eos, N_NEW)
        worst = float("inf")
        for s, lv in zip(steps, live):
            for b in range(len(PROMPTS)):
                if lv[b]:
                    top = torch.topk(s[b], 2).values
                    worst = min(worst, float(top[0] - top[1]))
        # each row is its prompt alone (batch 1, no padding, same eos)
        for b, p in enumerate(PROMPTS):
            one = torch.tensor([p])
            alone, alone_steps, _ = hf_generate(model, one, torch.ones_like(one), eos, N_NEW)
            assert alone[0] == ids[b], "row %d: batch %s, alone %s" % (b, ids[b], alone[0])
            for k in range(len(ids[b])):
                assert float((alone_steps[k][0] - steps[k][b]).abs().max()) < 1e-4, (b, k)
    assert worst > MIN_MARGIN, "a near tie (margin %g): pick other prompts" % worst
    assert any(len(r) < N_NEW for r in ids) and any(len(r) == N_NEW for r in ids)
    n = max(len(r) for r in ids)
    rows, vocab = len(PROMPTS), CFG.vocab_size
    generated = np.full((rows, n), -1, dtype=np.int64)
    step_logits = np.zeros((n, rows, vocab), dtype=np.float32)
    for b, r in enumerate(ids):
        generated[b, :len(r)] = r
        for k in range(len(r)):
            step_logits[k, b] = steps[k][b].numpy()
    os.makedirs(OUT, exist_ok=True)
    spec = SPEC.replace("tests/generate/run_generate.sh: greedy generation with a KV cache against\n"
                        "# PyTorch. Made by tools/gen_generate_golden.py; no eos, so it runs N tokens.",
                        "tests/generate/run_leftpad.sh: a left-padded batch of prompts against\n"
                        "# Hugging Face-style generation. Made by tools/gen_leftpad_golden.py.")
    spec = spec.replace("gpt2_generate", "gpt2_leftpad")
    spec = spec.replace("  mask        decoder causal\n",
                        "  tokens      eos %d\n  mask        decoder causal\n" % eos)
    assert "eos %d" % eos in spec and "gen_leftpad_golden" in spec
    with open(os.path.join(OUT, "generate.tfm"), "w") as f:
        f.write(spec)
    stio.write(os.path.join(OUT, "inputs.safetensors"),
               {"tokens": tokens.numpy(), "mask": mask.numpy()})
    rt, rm = pad_batch(PROMPTS, left=False)
    stio.write(os.path.join(OUT, "inputs_right.safetensors"),
               {"tokens": rt.numpy(), "mask": rm.numpy()})
    # bad inputs the tests expect refused: a mask that is not [B,T], a row
    # with no real token, a row with padding between its real tokens
    tk, mk = tokens.numpy(), mask.numpy()
    stio.write(os.path.join(OUT, "bad_mask_shape.safetensors"), {"tokens": tk, "mask": mk[:, 1:]})
    zero = mk.copy()
    zero[1] = 0
    stio.write(os.path.join(OUT, "bad_mask_zero_row.safetensors"), {"tokens": tk, "mask": zero})
    holes = mk.copy()
    holes[0, -2] = 0
    stio.write(os.path.join(OUT, "bad_mask_holes.safetensors"), {"tokens": tk, "mask": holes})
    stio.write(os.path.join(OUT, "expected.safetensors"),
               {"generated": generated,
                "generated_lengths": np.array([len(r) for r in ids], dtype=np.int64),
                "step_logits": step_logits})
    with open(os.path.join(OUT, "expected"), "w") as f:
        f.write("".join(" ".join(map(str, r)) + "\n" for r in ids))
    with open(os.path.join(OUT, "prompts"), "w") as f:
        f.write("".join(" ".join(map(str, p)) + "\n" for p in PROMPTS))
    with open(os.path.join(OUT, "steps"), "w") as f:
        f.write("%d\n" % N_NEW)
    print("gpt2_leftpad: eos %d, lengths %s, smallest top-2 margin %.3g" %
          (eos, [len(r) for r in ids], worst))


def seq2seq_batch():
    with open(os.path.join(SEQ2SEQ, "sources")) as f:
        sources = [list(map(int, line.split())) for line in f if line.strip()]
    s = max(len(x) for x in sources)
    right = np.full((len(sources), s), SEQ2SEQ_PAD, dtype=np.int64)
    left = np.full((len(sources), s), SEQ2SEQ_PAD, dtype=np.int64)
    left_mask = np.zeros((len(sources), s), dtype=np.int64)
    for b, x in enumerate(sources):
        assert SEQ2SEQ_PAD not in x
        right[b, :len(x)] = x
        left[b, s - len(x):] = x
        left_mask[b, s - len(x):] = 1
    stio.write(os.path.join(SEQ2SEQ, "batch.safetensors"), {"src": right})
    stio.write(os.path.join(SEQ2SEQ, "batch_left.safetensors"),
               {"src": left, "src_mask": left_mask})
    print("seq2seq batch: %d sources padded to %d" % (len(sources), s))


if __name__ == "__main__":
    decoder_golden()
    seq2seq_batch()
