"""Sequence-model training steps: TensorBrain vs torch, side by side in one process.

Two workloads, each written once and built from ``tb.nn`` and from ``torch.nn``
with the same weights:

* ``lstm``: the word-language-model step (PyTorch's examples/word_language_model): Embedding
  (1000 words, 200) -> dropout -> 2-layer LSTM (hidden 200, dropout 0.2) -> dropout ->
  Linear(200, 1000), cross-entropy over seq 35 x batch 20, ``clip_grad_norm_(0.25)``, SGD;
  the hidden state is carried from step to step and detached, as the example does.
* ``gpt``: a 6-layer character-level GPT (nanoGPT's layout): token + position embedding
  (65 chars, 256), 6 pre-norm blocks of causal ``F.scaled_dot_product_attention`` (8 heads)
  and a GELU MLP (1024), final LayerNorm, Linear head; T=128, B=8, AdamW.

One thread each (torch intra-op threads and BLAS via threadpoolctl), process CPU time per step,
median of alternating rounds (on a shared machine wall time swings; CPU-time ratios hold).

    python benchmarks/rnn.py                          # both workloads
    python benchmarks/rnn.py --model lstm --rounds 9 --steps 5

Goal (not asserted anywhere): each within 1.25x torch's step time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tensorbrain as tb  # noqa: E402

import _common  # noqa: E402


# ***** models, written once for either framework *****
def lstm_lm(nn, ntoken=1000, ninp=200, nhid=200, nlayers=2, dropout=0.2):
    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, x, hidden):
            emb = self.drop(self.encoder(x))
            out, hidden = self.rnn(emb, hidden)
            return self.decoder(self.drop(out)).view(-1, ntoken), hidden
    return RNNModel()


def char_gpt(nn, F, vocab=65, n_embd=256, n_head=8, n_layer=6, block=128):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab)

        def forward(self, idx, pos):
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))
    return GPT()


def _copy_weights(src, dst, lib):
    state = {k: lib.tensor(np.array(v.detach().numpy())) for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


# ***** one training step per framework *****
def lstm_step(lib, model, x, y, B=20, nhid=200, nlayers=2, lr=20.0):
    opt = lib.optim.SGD(model.parameters(), lr=lr)
    xt, yt = lib.from_numpy(x), lib.from_numpy(y)
    hidden = [(lib.zeros(nlayers, B, nhid), lib.zeros(nlayers, B, nhid))]

    def step():
        h = tuple(t.detach() for t in hidden[0])
        opt.zero_grad()
        out, hidden[0] = model(xt, h)
        loss = lib.nn.functional.cross_entropy(out, yt)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
    return step


def gpt_step(lib, model, x, y, T=128):
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4)
    xt, yt = lib.from_numpy(x), lib.from_numpy(y)
    pos = lib.from_numpy(np.arange(T, dtype=np.int64))

    def step():
        opt.zero_grad()
        logits = model(xt, pos)
        loss = lib.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), yt.view(-1))
        loss.backward()
        opt.step()
    return step


def build(kind, use_torch):
    rng = np.random.default_rng(0)
    if kind == "lstm":
        x = rng.integers(0, 1000, (35, 20)).astype(np.int64)
        y = rng.integers(0, 1000, 35 * 20).astype(np.int64)
        model = lstm_lm(tb.nn)
        runners = {"tensorbrain": lstm_step(tb, model, x, y)}
    else:
        x = rng.integers(0, 65, (8, 128)).astype(np.int64)
        y = rng.integers(0, 65, (8, 128)).astype(np.int64)
        model = char_gpt(tb.nn, tb.nn.functional)
        runners = {"tensorbrain": gpt_step(tb, model, x, y)}
    if use_torch:
        import torch
        tmodel = lstm_lm(torch.nn) if kind == "lstm" else char_gpt(torch.nn, torch.nn.functional)
        _copy_weights(model, tmodel, torch)
        runners["torch"] = (lstm_step if kind == "lstm" else gpt_step)(torch, tmodel, x, y)
    return runners


def bench(kind, rounds, steps, use_torch, clock):
    runners = build(kind, use_torch)
    for run in runners.values():   # warm-up: allocations, BLAS buffers, caches
        for _ in range(2):
            run()
    samples = {name: [] for name in runners}
    for _ in range(rounds):        # alternate so load changes hit both alike
        for name, run in runners.items():
            t0 = clock()
            for _ in range(steps):
                run()
            samples[name].append((clock() - t0) / steps)
    return {name: statistics.median(v) for name, v in samples.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("lstm", "gpt", "all"), default="all")
    p.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    p.add_argument("--steps", type=int, default=3, help="steps per round")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch
            torch.set_num_threads(1)
        except ImportError:
            use_torch = False
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        print("(threadpoolctl missing: NumPy's BLAS keeps its own thread count)")
    info = _common.blas()
    print(f"cpu: {_common.cpu_model()}, numpy {np.__version__} "
          f"({info.get('name', '?')} {info.get('version', '')}), tensorbrain {tb.__version__}"
          + (f", torch {torch.__version__}" if use_torch else ", torch not installed"))
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"one thread each; {args.clock} time per step, median of {args.rounds} alternating "
          f"rounds of {args.steps} steps\n")
    header = f"{'workload':34} {'tensorbrain':>12}" + (f" {'torch':>10} {'tb/torch':>9}"
                                                       if use_torch else "")
    print(header)
    print("-" * len(header))
    names = {"lstm": "2-layer LSTM LM (h200, T35, B20)", "gpt": "6-layer char GPT (d256, T128, B8)"}
    for kind in (("lstm", "gpt") if args.model == "all" else (args.model,)):
        r = bench(kind, args.rounds, args.steps, use_torch, clock)
        line = f"{names[kind]:34} {r['tensorbrain'] * 1e3:9.2f} ms"
        if use_torch:
            line += f" {r['torch'] * 1e3:7.2f} ms {r['tensorbrain'] / r['torch']:8.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
