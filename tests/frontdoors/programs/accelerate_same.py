"""One Accelerate program for both: real Accelerate (real torch, under torchrun) and
TensorBrain's front door (tbrun --as-torch). NumPy gives the starting weights and the data (no
framework's random numbers), the loader is not shuffled, so the two runs see the same numbers;
rank 0 writes the final weights with NumPy.

    torchrun --standalone --nproc_per_node 2 accelerate_same.py --out real.npz
    tbrun --as-torch --standalone --nproc_per_node 2 accelerate_same.py --out tb.npz
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--accum", type=int, default=2)
args = parser.parse_args()

accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.accum)
data = np.random.default_rng(1)
x = torch.tensor(data.standard_normal((64, 6)).astype(np.float32))
y = torch.tensor(data.integers(0, 3, 64))
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor((data.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=False)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for epoch in range(2):
    for inputs, targets in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
    accelerator.print(f"epoch {epoch} loss {loss.item():.6f}")
accelerator.wait_for_everyone()
state = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    np.savez(args.out, **{k: v.detach().cpu().numpy().astype(np.float64) for k, v in state.items()})
accelerator.end_training()
