# SPDX-License-Identifier: MIT
"""tiny_gpt.py - a small GPT-2-like model in PyTorch and its data, for the
DDP test (ddp_check.py) and the DDP benchmark (bench/torch_bench.py).

Legend (llm.c style): B batch, T sequence length, C channels, V vocabulary
(256: byte tokens), L layers, NH heads, hs = C / NH; R ranks, r rank.

Data: the bytes of Debian's fortunes (the text the quickstart tokenizes with
GPT-2's BPE; here byte-level, so no tokenizer is needed), or, where the
fortunes package is missing, a fixed pseudo-random byte stream. Batches are
a pure function of (seed, step, rank), so runs over two backends see the
same tokens.
"""
import glob
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.c_attn = nn.Linear(C, 3 * C)   # (C) -> (3C): q, k, v
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.c_attn(x).split(C, dim=2)              # each (B, T, C)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)         # (B, NH, T, hs)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)       # (B, NH, T, T)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)        # (B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, NH)
        self.ln_2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class TinyGPT(nn.Module):
    def __init__(self, V=256, T=32, C=64, L=2, NH=4):
        super().__init__()
        self.wte = nn.Embedding(V, C)        # (V, C), tied with the output head
        self.wpe = nn.Embedding(T, C)        # (T, C)
        self.blocks = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        nn.init.normal_(self.wte.weight, std=0.02)   # GPT-2's init: logits start small
        nn.init.normal_(self.wpe.weight, std=0.01)

    def forward(self, idx, targets):
        B, T = idx.shape                                      # (B, T) tokens
        x = self.wte(idx) + self.wpe(torch.arange(T))         # (B, T, C)
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()           # (B, T, V)
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def corpus(max_bytes=1 << 20):
    """(tokens uint8 tensor, description) of the training text"""
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")) and
                   not os.path.islink(f))
    data = b""
    for f in files:
        with open(f, "rb") as fh:
            data += fh.read()
        if len(data) >= max_bytes:
            break
    if len(data) >= 1 << 16:
        return (torch.frombuffer(bytearray(data[:max_bytes]), dtype=torch.uint8),
                "Debian fortunes, %d bytes as byte tokens" % min(len(data), max_bytes))
    g = torch.Generator().manual_seed(7)
    return (torch.randint(0, 256, (1 << 16,), generator=g, dtype=torch.uint8),
            "synthetic: 65536 pseudo-random bytes (fortunes not installed)")


def batch(tokens, seed, step, rank, R, B, T):
    """rank r's (x, y), each (B, T) int64, of step @step; all ranks draw the
    same R*B offsets and take their own B"""
    g = torch.Generator().manual_seed(seed * 100003 + step)
    off = torch.randint(0, tokens.numel() - T - 1, (R * B,), generator=g)[rank * B:(rank + 1) * B]
    x = torch.stack([tokens[o:o + T] for o in off.tolist()]).long()
    y = torch.stack([tokens[o + 1:o + 1 + T] for o in off.tolist()]).long()
    return x, y
