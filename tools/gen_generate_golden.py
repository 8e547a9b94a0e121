#!/usr/bin/python3
"""Golden for greedy generation with a KV cache (tfmc run --generate).

Builds a small GPT-2 (tools/reference_models.py's GPT2LMHeadModel: HF names,
Conv1D weights, fused c_attn, tied lm_head) with fixed-seed random weights,
decodes greedily in PyTorch with a KV cache (past keys / values per layer,
the new token's query attending over them: GPT2Attention._attn's causal
slice handles query_length < key_length), checks that a full recomputation
of every prefix picks the same ids, that no step is a near tie (so f32
rounding cannot flip an argmax) and writes

    tests/generate/gpt2/generate.tfm       the spec (preset hf-gpt2)
    tests/generate/gpt2/weights.safetensors the state_dict, names untouched
    tests/generate/gpt2/prompt             the prompt ids, one line
    tests/generate/gpt2/expected           the generated ids, one line

tests/generate/run_generate.sh compares `tfmc run --generate` with them.
Re-run: /usr/bin/python3 tools/gen_generate_golden.py
"""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as stio  # noqa: E402
from gen_goldens import randomise, weights_tensors  # noqa: E402
from reference_models import GPT2LMHeadModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "generate", "gpt2")
SEED = 1234
PROMPT = [17, 3, 42, 8, 99, 5]
N_NEW = 20
MIN_MARGIN = 1e-3  # top-1 minus top-2 logit at every step

CFG = types.SimpleNamespace(vocab_size=100, n_positions=64, n_embd=32, n_head=4, n_layer=2,
                            layer_norm_epsilon=1e-5, attn_pdrop=0.0, resid_pdrop=0.0,
                            embd_pdrop=0.0)

SPEC = """# GPT-2 (tools/reference_models.py GPT2LMHeadModel, HF names) for
# tests/generate/run_generate.sh: greedy generation with a KV cache against
# PyTorch. Made by tools/gen_generate_golden.py; no eos, so it runs N tokens.
model gpt2_generate {
  arch        decoder
  vocab       100
  d_model     32
  heads       4
  layers      2
  ffn         128 gelu_tanh
  norm        pre eps 1e-5
  final_norm  yes
  position    learned max 64
  mask        decoder causal
  head        logits tied
}

weights gpt2_generate {
  preset "hf-gpt2"
}
"""


def hf_step(model, ids, attention_mask, position_ids, past, last_only=False):
    """GPT2LMHeadModel.forward(input_ids, attention_mask, position_ids,
    past_key_values) as transformers 4.x runs it: the additive mask
    (1 - mask) * finfo.min over the keys (attention_mask None: none),
    GPT2Attention._attn's causal slice for query_length < key_length; past:
    per layer (k, v) [B,H,P,dh] or None. Returns (last position's logits
    [B,V], new past). last_only: the final norm and the LM head on the last
    position only (transformers' generate with logits_to_keep=1, what
    bench/decode.py times), the same logits."""
    tr = model.transformer
    h = tr.wte(ids) + tr.wpe(position_ids)
    am = None
    if attention_mask is not None:
        am = attention_mask[:, None, None, :].to(h.dtype)
        am = (1.0 - am) * torch.finfo(h.dtype).min
    new_past = []
    for block, kv in zip(tr.h, past):
        attn = block.attn
        x = block.ln_1(h)
        q, k, v = attn.c_attn(x).split(attn.split_size, dim=2)
        q, k, v = (attn._split_heads(t) for t in (q, k, v))
        if kv is not None:
            k = torch.cat([kv[0], k], dim=2)
            v = torch.cat([kv[1], v], dim=2)
        new_past.append((k, v))
        out, _ = attn._attn(q, k, v, am)
        h = h + attn.c_proj(attn._merge_heads(out))
        h = h + block.mlp(block.ln_2(h))
    if last_only:
        h = h[:, -1:]
    return model.lm_head(tr.ln_f(h))[:, -1], new_past


def step(model, ids, past):
    """One unpadded sequence: logits of the last new token [V] at positions
    P.. after the past, and the new past."""
    p = 0 if past[0] is None else past[0][0].size(2)
    pos = torch.arange(p, p + ids.size(1)).unsqueeze(0)
    logits, new_past = hf_step(model, ids, None, pos, past)
    return logits[0], new_past


def margin(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def main():
    gen = torch.Generator().manual_seed(SEED)
    model = GPT2LMHeadModel(CFG)
    randomise(model, gen, gain=3.0, embed_std=0.1)
    model.eval()
    ids = list(PROMPT)
    with torch.no_grad():
        logits, past = step(model, torch.tensor([PROMPT]), [None] * CFG.n_layer)
        out = []
        worst = float("inf")
        for i in range(N_NEW):
            worst = min(worst, margin(logits))
            nxt = int(torch.argmax(logits))
            # full recomputation of the prefix picks the same id
            full, _ = model(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.int64))
            assert int(torch.argmax(full[0, -1])) == nxt, "step %d: cache and full disagree" % i
            assert float((full[0, -1] - logits).abs().max()) < 1e-4
            out.append(nxt)
            ids.append(nxt)
            if i + 1 < N_NEW:
                logits, past = step(model, torch.tensor([[nxt]]), past)
    assert worst > MIN_MARGIN, "a near tie (margin %g): pick another seed" % worst
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "generate.tfm"), "w") as f:
        f.write(SPEC)
    stio.write(os.path.join(OUT, "weights.safetensors"), weights_tensors(model, "F32"))
    with open(os.path.join(OUT, "prompt"), "w") as f:
        f.write(" ".join(map(str, PROMPT)) + "\n")
    with open(os.path.join(OUT, "expected"), "w") as f:
        f.write(" ".join(map(str, out)) + "\n")
    print("gpt2_generate: %d new ids, smallest top-2 margin %.3g: %s" % (N_NEW, worst, out))


if __name__ == "__main__":
    main()
