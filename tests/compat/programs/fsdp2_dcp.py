"""FSDP2 (``fully_shard`` on every block, then the root) on a small transformer with activation
checkpointing, saved and resumed with torch.distributed.checkpoint as in torch's DCP tutorial
(an ``AppState`` Stateful around ``get_state_dict`` / ``set_state_dict``). A checkpoint saved at
N ranks resumes at any world size. ``--plain`` trains without FSDP (the reference).

    torchrun --standalone --nproc_per_node 2 fsdp2_dcp.py --out a.npz --steps 3 --ckpt ck
    python fsdp2_dcp.py --out b.npz --steps 3 --first-step 3 --ckpt ck --resume   # 1 process
    torchrun --standalone --nproc_per_node 4 fsdp2_dcp.py --out c.npz --mesh 2x2  # HSDP
"""
import argparse
import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_state_dict, set_state_dict)
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

VOCAB, D, HEADS, LAYERS, SEQ = 50, 32, 4, 2, 10
AC = "none"   # --ac: "wrapper" (checkpoint_wrapper per block) or "inner" (inside each block)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, D))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(D), Attention()
        self.norm2 = nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        if AC == "inner":
            return x + torch.utils.checkpoint.checkpoint(self.ff, self.norm2(x), use_reentrant=False)
        return x + self.ff(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(D)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, idx):
        h = self.embed(idx)
        for layer in self.layers:
            h = layer(h)
        return self.out(self.norm(h))


class AppState(Stateful):
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--first-step", type=int, default=0)
    ap.add_argument("--ckpt")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--mesh", default="")
    ap.add_argument("--mp", default="none")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--ac", default="none", choices=["none", "wrapper", "inner"])
    args = ap.parse_args()
    global AC
    AC = args.ac

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Transformer()
    rng = np.random.default_rng(5)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * 0.1).astype(np.float32)))

    if args.ac == "wrapper":
        for i, layer in enumerate(model.layers):
            model.layers[i] = checkpoint_wrapper(layer)
    if not args.plain:
        if args.mesh:
            shape = tuple(int(s) for s in args.mesh.split("x"))
            mesh = init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if args.mp == "bf16" else MixedPrecisionPolicy()
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)

    if args.resume:
        state = {"app": AppState(model, optimizer)}
        dcp.load(state, checkpoint_id=args.ckpt)

    data_rng = np.random.default_rng(9)
    data = torch.from_numpy(data_rng.integers(0, VOCAB, (8, SEQ + 1)))
    per = data.size(0) // world
    mine = data[rank * per:(rank + 1) * per]
    for step in range(args.first_step, args.first_step + args.steps):
        optimizer.zero_grad()
        logits = model(mine[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), mine[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.6f}")

    if args.ckpt and not args.resume:
        dcp.save({"app": AppState(model, optimizer)}, checkpoint_id=args.ckpt)
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                cpu_offload=True))
    if rank == 0:
        np.savez(args.out, **{k: v.float().numpy() for k, v in full.items()})
        if not args.plain:
            w = model.layers[0].ff[0].weight
            print("param", type(w).__name__, tuple(w.shape), "local", tuple(w.to_local().shape),
                  w.placements)
        print(f"FINAL_LOSS {loss.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
