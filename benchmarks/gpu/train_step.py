"""Training-step time and peak memory on a GPU: TensorBrain (CuPy) against torch eager, same run.

    python benchmarks/gpu/train_step.py [--json out.json] [--device cuda|cpu] [--rounds 5]
                                        [--amp fp32,bf16]

Workloads (the GPU issue's): MLP 784-512-512-10 at B=256; ResNet-18 on 32x32 at B=128 (torch's
model from torchvision when it is installed, else the same architecture built here); a 6-layer
GPT (embedding 256, 8 heads, T=128, B=32, vocabulary 65). Each step is ``zero_grad, forward,
cross-entropy, backward, SGD(momentum) step``; both frameworks start from the same weights where
the same seeds generate the data. Rounds alternate tb and torch; each round times
``--steps`` steps between device synchronisations; the median round is reported, as ms/step, the
ratio tb/torch and throughput relative to torch (the goal is >= 0.7x). Peak memory: torch's
``max_memory_allocated``; for tb the CuPy memory pool's high-water mark of bytes in use, sampled
after forward and after backward (CuPy has no peak counter of its own).

``--amp`` lists the precisions to run each workload in: ``fp32`` (no autocast) and ``bf16``
(the forward and the loss under ``autocast(device, dtype=bfloat16)`` in both frameworks; the
weights, gradients and optimizer stay float32, as torch's autocast recipe has them). One row per
(workload, precision); the JSON file is rewritten after every row, so a run cut short by its time
limit still leaves what it measured.

``--device cpu`` runs the same code on NumPy and torch's CPU build: that is how this script is
checked on machines without a GPU (tests/test_gpu_prep.py), not a benchmark.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def gpt(nn, F, vocab=65, d=256, n_layer=6, n_head=8, block=128):
    """The same small GPT in either framework (``nn``/``F`` are tb's or torch's modules)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = (z.reshape(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            pos = self.pos.weight[:t]
            return self.head(self.ln(self.blocks(self.tok(idx) + pos)))

    return GPT()


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def build(fw: str, name: str):
    """(model, input shape, target shape, classes) in framework ``fw`` ("tb" or "torch")."""
    if fw == "tb":
        import tensorbrain as lib
        import tensorbrain.nn.functional as F
    else:
        import torch as lib
        import torch.nn.functional as F
    nn = lib.nn
    if name == "mlp":
        return mlp(nn), ("x", 256, 784), (256,), 10
    if name == "resnet18":
        if fw == "tb":
            from tensorbrain.models import resnet18
            return resnet18(num_classes=10), ("x", 128, 3, 32, 32), (128,), 10
        try:
            from torchvision.models import resnet18
        except ImportError:
            return None, None, None, None
        return resnet18(num_classes=10), ("x", 128, 3, 32, 32), (128,), 10
    if name == "gpt":
        return gpt(nn, F), ("idx", 32, 128), (32, 128), 65
    raise ValueError(name)


class Runner:
    """One framework's model, data and optimizer on one device, stepping and timing."""

    def __init__(self, fw, name, device, amp="fp32"):
        self.fw, self.device, self.amp = fw, device, amp
        model, shape, tshape, classes = build(fw, name)
        if model is None:
            raise RuntimeError("torchvision is not installed")
        import numpy as np
        rng = np.random.default_rng(0)
        if shape[0] == "idx":
            x = rng.integers(0, classes, size=shape[1:])
        else:
            x = rng.standard_normal(shape[1:]).astype("float32")
        y = rng.integers(0, classes, size=tshape)
        if fw == "tb":
            import tensorbrain as lib
        else:
            import torch as lib
        self.lib = lib
        self.model = model.to(device)
        self.x = lib.tensor(x).to(device)
        self.y = lib.tensor(y).to(device)
        self.opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.loss_fn = lib.nn.functional.cross_entropy
        self.peak = 0

    def sync(self):
        if self.device == "cuda":
            self.lib.cuda.synchronize()

    def _sample_memory(self):
        if self.fw == "tb" and self.device == "cuda":
            import cupy
            self.peak = max(self.peak, cupy.get_default_memory_pool().used_bytes())

    def _autocast(self):
        if self.amp == "fp32":
            return contextlib.nullcontext()
        return self.lib.autocast(self.device, dtype=self.lib.bfloat16)

    def step(self):
        self.opt.zero_grad()
        with self._autocast():
            out = self.model(self.x)
            self._sample_memory()
            loss = self.loss_fn(out.reshape(-1, out.shape[-1]), self.y.reshape(-1))
        loss.backward()
        self._sample_memory()
        self.opt.step()
        return loss

    def time_round(self, steps):
        self.sync()
        t = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.sync()
        return (time.perf_counter() - t) / steps

    def peak_bytes(self):
        if self.device != "cuda":
            return None
        if self.fw == "torch":
            return int(self.lib.cuda.max_memory_allocated())
        return int(self.peak)


def run(name, device, rounds, steps, use_torch, amp="fp32"):
    tb_run = Runner("tb", name, device, amp)
    th_run = None
    if use_torch:
        try:
            th_run = Runner("torch", name, device, amp)
        except Exception as exc:  # noqa: BLE001 - report and go on with tb alone
            print(f"  torch {name}: not run ({exc})")
    for r in (tb_run, th_run):
        if r is not None:
            for _ in range(2):  # warm-up: kernel compilation, memory pools, cuBLAS handles
                r.step()
    tb_times, th_times = [], []
    for _ in range(rounds):
        tb_times.append(tb_run.time_round(steps))
        if th_run is not None:
            th_times.append(th_run.time_round(steps))
    row = {"workload": name, "amp": amp, "device": device, "tb_ms": 1e3 * statistics.median(tb_times),
           "tb_peak_bytes": tb_run.peak_bytes()}
    if th_times:
        row["torch_ms"] = 1e3 * statistics.median(th_times)
        row["ratio"] = row["tb_ms"] / row["torch_ms"]
        row["throughput_vs_torch"] = row["torch_ms"] / row["tb_ms"]
        row["torch_peak_bytes"] = th_run.peak_bytes()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--workloads", default="mlp,resnet18,gpt")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--amp", default="fp32", help="comma-separated: fp32, bf16")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import tensorbrain as tb
    if args.device == "cuda" and not tb.cuda.is_available():
        print(f"# train_step: no GPU: {tb.cuda.why_unavailable()}")
        return 2
    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            use_torch = False
    amps = args.amp.split(",")
    bad = sorted(set(amps) - {"fp32", "bf16"})
    if bad:
        ap.error(f"--amp: unknown precision(s) {', '.join(bad)} (use fp32 and/or bf16)")
    rows = []
    for name in args.workloads.split(","):
        for amp in amps:
            try:
                row = run(name, args.device, args.rounds, args.steps, use_torch, amp)
            except Exception as exc:  # noqa: BLE001 - one broken workload must not hide the others
                row = {"workload": name, "amp": amp, "device": args.device,
                       "error": f"{type(exc).__name__}: {exc}"}
            rows.append(row)
            print(json.dumps(row))
            if args.json:  # after every row: a run cut short still leaves what it measured
                with open(args.json + ".tmp", "w") as f:
                    json.dump({"rows": rows, "argv": sys.argv[1:]}, f, indent=1)
                os.replace(args.json + ".tmp", args.json)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
