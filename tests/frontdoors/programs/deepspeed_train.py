"""A small DeepSpeed training program, written in DeepSpeed's idiom (run under as_torch).

python -m tensorbrain.distributed.run --as-torch --standalone --nproc_per_node 2 \
    deepspeed_train.py --deepspeed_config ds_config.json --save-dir ckpt
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

import deepspeed


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--start-epoch", type=int, default=0)
parser.add_argument("--save-dir", required=True)
parser.add_argument("--load-dir", default=None)
parser.add_argument("--local_rank", type=int, default=-1)
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()

deepspeed.init_distributed()
torch.manual_seed(0)
data = np.random.default_rng(1)
dataset = TensorDataset(torch.tensor(data.standard_normal((64, 6)).astype(np.float32)),
                        torch.tensor(data.integers(0, 3, 64)))
model = Net()
engine, optimizer, loader, scheduler = deepspeed.initialize(
    args=args, model=model, model_parameters=model.parameters(), training_data=dataset)
if args.load_dir:
    _, client_state = engine.load_checkpoint(args.load_dir)
    assert client_state["epoch"] == args.start_epoch - 1, client_state

for epoch in range(args.start_epoch, args.epochs):
    loader.sampler.set_epoch(epoch)
    for inputs, targets in loader:
        loss = F.cross_entropy(engine(inputs), targets)
        engine.backward(loss)
        engine.step()
    if engine.global_rank == 0:
        print(f"epoch {epoch} step {engine.global_steps} loss {loss.item():.4f} "
              f"lr {engine.get_lr()[0]:.5f} skipped {engine.skipped_steps}", flush=True)
engine.save_checkpoint(args.save_dir, tag="final", client_state={"epoch": epoch})
