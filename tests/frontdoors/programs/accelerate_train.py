"""A small Accelerate training program, written in Accelerate's idiom (run under as_torch).

python -m tensorbrain.distributed.run --as-torch --standalone --nproc_per_node 2 \
    accelerate_train.py --batch 8 --out w.safetensors
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--start-epoch", type=int, default=0)
parser.add_argument("--accum", type=int, default=1)
parser.add_argument("--mixed-precision", default="no")
parser.add_argument("--out", required=True)
parser.add_argument("--save-state", default=None)
parser.add_argument("--load-state", default=None)
args = parser.parse_args()

set_seed(0)
accelerator = Accelerator(mixed_precision=args.mixed_precision, cpu=True,
                          gradient_accumulation_steps=args.accum)
data = np.random.default_rng(1)
x = torch.tensor(data.standard_normal((64, 6)).astype(np.float32))
y = torch.tensor(data.integers(0, 3, 64))
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1000, gamma=0.5)
loader = DataLoader(TensorDataset(x, y), batch_size=args.batch, shuffle=True)
# 61 evaluation samples: the last round is padded with repeats, which gather_for_metrics drops
eval_loader = DataLoader(TensorDataset(x[:61], y[:61]), batch_size=args.batch)
model, optimizer, loader, eval_loader, scheduler = accelerator.prepare(
    model, optimizer, loader, eval_loader, scheduler)
if args.load_state:
    accelerator.load_state(args.load_state)

skipped = 0
for epoch in range(args.start_epoch, args.epochs):
    loader.set_epoch(epoch)
    model.train()
    for inputs, targets in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            skipped += accelerator.optimizer_step_was_skipped
    model.eval()
    seen = correct = 0
    with torch.no_grad():
        for inputs, targets in eval_loader:
            preds, labels = accelerator.gather_for_metrics((model(inputs).argmax(dim=1), targets))
            seen += preds.shape[0]
            correct += int((preds == labels).sum().item())
    accelerator.print(f"epoch {epoch} loss {loss.item():.4f} accuracy {correct}/{seen} "
                      f"skipped {skipped}")
    assert seen == 61, seen

if args.save_state:
    accelerator.save_state(args.save_state)
accelerator.wait_for_everyone()
state = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    torch.save(state, args.out)
accelerator.end_training()
