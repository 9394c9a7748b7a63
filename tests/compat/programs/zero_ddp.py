"""DDP + ZeroRedundancyOptimizer as in torch's ZeRO recipe: a shuffling DistributedSampler, a
StepLR, ``consolidate_state_dict(to=0)`` then ``torch.save`` on rank 0, and a resumed run that
loads it. ``--plain`` trains with a plain AdamW in one process (the reference).

    torchrun --standalone --nproc_per_node 2 zero_ddp.py --out p.npz --epochs 2 --save ck.pt
    torchrun --standalone --nproc_per_node 2 zero_ddp.py --out p.npz --epochs 2 \
        --start-epoch 2 --resume ck.pt
"""
import argparse

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build():
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 5))
    rng = np.random.default_rng(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * 0.2).astype(np.float32)))
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--start-epoch", type=int, default=0)
    ap.add_argument("--resume")
    ap.add_argument("--save")
    ap.add_argument("--plain", action="store_true")
    args = ap.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build()
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
    if args.plain:
        ddp = model
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    else:
        ddp = DDP(model)
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                            lr=1e-2, weight_decay=0.05)
    if args.resume:
        optimizer.load_state_dict(ckpt["optim"])
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    if args.resume:
        scheduler.load_state_dict(ckpt["sched"])

    rng = np.random.default_rng(11)
    X = torch.from_numpy(rng.standard_normal((96, 20)).astype(np.float32))
    Y = torch.from_numpy(rng.integers(0, 5, 96))
    ds = TensorDataset(X, Y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=42)
    loader = DataLoader(ds, batch_size=32 // world, sampler=sampler)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.start_epoch, args.start_epoch + args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(ddp(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.6f} lr {scheduler.get_last_lr()[0]:.5f}")

    if not args.plain:
        optimizer.consolidate_state_dict(to=0)
    if rank == 0:
        osd = optimizer.state_dict()
        print("optim state entries", len(osd["state"]), "groups", len(osd["param_groups"]))
        if args.save:
            torch.save({"model": model.state_dict(), "optim": osd,
                        "sched": scheduler.state_dict()}, args.save)
        np.savez(args.out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
        print(f"FINAL_LOSS {loss.item():.6f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
