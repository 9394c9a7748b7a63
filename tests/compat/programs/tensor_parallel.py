"""torch.distributed.tensor.parallel as its tutorial uses it: ``init_device_mesh``,
``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel`` on a LLaMA-style model
(a row-split embedding, column-split q/k/v and w1/w3, row-split wo and w2, a column-split
output gathered to every rank), and with ``--sequence-parallel`` the tutorial's full plan:
``SequenceParallel`` norms, ``PrepareModuleInput``, sequence-sharded layouts (``Shard(1)``).
Launched with 2 processes; every rank also trains the unsplit model in its own process and
checks that every parameter, gathered with ``full_tensor()``, came out the same."""
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)

VOCAB, DIM, HEADS, SEQ = 40, 16, 4, 8


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        bs, seqlen, _ = x.shape
        # -1 infers the number of heads, which tensor parallel splits
        xq = self.wq(x).view(bs, seqlen, -1, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bs, seqlen, -1, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bs, seqlen, -1, self.head_dim).transpose(1, 2)
        scores = torch.softmax(xq @ xk.transpose(-2, -1) / self.head_dim ** 0.5, dim=-1)
        return self.wo((scores @ xv).transpose(1, 2).contiguous().view(bs, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, 4 * DIM, bias=False)
        self.w2 = nn.Linear(4 * DIM, DIM)
        self.w3 = nn.Linear(DIM, 4 * DIM, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = nn.RMSNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([TransformerBlock() for _ in range(2)])
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def build():
    model = Transformer()
    rng = np.random.default_rng(0)      # the same start under torch and TensorBrain
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.copy_(torch.from_numpy((0.3 * rng.standard_normal(tuple(p.shape)))
                                         .astype(np.float32)))
    return model


def parallelize(model, tp_mesh, sequence_parallel):
    if not sequence_parallel:
        parallelize_module(model, tp_mesh, {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate()),
            "output": ColwiseParallel(output_layouts=Replicate()),
        })
        for block in model.layers:
            parallelize_module(block, tp_mesh, {
                "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
                "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(),
                "feed_forward.w3": ColwiseParallel(),
            })
        return model
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers:
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),),
                                            desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(use_local_output=False),
            "attention.wk": ColwiseParallel(use_local_output=False),
            "attention.wv": ColwiseParallel(use_local_output=False),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })
    return model


def train(model, tokens, targets, steps=4):
    # foreach=False: torch's foreach kernels refuse a mix of DTensor and plain parameters
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, foreach=False)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        optimizer.step()
    return loss


def main():
    sequence_parallel = "--sequence-parallel" in sys.argv
    dist.init_process_group("gloo")
    tp_mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    rng = np.random.default_rng(1)
    tokens = torch.from_numpy(rng.integers(0, VOCAB, (4, SEQ)))
    targets = torch.from_numpy(rng.integers(0, VOCAB, (4, SEQ)))

    model = parallelize(build(), tp_mesh["tp"], sequence_parallel)
    w1 = model.layers[0].feed_forward.w1.weight
    assert isinstance(w1, DTensor) and w1.placements == (Shard(0),)
    assert tuple(w1.to_local().shape) == (4 * DIM // tp_mesh.size(), DIM)
    loss = train(model, tokens, targets)

    reference = build()
    ref_loss = train(reference, tokens, targets)
    ref_params = dict(reference.named_parameters())
    worst = 0.0
    for name, p in model.named_parameters():
        full = p.full_tensor() if isinstance(p, DTensor) else p
        worst = max(worst, float((full - ref_params[name]).abs().max()))
    assert worst < 1e-4, f"tensor parallel and one process differ by {worst}"
    assert abs(loss.item() - ref_loss.item()) < 1e-4
    if dist.get_rank() == 0:
        print(f"tensor parallel matches one process (max parameter difference {worst:.2e})")
        print(f"FINAL_LOSS {loss.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
