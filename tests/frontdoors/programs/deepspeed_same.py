"""One DeepSpeed program for both: real DeepSpeed (real torch, under torchrun) and TensorBrain's
front door (tbrun --as-torch). For each ZeRO stage asked for, in one launch: the model is built
(under deepspeed.zero.Init at stage 3), rank 0 alone writes the starting weights through
deepspeed.zero.GatheredParameters(modifier_rank=0) (DeepSpeed broadcasts them: at initialize
below stage 3, at the block's exit at stage 3), each rank trains on its half of every global
batch, and the full weights are read through GatheredParameters(modifier_rank=None) (a no-op
below stage 3); rank 0 writes them with NumPy, so the test compares the two runs' final weights.

    torchrun --standalone --nproc_per_node 2 deepspeed_same.py --stages 0,1,2,3 --out real
    tbrun --as-torch --standalone --nproc_per_node 2 deepspeed_same.py --stages 0,1,2,3 --out tb

It also prints, after each step, how many numbers the parameters a program reads hold
(``PARAM_NUMEL``): DeepSpeed keeps full parameters at stages 0-2.
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F

import deepspeed

parser = argparse.ArgumentParser()
parser.add_argument("--stages", default="0,1,2,3")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", required=True)
args = parser.parse_args()

deepspeed.init_distributed(dist_backend="gloo")
rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(stage):
    data = np.random.default_rng(1)
    init = {"fc1.weight": data.standard_normal((16, 6)) * 0.4,
            "fc1.bias": data.standard_normal(16) * 0.1,
            "fc2.weight": data.standard_normal((3, 16)) * 0.3, "fc2.bias": np.zeros(3)}
    x_all = data.standard_normal((args.steps, 16, 6)).astype(np.float32)
    y_all = data.integers(0, 3, (args.steps, 16))
    config = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 16 // world,
              "optimizer": {"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.01,
                                                       "torch_adam": True}},
              "gradient_clipping": 1.0, "zero_optimization": {"stage": stage},
              "steps_per_print": 1000}
    with deepspeed.zero.Init(config_dict_or_path=config, enabled=stage == 3):
        model = Net()
    torch.manual_seed(100 + rank)        # other ranks' own values must not survive
    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=0):
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(torch.tensor(init[name].astype(np.float32)) if rank == 0
                        else torch.randn(p.shape))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    mine = slice(rank * (16 // world), (rank + 1) * (16 // world))
    for step in range(args.steps):
        x = torch.tensor(x_all[step][mine])
        y = torch.tensor(y_all[step][mine])
        loss = F.cross_entropy(engine(x), y)
        engine.backward(loss)
        engine.step()
        numel = sum(p.numel() for p in engine.module.parameters())
        if rank == 0:
            print(f"stage {stage} step {step} loss {loss.item():.6f} PARAM_NUMEL {numel}",
                  flush=True)
    with deepspeed.zero.GatheredParameters(list(engine.module.parameters()), modifier_rank=None):
        final = {n: p.detach().cpu().numpy().astype(np.float64).copy()
                 for n, p in engine.module.named_parameters()}
    if rank == 0:
        np.savez(f"{args.out}{stage}.npz", **final)
    torch.distributed.barrier()


for s in args.stages.split(","):
    train(int(s))
