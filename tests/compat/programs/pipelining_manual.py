"""torch.distributed.pipelining as its tutorial uses it: build the whole model on every rank,
delete what this rank's stage does not run (the manual split), wrap it in ``PipelineStage`` and
drive it with ``ScheduleGPipe`` or ``Schedule1F1B`` (``step(x)`` on the first stage,
``step(target=y, losses=losses)`` on the last). Launched with 2 processes; every rank also trains
the unsplit model on the whole batch in its own process and checks that its stage's parameters
came out the same."""
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

VOCAB, DIM = 32, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Transformer(nn.Module):
    def __init__(self, n_layers=4):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleDict({str(i): Block() for i in range(n_layers)})
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings else tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm else h
        return self.output(h) if self.output else h


def build():
    model = Transformer()
    rng = np.random.default_rng(0)      # the same start under torch and TensorBrain
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.3 * rng.standard_normal(tuple(p.shape))).astype(np.float32)))
    return model


def tokenwise_loss_fn(outputs, targets):
    return nn.CrossEntropyLoss()(outputs.reshape(-1, VOCAB), targets.reshape(-1))


def train(model, step_fn, steps=4):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = step_fn()
        optimizer.step()
    return loss


def main():
    schedule_cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[sys.argv[1]]
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "launch with --nproc_per_node 2"
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.integers(0, VOCAB, (8, 6)))
    y = torch.from_numpy(rng.integers(0, VOCAB, (8, 6)))

    model = build()
    if rank == 0:
        del model.layers["2"]
        del model.layers["3"]
        model.norm = None
        model.output = None
    else:
        model.tok_embeddings = None
        del model.layers["0"]
        del model.layers["1"]
    stage = PipelineStage(model, rank, world, torch.device("cpu"))
    schedule = schedule_cls(stage, n_microbatches=4, loss_fn=tokenwise_loss_fn)

    def pipeline_step():
        if rank == 0:
            schedule.step(x)
            return None
        losses = []
        output = schedule.step(target=y, losses=losses)
        assert tuple(output.shape) == (8, 6, VOCAB)
        return torch.stack(losses).mean()
    loss = train(model, pipeline_step)

    reference = build()                  # one process, the whole batch, the mean loss
    ref_loss = train(reference, lambda: _backward(tokenwise_loss_fn(reference(x), y)))
    ref_params = dict(reference.named_parameters())
    diff = max(float((p - ref_params[n]).abs().max()) for n, p in model.named_parameters())
    worst = torch.tensor([diff])
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    assert worst.item() < 1e-4, f"pipeline and one process differ by {worst.item()}"
    if rank == world - 1:
        assert abs(loss.item() - ref_loss.item()) < 1e-4
        print(f"pipeline matches one process (max parameter difference {worst.item():.2e})")
        print(f"FINAL_LOSS {loss.item():.6f}")
    dist.destroy_process_group()


def _backward(loss):
    loss.backward()
    return loss


if __name__ == "__main__":
    main()
