"""A tiny LLaMA-style language model written as current public training scripts write one:
rotary position embeddings through complex numbers (``torch.polar``, ``view_as_complex``,
``view_as_real``), RMSNorm and SwiGLU, ``torch.compile(model)`` called unconditionally with
``torch._dynamo.config`` set, a ``@torch.jit.script`` helper, ``AdamW(fused=True)``, memory
figures from ``torch.cuda`` / ``torch.accelerator`` printed every few steps, a
``MultiheadAttention`` head whose ``NonDynamicallyQuantizableLinear`` out_proj the init code
names, a checkpoint whose ``_orig_mod.`` prefix is stripped, and sampling with the in-place
random fills (``exponential_`` for Gumbel-max, ``random_`` for the start token).

Data is a fixed character sequence; ``--deterministic`` sets every weight from NumPy, so torch
and TensorBrain must reach the same loss (the sampling afterwards uses each framework's own
generator and does not enter the loss).
"""
import argparse
import io

import numpy as np
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

TEXT = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
        "and the bird sings a song of the morning sun ") * 4


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


@torch.jit.script
def silu_gate(a, b):
    return F.silu(a) * b


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, freqs_cis):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))
        out = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class Block(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.attention = Attention(dim, n_heads)
        self.w1 = nn.Linear(dim, 2 * dim, bias=False)
        self.w3 = nn.Linear(dim, 2 * dim, bias=False)
        self.w2 = nn.Linear(2 * dim, dim, bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        y = self.ffn_norm(h)
        return h + self.w2(silu_gate(self.w1(y), self.w3(y)))


class Transformer(nn.Module):
    def __init__(self, vocab, dim=32, n_heads=4, n_layers=2, max_seq=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, n_heads) for _ in range(n_layers))
        self.pool = nn.MultiheadAttention(dim, n_heads, batch_first=True)   # a summary head
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim // n_heads, max_seq),
                             persistent=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.modules.linear.NonDynamicallyQuantizableLinear):
            nn.init.zeros_(m.weight)            # the attention head starts as a no-op
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
        elif isinstance(m, nn.Embedding):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, tokens, targets=None):
        _, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[:seqlen]
        for layer in self.layers:
            h = layer(h, freqs_cis)
        mask = torch.triu(torch.ones(seqlen, seqlen, dtype=torch.bool), 1)
        h = h + self.pool(h, h, h, attn_mask=mask, need_weights=False)[0]
        logits = self.output(self.norm(h))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def set_weights_from_numpy(model, seed=0):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue
            p.copy_(torch.from_numpy((0.05 * rng.standard_normal(tuple(p.shape)))
                                     .astype(np.float32)))


def memory_report(step):
    dev = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    used = torch.cuda.memory_allocated() / 2 ** 20
    peak = torch.cuda.max_memory_allocated() / 2 ** 20
    print(f"step {step}: device {dev or 'cpu'}, cuda memory {used:.1f} MiB (peak {peak:.1f})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--compile", type=int, default=1)
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    torch.manual_seed(1337)
    torch._dynamo.config.suppress_errors = True
    torch._dynamo.config.cache_size_limit = 64
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in TEXT], dtype=np.int64)
    model = Transformer(len(chars))
    if args.deterministic:
        set_weights_from_numpy(model)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    if args.compile:
        model = torch.compile(model, backend=args.backend)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                                  weight_decay=0.1, fused=True)
    block, batch = 16, 8
    for step in range(args.steps):
        starts = (np.arange(batch) * 37 + step * 11) % (len(data) - block - 1)
        x = torch.from_numpy(np.stack([data[s:s + block] for s in starts]))
        y = torch.from_numpy(np.stack([data[s + 1:s + block + 1] for s in starts]))
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
            memory_report(step)
    final = loss.item()

    # save a checkpoint without the compile wrapper's prefix, and load it into a fresh model
    state = model.state_dict()
    unwanted_prefix = "_orig_mod."
    state = {k[len(unwanted_prefix):] if k.startswith(unwanted_prefix) else k: v
             for k, v in state.items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    fresh = Transformer(len(chars))
    fresh.load_state_dict(torch.load(buf))
    with torch.no_grad():
        tokens = torch.empty(1, 1, dtype=torch.long).random_(0, len(chars))
        for _ in range(20):
            logits, _ = fresh(tokens[:, -block:])
            probs = F.softmax(logits[:, -1, :], dim=-1)
            gumbel = torch.empty_like(probs).exponential_().log().neg()   # Gumbel-max
            nxt = (probs.log() + gumbel).argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
    print("sample:", "".join(chars[i] for i in tokens[0].tolist()))
    print(f"FINAL_LOSS {final:.6f}")


if __name__ == "__main__":
    main()
