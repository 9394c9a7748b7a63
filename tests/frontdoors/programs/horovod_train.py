"""A small Horovod training program, written in Horovod's idiom (run under as_torch).

python -m tensorbrain.distributed.run --as-torch --standalone --nproc_per_node 2 \
    horovod_train.py --lr 0.05 --out w.safetensors
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
import horovod.torch as hvd
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--backward-passes", type=int, default=1)
parser.add_argument("--fp16-allreduce", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

hvd.init()
torch.manual_seed(1234 + hvd.rank())          # different on purpose: the broadcast fixes it
data = np.random.default_rng(1)
dataset = TensorDataset(torch.tensor(data.standard_normal((64, 6)).astype(np.float32)),
                        torch.tensor(data.integers(0, 3, 64)))
sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=3)
loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     backward_passes_per_step=args.backward_passes)

for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for inputs, targets in loader:
        optimizer.zero_grad()
        parts = zip(inputs.chunk(args.backward_passes), targets.chunk(args.backward_passes),
                    strict=True)
        for x, y in parts:
            loss = F.cross_entropy(model(x), y) / args.backward_passes
            loss.backward()
        optimizer.step()
    avg = hvd.allreduce(loss.detach(), name="avg_loss")
    if hvd.rank() == 0:
        print(f"epoch {epoch} loss {avg.item():.4f}", flush=True)

if hvd.rank() == 0:
    torch.save(model.state_dict(), args.out)
hvd.shutdown()
