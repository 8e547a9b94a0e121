"""bench/workloads.py — the benchmark's models and workloads, shared by the
preparation step (bench/prepare.py), the PyTorch timing process
(bench/torch_bench.py) and the orchestrator (bench/bench.py).

A *model* is a PyTorch module built from tools/gen_goldens.py's faithful
definitions (so its state_dict carries the real checkpoint names and a tfmc
weight-map preset reads it unchanged), at full size, with random weights
from a fixed seed, plus the tfmc spec that describes exactly that model.
A *workload* is a model plus one set of inputs (batch, lengths) and a
number of timed runs.

Invariants:
  - every framework computes the same function: tfmc reads the very
    weights.safetensors written from `module.state_dict()`, ONNX Runtime the
    ONNX graph exported from the same module, PyTorch loads the same file;
  - the forward functions here keep no per-layer attention probabilities
    alive (the gen_goldens modules collect them for the goldens; a deployed
    model does not, and keeping them would inflate PyTorch's memory);
  - inputs are int64 token ids (what torch.onnx exports and ONNX Runtime
    takes; tfmc accepts any integer type) and every sequence is full length.
"""

import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_goldens as gg  # noqa: E402
import safetensors_io as stio  # noqa: E402

OPSET = 17  # the highest opset torch 1.13's exporter supports


# ---------------------------------------------------------------------------
# forwards that do not retain attention probabilities
# ---------------------------------------------------------------------------


class BenchBertEncoder(gg.BertEncoder):
    """gg.BertEncoder without the list of every layer's probabilities (HF's
    BertEncoder with output_attentions=False)."""

    def forward(self, hidden_states, attention_mask):
        for layer_module in self.layer:
            hidden_states, _ = layer_module(hidden_states, attention_mask)
        return hidden_states, []


class BenchGPT2Model(gg.GPT2Model):
    """gg.GPT2Model without the probabilities list, and without an additive
    padding mask when none is given (HF's attention_mask=None path)."""

    def forward(self, input_ids, attention_mask=None):
        batch_size, seq_len = input_ids.shape
        position_ids = torch.arange(0, seq_len, dtype=torch.long).unsqueeze(0)
        if attention_mask is not None:
            attention_mask = attention_mask.view(batch_size, -1)[:, None, None, :]
            attention_mask = attention_mask.to(dtype=self.dtype)
            attention_mask = (1.0 - attention_mask) * torch.finfo(self.dtype).min
        hidden_states = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        for block in self.h:
            hidden_states, _ = block(hidden_states, attention_mask)
        return self.ln_f(hidden_states), []


class Wrapped(torch.nn.Module):
    """Runs `fn(inner, *inputs)`: one tensor per tfmc output, in the order
    of Model.outputs (what torch.onnx.export and the timing loop call)."""

    def __init__(self, inner, fn):
        super().__init__()
        self.inner = inner
        self.fn = fn

    def forward(self, *inputs):
        return self.fn(self.inner, *inputs)


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------


class Model:
    """name; facts (gen_goldens.model_block's dict); preset; build() -> a
    randomised nn.Module in eval mode; forward(inner, *inputs) -> outputs;
    inputs / outputs: tfmc tensor names in the order forward takes / returns
    them; max_batch, max_len: the spec's run-time maxima."""

    def __init__(self, name, title, facts, preset, build, forward, inputs, outputs,
                 max_batch, max_len, seed):
        self.name, self.title, self.facts, self.preset = name, title, facts, preset
        self.build_fn, self.forward = build, forward
        self.inputs, self.outputs = inputs, outputs
        self.max_batch, self.max_len, self.seed = max_batch, max_len, seed

    def build(self, randomise=True):
        """The module (eval mode). randomise=False skips the random weights
        (the caller loads a checkpoint over them)."""
        gen = torch.Generator().manual_seed(self.seed)
        torch.manual_seed(self.seed)
        inner = self.build_fn(gen, randomise)
        inner.eval()
        return inner

    def wrapped(self, inner):
        return Wrapped(inner, self.forward).eval()

    def spec_text(self, max_len=None):
        """The spec; max_len: another run-time maximum than the model's
        (a generation workload's prompt + new tokens)."""
        block = gg.model_block(self.name, self.facts).rstrip()
        assert block.endswith("}")
        ml = max_len or self.max_len
        extra = "  %-11s %d\n  %-11s %s\n" % (
            "max_batch", self.max_batch, "max_len",
            "src %d tgt %d" % ml if isinstance(ml, tuple) else str(ml))
        return ("# %s\n# Written by bench/prepare.py from bench/workloads.py; the weights are\n"
                "# random (fixed seed) and stored with the original codebase's names.\n"
                "%s%s}\n\nweights %s {\n  preset \"%s\"\n}\n"
                % (self.title, block[:-1], extra, self.name, self.preset))


def bert_cfg(layers, max_pos):
    return types.SimpleNamespace(vocab_size=30522, hidden_size=768, num_hidden_layers=layers,
                                 num_attention_heads=12, intermediate_size=3072,
                                 max_position_embeddings=max_pos, type_vocab_size=2,
                                 layer_norm_eps=1e-12, pad_token_id=0, num_labels=2,
                                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def bert_model(name, title, layers, max_pos, max_batch, max_len, seed):
    cfg = bert_cfg(layers, max_pos)

    def build(gen, randomise):
        m = gg.BertForSequenceClassification(cfg)
        m.bert.encoder.__class__ = BenchBertEncoder
        if randomise:
            gg.randomise(m, gen, embed_std=0.02)
        return m

    def forward(inner, tokens, token_types, mask):
        return inner(tokens, mask, token_types)[0]

    facts = dict(arch="encoder", vocab=cfg.vocab_size, d_model=cfg.hidden_size,
                 heads=cfg.num_attention_heads, layers=layers,
                 ffn=(cfg.intermediate_size, "gelu"), norm=("post", 1e-12, False),
                 position="learned max %d" % max_pos, embed_norm=1e-12,
                 token_types=cfg.type_vocab_size, tokens=[("pad", 0)],
                 masks=["encoder padding"], head="classifier %d pooler" % cfg.num_labels)
    return Model(name, title, facts, "hf-bert", build, forward,
                 ["tokens", "token_types", "mask"], ["class_logits"], max_batch, max_len, seed)


def gpt2_model():
    cfg = types.SimpleNamespace(vocab_size=50257, n_positions=1024, n_embd=768, n_head=12,
                                n_layer=12, layer_norm_epsilon=1e-5, attn_pdrop=0.1,
                                resid_pdrop=0.1, embd_pdrop=0.1)

    def build(gen, randomise):
        m = gg.GPT2LMHeadModel(cfg)
        m.transformer.__class__ = BenchGPT2Model
        if randomise:
            gg.randomise(m, gen, embed_std=0.05)
        assert m.lm_head.weight is m.transformer.wte.weight
        return m

    def forward(inner, tokens):
        return inner(tokens, None)[0]

    facts = dict(arch="decoder", vocab=cfg.vocab_size, d_model=cfg.n_embd, heads=cfg.n_head,
                 layers=cfg.n_layer, ffn=(4 * cfg.n_embd, "gelu_tanh"),
                 norm=("pre", 1e-5, False), final_norm="yes",
                 position="learned max %d" % cfg.n_positions,
                 masks=["decoder causal"], head="logits tied")
    return Model("gpt2_small", "GPT-2 small (HF GPT2LMHeadModel names): 12 layers, 768, 12 heads, "
                 "vocab 50257, tied head", facts, "hf-gpt2", build, forward,
                 ["tokens"], ["logits"], 1, 128, 21)


def seq2seq_model():
    PAD = 1
    IN, OUT, D, H, PF, L = 7853, 5893, 256, 8, 512, 3

    def build(gen, randomise):
        dev = torch.device("cpu")
        enc = gg.S2SEncoder(IN, D, L, H, PF, 0.1, dev)
        dec = gg.S2SDecoder(OUT, D, L, H, PF, 0.1, dev)
        m = gg.S2SSeq2Seq(enc, dec, PAD, PAD, dev)
        if randomise:
            gg.randomise(m, gen)
        return m

    def forward(inner, src, tgt):
        return inner(src, tgt)[0]

    facts = dict(arch="encoder_decoder", vocab=(IN, OUT), d_model=D, heads=H, layers=(L, L),
                 ffn=(PF, "relu"), norm=("post", 1e-5, False), position="learned max 100",
                 embed_scale="sqrt_d_model", tokens=[("pad", PAD), ("bos", 2), ("eos", 3)],
                 masks=["encoder padding", "decoder causal padding", "cross padding"],
                 head="logits")
    return Model("seq2seq", "bentrevett/pytorch-seq2seq 'Attention is All You Need': d_model 256, "
                 "8 heads, 3+3 layers, d_ff 512, vocab 7853/5893", facts, "pytorch-seq2seq",
                 build, forward, ["src", "tgt"], ["logits"], 1, (24, 24), 31)


def anatomy_model():
    cfg = types.SimpleNamespace(vocab_size=1000, hidden_size=64, num_attention_heads=4,
                                intermediate_size=256, hidden_dropout_prob=0.1,
                                max_position_embeddings=512, num_hidden_layers=2, num_labels=3)

    def build(gen, randomise):
        m = gg.AnatTransformerForSequenceClassification(cfg)
        if randomise:
            gg.randomise(m, gen, embed_std=0.03)
        return m

    def forward(inner, tokens):
        return inner(tokens)

    facts = dict(arch="encoder", vocab=cfg.vocab_size, d_model=cfg.hidden_size,
                 heads=cfg.num_attention_heads, layers=cfg.num_hidden_layers,
                 ffn=(cfg.intermediate_size, "gelu"), norm=("pre", 1e-5, False),
                 position="learned max %d" % cfg.max_position_embeddings, embed_norm=1e-12,
                 head="classifier %d" % cfg.num_labels)
    return Model("anatomy_tiny", "'NLP with Transformers' ch. 3 TransformerForSequenceClassification "
                 "at tiny dims: vocab 1000, d_model 64, 4 heads, 2 layers, d_ff 256", facts,
                 "anatomy", build, forward, ["tokens"], ["class_logits"], 1, 128, 41)


MODELS = {m.name: m for m in [
    bert_model("bert_base", "HF BertForSequenceClassification at bert-base dims: 12 layers, 768, "
               "12 heads, d_ff 3072, GELU, vocab 30522", 12, 512, 8, 128, 11),
    gpt2_model(),
    seq2seq_model(),
    anatomy_model(),
    bert_model("bert_long", "Long-sequence encoder: HF BertForSequenceClassification at bert-base "
               "dims with 2 layers and 2048 learned positions", 2, 2048, 1, 2048, 51),
]}


# ---------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------


def ids(gen, batch, length, low, high):
    return torch.randint(low, high, (batch, length), generator=gen, dtype=torch.int64)


def bert_inputs(batch, length):
    def make(gen):
        tok = ids(gen, batch, length, 1000, 30522)
        tok[:, 0] = 101   # [CLS]
        tok[:, -1] = 102  # [SEP]
        types_ = torch.zeros_like(tok)
        types_[:, length // 2:] = 1
        return {"tokens": tok, "token_types": types_, "mask": torch.ones_like(tok)}
    return make


class Workload:
    """A model, a batch of inputs (make_inputs(gen) -> {name: tensor}) and
    what the report calls it. (How often it is timed is bench.py's RUNS, so
    changing that does not invalidate the prepared files.)

    kind "forward": one forward pass over the inputs; kind "decode": greedy
    generation of new_tokens ids with a KV cache from the inputs (a
    decoder's prompt `tokens`, an encoder_decoder's source `src`), by the
    model's spec with max_len (None: the model's) as the run-time maximum;
    memory_tokens: also generate that many by a tfmc executable for its
    peak RSS (bench/decode.py)."""

    def __init__(self, name, label, model, make_inputs, seed, kind="forward", new_tokens=None,
                 max_len=None, memory_tokens=None):
        self.name, self.label, self.model = name, label, MODELS[model]
        self.make_inputs, self.seed = make_inputs, seed
        self.kind, self.new_tokens, self.max_len = kind, new_tokens, max_len
        self.memory_tokens = memory_tokens

    def inputs(self):
        return self.make_inputs(torch.Generator().manual_seed(self.seed))


WORKLOADS = [
    Workload("bert_b1", "bert-base seq 128 batch 1", "bert_base", bert_inputs(1, 128), 101),
    Workload("bert_b8", "bert-base seq 128 batch 8", "bert_base", bert_inputs(8, 128), 102),
    Workload("gpt2_prefill", "gpt2-small prefill 128", "gpt2_small",
             lambda g: {"tokens": ids(g, 1, 128, 0, 50257)}, 103),
    Workload("seq2seq", "seq2seq 24+24 tokens", "seq2seq",
             lambda g: {"src": torch.cat([torch.full((1, 1), 2), ids(g, 1, 22, 4, 7853),
                                          torch.full((1, 1), 3)], 1),
                        "tgt": torch.cat([torch.full((1, 1), 2), ids(g, 1, 23, 4, 5893)], 1)},
             104),
    Workload("anatomy_tiny", "tiny classifier seq 128", "anatomy_tiny",
             lambda g: {"tokens": ids(g, 1, 128, 0, 1000)}, 105),
    Workload("bert_long", "encoder seq 2048 (2 layers)", "bert_long", bert_inputs(1, 2048), 106),
    # generation (bench/decode.py): the spec's max_len fits the memory run's
    # 32 + 512 tokens; the GPT-2 spec has no eos, so every run makes all ids
    Workload("gpt2_decode", "gpt2-small greedy decode, 32-token prompt + 128 new",
             "gpt2_small", lambda g: {"tokens": ids(g, 1, 32, 0, 50257)}, 107, kind="decode",
             new_tokens=128, max_len=32 + 512, memory_tokens=512),
    # a full 24-token source (bos ... eos); prepare.py checks that PyTorch's
    # 24 greedy ids hold no eos (and no pad), so no framework stops early;
    # the target max_len counts bos and the 24 ids (tfmc stops when prompt +
    # generated ids reach max_len)
    Workload("seq2seq_decode", "seq2seq greedy translation, 24-token source -> 24 new",
             "seq2seq", lambda g: {"src": torch.cat([torch.full((1, 1), 2), ids(g, 1, 22, 4, 7853),
                                                     torch.full((1, 1), 3)], 1)},
             108, kind="decode", new_tokens=24, max_len=(24, 1 + 24)),
]
DECODE_WORKLOADS = [w for w in WORKLOADS if w.kind == "decode"]
WORKLOAD_BY_NAME = {w.name: w for w in WORKLOADS}


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------


def model_dir(work, model):
    return os.path.join(work, "models", model.name)


def load_weights_into(module, path):
    """Reads an F32 safetensors file straight into the module's parameters
    and buffers (no second copy of the weights is ever resident, so the
    process's peak RSS is the model's, not the loader's). Every state_dict
    entry must be in the file with its shape."""
    import json
    import struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        base = 8 + n
        state = module.state_dict(keep_vars=True)
        for name, t in state.items():
            info = header.get(name)
            if info is None:
                raise ValueError("%s: no tensor %s" % (path, name))
            if list(t.shape) != info["shape"]:
                raise ValueError("%s: %s is %s, the model wants %s" %
                                 (path, name, info["shape"], list(t.shape)))
            want = {torch.float32: "F32", torch.int64: "I64", torch.bool: "BOOL"}[t.dtype]
            if info["dtype"] != want:
                raise ValueError("%s: %s is %s, the model wants %s" %
                                 (path, name, info["dtype"], want))
            begin, end = info["data_offsets"]
            dst = t.detach().numpy().reshape(-1).view(np.uint8)
            if dst.size != end - begin:
                raise ValueError("%s: %s has %d bytes" % (path, name, end - begin))
            f.seek(base + begin)
            if f.readinto(dst) != dst.size:
                raise ValueError("%s: %s is truncated" % (path, name))


def read_inputs(path, model):
    tensors, _ = stio.read(path)
    return [torch.from_numpy(np.array(tensors[n], copy=True)) for n in model.inputs]
