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

# ============================================================================
# The Annotated Transformer (harvardnlp, 2022 edition)
# ============================================================================


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class AnnEncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class AnnGenerator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


class AnnLayerNorm(nn.Module):
    """a_2 * (x - mean) / (std + eps) + b_2 with the unbiased std."""

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class AnnEncoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = AnnLayerNorm(layer.size)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class AnnSublayerConnection(nn.Module):
    """Pre-norm residual: x + dropout(sublayer(norm(x)))."""

    def __init__(self, size, dropout):
        super().__init__()
        self.norm = AnnLayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class AnnEncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(AnnSublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class AnnDecoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = AnnLayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class AnnDecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(AnnSublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


def ann_subsequent_mask(size):
    attn_shape = (1, size, size)
    mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return mask == 0


def ann_attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class AnnMultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # same mask for every head
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = ann_attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class AnnPositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class AnnEmbeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class AnnPositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


def ann_make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8,
                   dropout=0.1, max_len=5000):
    """make_model as in the Annotated Transformer; max_len (the positional
    table's rows, 5000 there) is a parameter here to keep the golden small."""
    c = copy.deepcopy
    attn = AnnMultiHeadedAttention(h, d_model)
    ff = AnnPositionwiseFeedForward(d_model, d_ff, dropout)
    position = AnnPositionalEncoding(d_model, dropout, max_len)
    model = AnnEncoderDecoder(
        AnnEncoder(AnnEncoderLayer(d_model, c(attn), c(ff), dropout), N),
        AnnDecoder(AnnDecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), N),
        nn.Sequential(AnnEmbeddings(d_model, src_vocab), c(position)),
        nn.Sequential(AnnEmbeddings(d_model, tgt_vocab), c(position)),
        AnnGenerator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


# ============================================================================
# bentrevett/pytorch-seq2seq, "6 - Attention is All You Need"
# ============================================================================


class S2SEncoder(nn.Module):
    def __init__(self, input_dim, hid_dim, n_layers, n_heads, pf_dim, dropout,
                 device, max_length=100):
        super().__init__()
        self.device = device
        self.tok_embedding = nn.Embedding(input_dim, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.layers = nn.ModuleList([S2SEncoderLayer(hid_dim, n_heads, pf_dim, dropout, device)
                                     for _ in range(n_layers)])
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim])).to(device)

    def forward(self, src, src_mask):
        batch_size, src_len = src.shape[0], src.shape[1]
        pos = torch.arange(0, src_len).unsqueeze(0).repeat(batch_size, 1).to(self.device)
        src = self.dropout((self.tok_embedding(src) * self.scale) + self.pos_embedding(pos))
        for layer in self.layers:
            src = layer(src, src_mask)
        return src


class S2SEncoderLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, pf_dim, dropout, device):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.ff_layer_norm = nn.LayerNorm(hid_dim)
        self.self_attention = S2SMultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.positionwise_feedforward = S2SPositionwiseFeedforwardLayer(hid_dim, pf_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src, src_mask):
        _src, _ = self.self_attention(src, src, src, src_mask)
        src = self.self_attn_layer_norm(src + self.dropout(_src))
        _src = self.positionwise_feedforward(src)
        src = self.ff_layer_norm(src + self.dropout(_src))
        return src


class S2SMultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, dropout, device):
        super().__init__()
        assert hid_dim % n_heads == 0
        self.hid_dim = hid_dim
        self.n_heads = n_heads
        self.head_dim = hid_dim // n_heads
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([self.head_dim])).to(device)

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        Q = self.fc_q(query)
        K = self.fc_k(key)
        V = self.fc_v(value)
        Q = Q.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = K.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = V.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)
        attention = torch.softmax(energy, dim=-1)
        x = torch.matmul(self.dropout(attention), V)
        x = x.permute(0, 2, 1, 3).contiguous()
        x = x.view(batch_size, -1, self.hid_dim)
        x = self.fc_o(x)
        return x, attention


class S2SPositionwiseFeedforwardLayer(nn.Module):
    def __init__(self, hid_dim, pf_dim, dropout):
        super().__init__()
        self.fc_1 = nn.Linear(hid_dim, pf_dim)
        self.fc_2 = nn.Linear(pf_dim, hid_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.dropout(torch.relu(self.fc_1(x)))
        x = self.fc_2(x)
        return x


class S2SDecoder(nn.Module):
    def __init__(self, output_dim, hid_dim, n_layers, n_heads, pf_dim, dropout,
                 device, max_length=100):
        super().__init__()
        self.device = device
        self.tok_embedding = nn.Embedding(output_dim, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.layers = nn.ModuleList([S2SDecoderLayer(hid_dim, n_heads, pf_dim, dropout, device)
                                     for _ in range(n_layers)])
        self.fc_out = nn.Linear(hid_dim, output_dim)
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim])).to(device)

    def forward(self, trg, enc_src, trg_mask, src_mask):
        batch_size, trg_len = trg.shape[0], trg.shape[1]
        pos = torch.arange(0, trg_len).unsqueeze(0).repeat(batch_size, 1).to(self.device)
        trg = self.dropout((self.tok_embedding(trg) * self.scale) + self.pos_embedding(pos))
        for layer in self.layers:
            trg, attention = layer(trg, enc_src, trg_mask, src_mask)
        output = self.fc_out(trg)
        return output, attention


class S2SDecoderLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, pf_dim, dropout, device):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.enc_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.ff_layer_norm = nn.LayerNorm(hid_dim)
        self.self_attention = S2SMultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.encoder_attention = S2SMultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.positionwise_feedforward = S2SPositionwiseFeedforwardLayer(hid_dim, pf_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, trg, enc_src, trg_mask, src_mask):
        _trg, _ = self.self_attention(trg, trg, trg, trg_mask)
        trg = self.self_attn_layer_norm(trg + self.dropout(_trg))
        _trg, attention = self.encoder_attention(trg, enc_src, enc_src, src_mask)
        trg = self.enc_attn_layer_norm(trg + self.dropout(_trg))
        _trg = self.positionwise_feedforward(trg)
        trg = self.ff_layer_norm(trg + self.dropout(_trg))
        return trg, attention


class S2SSeq2Seq(nn.Module):
    def __init__(self, encoder, decoder, src_pad_idx, trg_pad_idx, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_pad_idx = src_pad_idx
        self.trg_pad_idx = trg_pad_idx
        self.device = device

    def make_src_mask(self, src):
        return (src != self.src_pad_idx).unsqueeze(1).unsqueeze(2)

    def make_trg_mask(self, trg):
        trg_pad_mask = (trg != self.trg_pad_idx).unsqueeze(1).unsqueeze(2)
        trg_len = trg.shape[1]
        trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len), device=self.device)).bool()
        return trg_pad_mask & trg_sub_mask

    def forward(self, src, trg):
        src_mask = self.make_src_mask(src)
        trg_mask = self.make_trg_mask(trg)
        enc_src = self.encoder(src, src_mask)
        output, attention = self.decoder(trg, enc_src, trg_mask, src_mask)
        return output, attention


# ============================================================================
# "Natural Language Processing with Transformers", ch. 3 (Transformer anatomy)
# ============================================================================


def anat_scaled_dot_product_attention(query, key, value, probe=None):
    dim_k = query.size(-1)
    scores = torch.bmm(query, key.transpose(1, 2)) / math.sqrt(dim_k)
    weights = F.softmax(scores, dim=-1)
    if probe is not None:
        probe.append(weights)  # not in the book: lets the golden export them
    return torch.bmm(weights, value)


class AnatAttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim):
        super().__init__()
        self.q = nn.Linear(embed_dim, head_dim)
        self.k = nn.Linear(embed_dim, head_dim)
        self.v = nn.Linear(embed_dim, head_dim)
        self.probe = None

    def forward(self, hidden_state):
        return anat_scaled_dot_product_attention(
            self.q(hidden_state), self.k(hidden_state), self.v(hidden_state), self.probe)


class AnatMultiHeadAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        embed_dim = config.hidden_size
        num_heads = config.num_attention_heads
        head_dim = embed_dim // num_heads
        self.heads = nn.ModuleList([AnatAttentionHead(embed_dim, head_dim)
                                    for _ in range(num_heads)])
        self.output_linear = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_state):
        x = torch.cat([h(hidden_state) for h in self.heads], dim=-1)
        return self.output_linear(x)


class AnatFeedForward(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.linear_1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.linear_2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.gelu = nn.GELU()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x):
        x = self.linear_1(x)
        x = self.gelu(x)
        x = self.linear_2(x)
        return self.dropout(x)


class AnatTransformerEncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer_norm_1 = nn.LayerNorm(config.hidden_size)
        self.layer_norm_2 = nn.LayerNorm(config.hidden_size)
        self.attention = AnatMultiHeadAttention(config)
        self.feed_forward = AnatFeedForward(config)

    def forward(self, x):
        hidden_state = self.layer_norm_1(x)
        x = x + self.attention(hidden_state)
        x = x + self.feed_forward(self.layer_norm_2(x))
        return x


class AnatEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.token_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.dropout = nn.Dropout()

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = torch.arange(seq_length, dtype=torch.long).unsqueeze(0)
        token_embeddings = self.token_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = token_embeddings + position_embeddings
        embeddings = self.layer_norm(embeddings)
        return self.dropout(embeddings)


class AnatTransformerEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = AnatEmbeddings(config)
        self.layers = nn.ModuleList([AnatTransformerEncoderLayer(config)
                                     for _ in range(config.num_hidden_layers)])

    def forward(self, x):
        x = self.embeddings(x)
        for layer in self.layers:
            x = layer(x)
        return x


class AnatTransformerForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.encoder = AnatTransformerEncoder(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, x):
        x = self.encoder(x)[:, 0, :]  # hidden state of the [CLS] token
        x = self.dropout(x)
        return self.classifier(x)


# ============================================================================
# Hugging Face BertForSequenceClassification, written out with HF's names
# ============================================================================


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # persistent, as in the transformers 4.x releases that saved it
        self.register_buffer("position_ids",
                             torch.arange(config.max_position_embeddings).expand((1, -1)))

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(self.dropout(attention_probs), value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))
        return context_layer, attention_probs


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(hidden_states + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask):
        context, probs = self.self(hidden_states, attention_mask)
        return self.output(context, hidden_states), probs


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = nn.GELU()  # ACT2FN["gelu"]: erf form

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(hidden_states + input_tensor)


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask):
        attention_output, probs = self.attention(hidden_states, attention_mask)
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        return layer_output, probs


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask):
        all_probs = []
        for layer_module in self.layer:
            hidden_states, probs = layer_module(hidden_states, attention_mask)
            all_probs.append(probs)
        return hidden_states, all_probs


class BertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def get_extended_attention_mask(self, attention_mask):
        extended = attention_mask[:, None, None, :].to(dtype=self.dtype)
        return (1.0 - extended) * torch.finfo(self.dtype).min

    def forward(self, input_ids, attention_mask, token_type_ids):
        extended_attention_mask = self.get_extended_attention_mask(attention_mask)
        embedding_output = self.embeddings(input_ids, token_type_ids)
        sequence_output, all_probs = self.encoder(embedding_output, extended_attention_mask)
        return sequence_output, self.pooler(sequence_output), all_probs


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids, attention_mask, token_type_ids):
        _, pooled_output, all_probs = self.bert(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.dropout(pooled_output)), all_probs


# ============================================================================
# Hugging Face GPT2LMHeadModel, written out with HF's names
# ============================================================================


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer with the weight stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        w = torch.empty(nx, nf)
        nn.init.normal_(w, std=0.02)
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                           (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config.n_positions
        # persistent buffers, as in the transformers 4.x releases that saved them
        self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions),
                                                           dtype=torch.bool))
                             .view(1, 1, max_positions, max_positions))
        self.register_buffer("masked_bias", torch.tensor(-1e4))
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5,
                                                 dtype=attn_weights.dtype)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length:key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min,
                                dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_weights = self.attn_dropout(attn_weights.type(value.dtype))
        return torch.matmul(attn_weights, value), attn_weights

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))

    def forward(self, hidden_states, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = (self._split_heads(t) for t in (query, key, value))
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = self.resid_dropout(self.c_proj(self._merge_heads(attn_output)))
        return attn_output, attn_weights


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, intermediate_size)
        self.act = GPT2NewGELU()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(4 * config.n_embd, config)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        attn_output, weights = self.attn(self.ln_1(hidden_states), attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = residual + self.mlp(self.ln_2(hidden_states))
        return hidden_states, weights


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def forward(self, input_ids, attention_mask):
        batch_size, seq_len = input_ids.shape
        position_ids = torch.arange(0, seq_len, dtype=torch.long).unsqueeze(0)
        attention_mask = attention_mask.view(batch_size, -1)[:, None, None, :]
        attention_mask = attention_mask.to(dtype=self.dtype)
        attention_mask = (1.0 - attention_mask) * torch.finfo(self.dtype).min
        hidden_states = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        all_weights = []
        for block in self.h:
            hidden_states, weights = block(hidden_states, attention_mask)
            all_weights.append(weights)
        return self.ln_f(hidden_states), all_weights


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_weights()

    def forward(self, input_ids, attention_mask):
        hidden_states, all_weights = self.transformer(input_ids, attention_mask)
        return self.lm_head(hidden_states), all_weights


# ============================================================================
# torch.nn wrappers (embedding + nn.Transformer* + head)
# ============================================================================


def sinusoid_table(n, d):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...), in float64."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    two_i = np.arange(0, d, 2, dtype=np.float64)
    angle = pos / np.power(10000.0, two_i / d)
    pe = np.zeros((n, d))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d // 2])
    return torch.tensor(pe, dtype=torch.float32)


class TorchEncoderModel(nn.Module):
    """nn.Embedding + sinusoidal positions + nn.TransformerEncoder + a head
    (per-token logits, or a classifier on position 0)."""

    def __init__(self, vocab, d, heads, ffn, layers, norm_first, activation,
                 final_norm, n_classes=None, embed_name="embed", head_name="head"):
        super().__init__()
        self.embed_name, self.head_name = embed_name, head_name
        setattr(self, embed_name, nn.Embedding(vocab, d))
        self.register_buffer("pe", sinusoid_table(64, d), persistent=False)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers,
                                             norm=nn.LayerNorm(d) if final_norm else None,
                                             enable_nested_tensor=False)
        self.n_classes = n_classes
        setattr(self, head_name, nn.Linear(d, n_classes if n_classes else vocab))

    def forward(self, tokens, key_padding_mask):
        x = getattr(self, self.embed_name)(tokens) + self.pe[: tokens.size(1)]
        h = self.encoder(x, src_key_padding_mask=key_padding_mask)
        if self.n_classes:
            h = h[:, 0, :]
        return getattr(self, self.head_name)(h)


class TorchTransformerModel(nn.Module):
    """src/tgt embeddings * sqrt(d_model) + sinusoidal positions +
    nn.Transformer + a generator Linear (optionally log_softmax)."""

    def __init__(self, src_vocab, tgt_vocab, d, heads, enc_layers, dec_layers, ffn,
                 norm_first, activation, log_softmax):
        super().__init__()
        self.d_model = d
        self.log_softmax = log_softmax
        self.src_tok = nn.Embedding(src_vocab, d)
        self.tgt_tok = nn.Embedding(tgt_vocab, d)
        self.register_buffer("pe", sinusoid_table(64, d), persistent=False)
        self.transformer = nn.Transformer(d, heads, enc_layers, dec_layers, ffn, dropout=0.1,
                                          activation=activation, batch_first=True,
                                          norm_first=norm_first)
        self.generator = nn.Linear(d, tgt_vocab)

    def forward(self, src, tgt, src_kpm, tgt_kpm):
        scale = math.sqrt(self.d_model)
        s = self.src_tok(src) * scale + self.pe[: src.size(1)]
        t = self.tgt_tok(tgt) * scale + self.pe[: tgt.size(1)]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1)).to(s.dtype)
        h = self.transformer(s, t, tgt_mask=causal, src_key_padding_mask=src_kpm,
                             tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
        out = self.generator(h)
        return F.log_softmax(out, dim=-1) if self.log_softmax else out


class TorchEncDecModel(nn.Module):
    """Separate nn.TransformerEncoder (no final norm) and nn.TransformerDecoder
    (final norm), learned positions, no embedding scale."""

    def __init__(self, src_vocab, tgt_vocab, d, heads, layers, ffn, max_len):
        super().__init__()
        self.src_tok = nn.Embedding(src_vocab, d)
        self.tgt_tok = nn.Embedding(tgt_vocab, d)
        self.src_pos = nn.Embedding(max_len, d)
        self.tgt_pos = nn.Embedding(max_len, d)
        enc_layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, batch_first=True)
        dec_layer = nn.TransformerDecoderLayer(d, heads, ffn, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, layers, norm=None,
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer, layers, norm=nn.LayerNorm(d))
        self.generator = nn.Linear(d, tgt_vocab)

    def forward(self, src, tgt, src_kpm, tgt_kpm):
        s = self.src_tok(src) + self.src_pos(torch.arange(src.size(1)))
        t = self.tgt_tok(tgt) + self.tgt_pos(torch.arange(tgt.size(1)))
        memory = self.encoder(s, src_key_padding_mask=src_kpm)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1)).to(s.dtype)
        h = self.decoder(t, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_kpm,
                         memory_key_padding_mask=src_kpm)
        return self.generator(h)


class AttentionCapture:
    """Makes one nn.MultiheadAttention also return its per-head probabilities
    (need_weights=True, average_attn_weights=False) and checks them: the
    probabilities times the value projection, through out_proj, must give
    the output the module returned."""

    def __init__(self, mha):
        self.mha = mha
        self.probs = None
        self.consistency_err = None

    def __enter__(self):
        mha, cap = self.mha, self

        def forward(query, key, value, **kw):
            kw["need_weights"] = True
            kw["average_attn_weights"] = False
            out, w = type(mha).forward(mha, query, key, value, **kw)
            cap.probs = w
            d, h = mha.embed_dim, mha.num_heads
            v = F.linear(value, mha.in_proj_weight[2 * d:], mha.in_proj_bias[2 * d:])
            b, tk = v.shape[0], v.shape[1]
            v = v.view(b, tk, h, d // h).transpose(1, 2)          # [B,H,Tk,hd]
            mix = torch.matmul(w, v).transpose(1, 2).reshape(b, -1, d)
            ref = mha.out_proj(mix)
            cap.consistency_err = float((ref - out).abs().max())
            return out, w

        mha.forward = forward
        return self

    def __exit__(self, *exc):
        del self.mha.forward
        return False


def torch_layer_mha(model, where):
    """The nn.MultiheadAttention named by a tfmc --attention argument."""
    parts = where.split(".")
    stack = model.transformer if hasattr(model, "transformer") else model
    if parts[0] == "encoder":
        return stack.encoder.layers[int(parts[1])].self_attn
    layer = stack.decoder.layers[int(parts[1])]
    return layer.multihead_attn if len(parts) == 3 else layer.self_attn


class TutorialTokenEmbedding(nn.Module):
    """PyTorch tutorial "Language Translation with nn.Transformer": TokenEmbedding."""

    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class TutorialPositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", sinusoid_table(maxlen, emb_size).unsqueeze(-2))


class TutorialSeq2SeqTransformer(nn.Module):
    """The translation tutorial's model (only its parameter layout is used:
    examples/torchnn_transformer.tfm's weight map is checked against it)."""

    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead,
                 src_vocab_size, tgt_vocab_size, dim_feedforward=512, dropout=0.1):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead,
                                          num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers,
                                          dim_feedforward=dim_feedforward, dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TutorialTokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TutorialTokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = TutorialPositionalEncoding(emb_size, dropout=dropout, maxlen=8)


class TutorialLMPositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoid_table(max_len, d_model).unsqueeze(1))


class TutorialTransformerModel(nn.Module):
    """PyTorch tutorial "Language Modeling with nn.Transformer": a causal LM
    made of nn.TransformerEncoder layers (layout only, see above)."""

    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.pos_encoder = TutorialLMPositionalEncoding(d_model, dropout, max_len=8)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers,
                                                         enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.linear = nn.Linear(d_model, ntoken)


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
    """{preset name: rule text} parsed out of frontend/presets.c."""
    with open(os.path.join(ROOT, "frontend", "presets.c")) as fh:
        src = fh.read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    out = {}
    for m in re.finditer(r'\{\s*"([^"]+)"\s*,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}', src):
        pieces = re.findall(r'"(?:[^"\\]|\\.)*"', m.group(2))
        out[m.group(1)] = "".join(ast.literal_eval(p) for p in pieces)
    return out


def parse_rules(text, where):
    """Weight-block lines -> (preset, root, rules, ignores). A rule is
    (target, xform, source, weight_suffix, bias_suffix)."""
    preset, root, rules, ignores = None, "", [], []
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
        _, _, prules, pign = parse_rules(presets[preset], "preset " + preset)
        pre = [((t, x, root + s, w, b), True) for (t, x, s, w, b) in prules]
        ignores = ignores + [root + p for p in pign]
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


GOLDENS = [golden_annotated, golden_seq2seq, golden_anatomy, golden_bert,
           golden_torchnn_encoder_post_relu, golden_torchnn_encoder_pre_gelu_final,
           golden_torchnn_transformer, golden_torchnn_transformer_prenorm_gelu,
           golden_torchnn_encdec_modules, golden_gpt2]

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
