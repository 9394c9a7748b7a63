"""A DeepSpeed MoE program for both the real DeepSpeed (torchrun) and TensorBrain's front door
(tbrun --as-torch): deepspeed.moe.layer.MoE with 4 experts, ep_size=2 at 2 ranks (2 experts per
rank, tokens moved by all_to_all), top-1 gating without token dropping, the auxiliary loss
added, Adam at ZeRO stage 0 with clipping. NumPy sets every weight (expert i gets its own), each
rank trains on its own tokens; rank r writes the shared weights and its own experts (named by
their number in all) to OUT.rank<r>.npz.

    torchrun --standalone --nproc_per_node 2 deepspeed_moe_same.py --out real
"""
import argparse

import numpy as np
import torch

import deepspeed
from deepspeed.moe.layer import MoE
from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--clip", type=float, default=1.0)
args = parser.parse_args()
deepspeed.init_distributed(dist_backend="gloo")
rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
D, E = 4, 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(3, D)
        self.moe = MoE(hidden_size=D, expert=torch.nn.Sequential(
            torch.nn.Linear(D, 6), torch.nn.Tanh(), torch.nn.Linear(6, D)),
            num_experts=E, ep_size=2, k=1, min_capacity=0, drop_tokens=False, use_rts=False)
        self.out = torch.nn.Linear(D, 2)

    def forward(self, x):
        h, l_aux, _ = self.moe(torch.tanh(self.inp(x)))
        return self.out(h), l_aux


model = Net()
rng = np.random.default_rng(3)
local = E // world
with torch.no_grad():
    for name, p in model.named_parameters():
        if ".deepspeed_experts." in name:
            i = int(name.split(".deepspeed_experts.")[1].split(".")[0])
            glob = rank * local + i
            values = np.random.default_rng(1000 + glob * 17 + len(name)).standard_normal(
                tuple(p.shape))
        else:
            values = rng.standard_normal(tuple(p.shape))
        p.copy_(torch.tensor((values * 0.5).astype(np.float32)))

groups = split_params_into_different_moe_groups_for_optimizer(
    {"params": list(model.parameters()), "name": "main"})
config = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 8,
          "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
          "gradient_clipping": args.clip, "zero_optimization": {"stage": 0},
          "steps_per_print": 1000}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=config)
data = np.random.default_rng(50 + rank)
for step in range(args.steps):
    x = torch.tensor(data.standard_normal((8, 3)).astype(np.float32))
    y = torch.tensor(data.integers(0, 2, 8))
    logits, l_aux = engine(x)
    loss = torch.nn.functional.cross_entropy(logits, y) + 0.01 * l_aux
    engine.backward(loss)
    engine.step()
    print(f"rank {rank} step {step} loss {loss.item():.6f}", flush=True)
out = {}
for name, p in engine.module.named_parameters():
    if ".deepspeed_experts." in name:
        head, tail = name.split(".deepspeed_experts.")
        i, rest = tail.split(".", 1)
        name = f"{head}.expert{rank * local + int(i)}.{rest}"
    out[name] = p.detach().cpu().numpy().astype(np.float64)
np.savez(f"{args.out}.rank{rank}.npz", **out)
torch.distributed.barrier()
