"""A small ezpz training program, written in ezpz's idiom (run under as_torch).

python -m tensorbrain.distributed.run --as-torch --standalone --nproc_per_node 2 \
    ezpz_train.py --backend DDP --batch 8 --out w.safetensors
"""
import argparse
import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ezpz

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="DDP")
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", required=True)
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

rank = ezpz.setup(framework="pytorch", backend=args.backend, seed=0)
world_size = ezpz.get_world_size()
device = ezpz.get_torch_device()
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                            torch.nn.Linear(16, 3)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
if args.backend.lower() == "horovod":
    import horovod.torch as hvd
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
elif world_size > 1:
    model = DDP(model)

data = np.random.default_rng(1)
x_all = torch.tensor(data.standard_normal((args.steps * args.batch * world_size, 6))
                     .astype(np.float32))
y_all = torch.tensor(data.integers(0, 3, len(x_all)))


@ezpz.timeitlogit(rank=rank)
def train_step(x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


for step in range(args.steps):
    start = (step * world_size + ezpz.get_rank()) * args.batch   # this rank's slice
    loss = train_step(x_all[start:start + args.batch].to(device),
                      y_all[start:start + args.batch].to(device))
if rank == 0:
    print(f"rank {rank} of {world_size} on {device} ({ezpz.get_torch_backend()}): "
          f"loss {loss:.4f}", flush=True)
    torch.save(getattr(model, "module", model).state_dict(), args.out)
ezpz.cleanup()
