"""A small GPT-like language model trained with FSDP (torch's FSDP1 API), as a torch user writes
it: ``size_based_auto_wrap_policy`` through ``functools.partial``, ``MixedPrecision``,
``BackwardPrefetch``, ``model.clip_grad_norm_``, a rank-0 full state dict and
``FSDP.optim_state_dict``. ``--plain`` trains the same model without FSDP (the reference).

    torchrun --standalone --nproc_per_node 2 fsdp_lm.py --out params.npz
    python fsdp_lm.py --out ref.npz --plain           # one process, the whole batch
"""
import argparse
import functools
import json
import os
import resource

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig,
                                    FullStateDictConfig, MixedPrecision, ShardingStrategy,
                                    StateDictType)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

VOCAB, HEADS, SEQ = 64, 4, 12
D, LAYERS = int(os.environ.get("WIDTH", 32)), int(os.environ.get("LAYERS", 3))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, D))
        self.blocks = nn.ModuleList([Block(D, HEADS) for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos[:, :t]
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln_f(x))


def deterministic_init(model):
    rng = np.random.default_rng(1234)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * 0.05)
                                     .astype(np.float32)))


def state_bytes(optimizer):
    total = 0
    for state in optimizer.state.values():
        for k, v in state.items():
            if k.startswith("_"):
                continue
            if torch.is_tensor(v):
                total += v.numel() * v.element_size() if v.dim() > 0 else 0
            else:   # TensorBrain keeps the optimizer state as arrays (see docs/compat.md)
                total += getattr(v, "nbytes", 0) if getattr(v, "ndim", 0) > 0 else 0
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--strategy", default="FULL_SHARD")
    ap.add_argument("--mp", default="none", choices=["none", "bf16", "fp16"])
    ap.add_argument("--offload", action="store_true")
    ap.add_argument("--plain", action="store_true", help="no FSDP (the one-process reference)")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM()
    deterministic_init(model)
    full_numel = sum(p.numel() for p in model.parameters())
    if not args.plain:
        mp = None
        if args.mp == "bf16":
            mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                buffer_dtype=torch.bfloat16)
        elif args.mp == "fp16":
            mp = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32)
        policy = functools.partial(size_based_auto_wrap_policy, min_num_params=5_000)
        model = FSDP(model, auto_wrap_policy=policy,
                     sharding_strategy=ShardingStrategy[args.strategy], mixed_precision=mp,
                     cpu_offload=CPUOffload(offload_params=args.offload),
                     backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
                     device_id=torch.device("cpu"))
    local_numel = sum(p.numel() for p in model.parameters())
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    rng = np.random.default_rng(7)
    data = torch.from_numpy(rng.integers(0, VOCAB, (16, SEQ + 1)))
    per = data.size(0) // world
    shard = data[rank * per:(rank + 1) * per]
    x, y = shard[:, :-1], shard[:, 1:]
    for step in range(args.steps):
        optim.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB).float(), y.reshape(-1))
        loss.backward()
        if args.plain:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        else:
            model.clip_grad_norm_(1.0)
        optim.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        if rank == 0:
            print(f"step {step} loss {avg.item() / world:.6f}")

    mem = {"rank": rank, "local_params": local_numel, "full_params": full_numel,
           "optim_state_bytes": state_bytes(optim),
           "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print("MEM " + json.dumps(mem), flush=True)
    if args.plain:
        full, osd = model.state_dict(), optim.state_dict()
    else:
        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        ocfg = FullOptimStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg, ocfg):
            full = model.state_dict()
            osd = FSDP.optim_state_dict(model, optim)
    if rank == 0:
        TinyLM().load_state_dict(full)          # the plain model's keys
        np.savez(args.out, **{k: v.detach().float().numpy() for k, v in full.items()})
        if not args.plain:
            print("OPTIM_KEYS", len(osd["state"]), sorted(osd["state"][sorted(osd["state"])[0]]))
        print(f"FINAL_LOSS {avg.item() / world:.6f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
