#!/usr/bin/python3
"""tools/reference_models.py — the PyTorch model zoo behind tfmc's goldens.

Each model family written the way its original codebase writes it (same
module names, so state_dicts carry the real checkpoint names; same math,
including each codebase's mask fill value and LayerNorm flavour):
The Annotated Transformer, bentrevett/pytorch-seq2seq, "NLP with
Transformers" ch. 3 (anatomy), Hugging Face BERT and GPT-2, torch.nn's
Transformer modules and the PyTorch tutorials' models, plus the hooks that
capture attention probabilities.

tools/gen_goldens.py builds goldens from these and re-exports every name,
so `import gen_goldens as gg; gg.BertModel` (bench/workloads.py) works.
"""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

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
