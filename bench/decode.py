"""bench/decode.py — the generation workloads' PyTorch side: greedy decoding
with a KV cache, as a deployment writes it, and the GPT-2 step model that
ONNX Runtime runs. Used by bench/prepare.py (reference ids, the ONNX
export) and bench/torch_bench.py (the timed loop).

GPT-2: Hugging Face-style generation over the bench's GPT2LMHeadModel
(tools/reference_models.py): the prompt is one step with no past, then one
step per new token with past_key_values (per layer K/V [1,H,P,dh] grown by
torch.cat), GPT2Attention._attn's causal slice, position_ids P..P+T-1, the
final norm and the tied LM head on the last position only
(gen_generate_golden.hf_step(last_only=True): transformers' generate with
logits_to_keep=1, which is also what tfmc's step computes), argmax.

seq2seq (bentrevett/pytorch-seq2seq, "Attention is All You Need"): the
encoder once over the source, every decoder layer's cross-attention keys
and values projected once from its output, then per new token one decoder
step over the new token only, its self-attention keys / values appended to
a cache, the modules' own layers, scales and masks (translate_sentence
without recomputing the prefix: what tfmc's encode and step programs do).
The target starts at bos (2); the step does not mask generated pad ids (as
tfmc's does not), so prepare.py checks that the reference ids hold none.

Invariants: a step computes exactly the module's function (prepare.py
checks the ids against full forward passes of the prefix); nothing here
stops at eos: the caller asks for N ids and gets N (the workloads are
chosen so no eos comes up, and the harness checks every framework's
count).
"""

import time

import torch

import workloads as wl
from gen_generate_golden import hf_step  # noqa: E402  (tools/ is on the path via workloads)

S2S_BOS = 2
# the warm-up generation before timed ones (PyTorch, ORT): long enough to
# touch every weight and warm the allocator, short next to a timed run
WARMUP_IDS = 16


# ---------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------


def gpt2_step(model, ids, past):
    """One step: ids [1,T] at positions P..P+T-1 after the past (per layer
    (k, v) or None); returns (last position's logits [V], new past)."""
    p = 0 if past[0] is None else past[0][0].size(2)
    pos = torch.arange(p, p + ids.size(1)).unsqueeze(0)
    logits, new_past = hf_step(model, ids, None, pos, past, last_only=True)
    return logits[0], new_past


class GPT2Step(torch.nn.Module):
    """The step as one ONNX graph: (input_ids [1,T], position_ids [1,T],
    past.0.key, past.0.value, ... [1,H,P,dh]) -> (logits [1,V] of the last
    position, present.0.key, present.0.value, ... [1,H,P+T,dh]); prefill
    passes P = 0 (empty past tensors)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, position_ids, *past):
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        logits, new = hf_step(self.inner, input_ids, None, position_ids, pairs, last_only=True)
        return (logits,) + tuple(t for kv in new for t in kv)


def gpt2_step_names(n_layer):
    past = [n for i in range(n_layer) for n in ("past.%d.key" % i, "past.%d.value" % i)]
    present = [n for i in range(n_layer) for n in ("present.%d.key" % i, "present.%d.value" % i)]
    return past, present


def export_gpt2_step(inner, path):
    """torch.onnx.export of GPT2Step at opset wl.OPSET, traced with a
    3-token step after a 2-position past; the token and past lengths are
    dynamic axes."""
    import warnings
    n_layer = len(inner.transformer.h)
    heads = inner.transformer.h[0].attn.num_heads
    dh = inner.transformer.h[0].attn.head_dim
    past_names, present_names = gpt2_step_names(n_layer)
    ids = torch.tensor([[5, 6, 7]])
    pos = torch.tensor([[2, 3, 4]])
    past = [torch.zeros(1, heads, 2, dh) for _ in past_names]
    dyn = {"input_ids": {1: "T"}, "position_ids": {1: "T"}}
    dyn.update({n: {2: "P"} for n in past_names})
    dyn.update({n: {2: "L"} for n in present_names})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(GPT2Step(inner).eval(), (ids, pos, *past), path,
                          input_names=["input_ids", "position_ids"] + past_names,
                          output_names=["logits"] + present_names, opset_version=wl.OPSET,
                          do_constant_folding=True, dynamic_axes=dyn)


# ---------------------------------------------------------------------------
# seq2seq
# ---------------------------------------------------------------------------


def _heads(x, a):
    return x.view(x.size(0), -1, a.n_heads, a.head_dim).permute(0, 2, 1, 3)


def _attend(a, q, k, v, mask=None):
    """S2SMultiHeadAttentionLayer.forward after its projections."""
    energy = torch.matmul(q, k.permute(0, 1, 3, 2)) / a.scale
    if mask is not None:
        energy = energy.masked_fill(mask == 0, -1e10)
    x = torch.matmul(torch.softmax(energy, dim=-1), v)
    x = x.permute(0, 2, 1, 3).contiguous().view(q.size(0), -1, a.hid_dim)
    return a.fc_o(x)


def s2s_encode(model, src):
    """The encoder once; per decoder layer the cross-attention K/V of its
    output. Returns (src_mask, [(k, v)] per layer)."""
    src_mask = model.make_src_mask(src)
    enc = model.encoder(src, src_mask)
    cross = []
    for layer in model.decoder.layers:
        a = layer.encoder_attention
        cross.append((_heads(a.fc_k(enc), a), _heads(a.fc_v(enc), a)))
    return src_mask, cross


def s2s_step(model, tok, pos, cache, cross, src_mask):
    """One target token tok [1,1] at position pos: S2SDecoder.forward for
    the new token over the cached self-attention K/V (cache: per layer
    (k, v) or None, updated in place) and the cross K/V; logits [V]."""
    dec = model.decoder
    x = dec.tok_embedding(tok) * dec.scale + dec.pos_embedding(torch.tensor([[pos]]))
    for i, layer in enumerate(dec.layers):
        sa = layer.self_attention
        q, k, v = (_heads(f(x), sa) for f in (sa.fc_q, sa.fc_k, sa.fc_v))
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        x = layer.self_attn_layer_norm(x + _attend(sa, q, k, v))
        ea = layer.encoder_attention
        x = layer.enc_attn_layer_norm(x + _attend(ea, _heads(ea.fc_q(x), ea), cross[i][0],
                                                  cross[i][1], src_mask))
        x = layer.ff_layer_norm(x + layer.positionwise_feedforward(x))
    return dec.fc_out(x)[0, -1]


# ---------------------------------------------------------------------------
# the greedy loop, timed as tfmc's rt_generate times it
# ---------------------------------------------------------------------------


def greedy(w, inner, inputs, n_new, keep_logits=False):
    """Greedy generation of n_new ids for workload w (inputs: the tensors
    wl.read_inputs gives, in the model's input order). Returns a dict:
    ids (list), encode_ms (seq2seq), prefill_ms (the first step: the
    prompt, or bos), decode_ms (every later step and every argmax),
    total_ms, and with keep_logits the logits of every step. Timing as
    rt_generate: prefill is the first step alone; the decode time runs
    from there to the last id."""
    out, logits_all = [], []
    t0 = time.perf_counter()
    if w.model.name == "gpt2_small":
        enc_ms = 0.0
        past = [None] * len(inner.transformer.h)
        a = time.perf_counter()
        logits, past = gpt2_step(inner, inputs[0], past)
        pre_ms = (time.perf_counter() - a) * 1e3
        b = time.perf_counter()
        for i in range(n_new):
            if keep_logits:
                logits_all.append(logits)
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            if i + 1 < n_new:
                logits, past = gpt2_step(inner, torch.tensor([[nxt]]), past)
    elif w.model.name == "seq2seq":
        src_mask, cross = s2s_encode(inner, inputs[0])
        enc_ms = (time.perf_counter() - t0) * 1e3
        cache = [None] * len(inner.decoder.layers)
        a = time.perf_counter()
        logits = s2s_step(inner, torch.tensor([[S2S_BOS]]), 0, cache, cross, src_mask)
        pre_ms = (time.perf_counter() - a) * 1e3
        b = time.perf_counter()
        for i in range(n_new):
            if keep_logits:
                logits_all.append(logits)
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            if i + 1 < n_new:
                logits = s2s_step(inner, torch.tensor([[nxt]]), i + 1, cache, cross, src_mask)
    else:
        raise ValueError("no decode loop for model %s" % w.model.name)
    end = time.perf_counter()
    return {"ids": out, "encode_ms": enc_ms, "prefill_ms": pre_ms,
            "decode_ms": (end - b) * 1e3, "total_ms": (end - t0) * 1e3,
            "logits": logits_all if keep_logits else None}


def full_forward_ids(w, inner, inputs, ids):
    """The argmax at every generated position of one full forward pass over
    the prefix (prompt + ids[:-1], or bos + ids[:-1] for seq2seq): what the
    cache must agree with."""
    if w.model.name == "gpt2_small":
        seq = torch.cat([inputs[0], torch.tensor([ids[:-1]])], 1)
        logits = w.model.forward(inner, seq)[0]
        return [int(x) for x in torch.argmax(logits[inputs[0].size(1) - 1:], -1)]
    tgt = torch.tensor([[S2S_BOS] + ids[:-1]])
    logits = w.model.forward(inner, inputs[0], tgt)[0]
    return [int(x) for x in torch.argmax(logits, -1)]
