"""A parameter server in the style of torch's RPC tutorial: the trainer creates the server's
model remotely (rpc.remote of a class defined in this script), trains it through RRef proxies
with distributed autograd and DistributedOptimizer.

    torchrun --standalone --nproc_per_node 2 rpc_parameter_server.py
"""
import os
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch.distributed.optim import DistributedOptimizer


class ParameterServer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.model(x)

    def param_rrefs(self):
        return [rpc.RRef(p) for p in self.model.parameters()]


def run_trainer():
    ps = rpc.remote("ps", ParameterServer)
    opt = DistributedOptimizer(torch.optim.SGD, ps.rpc_sync().param_rrefs(), lr=0.1)
    torch.manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randint(0, 2, (4,))
        with dist_autograd.context() as ctx:
            loss = torch.nn.functional.cross_entropy(ps.rpc_sync().forward(x), y)
            dist_autograd.backward(ctx, [loss])
            opt.step(ctx)
        print(f"loss {loss.item():.6f}", flush=True)


rank = int(os.environ["RANK"])
rpc.init_rpc("ps" if rank == 0 else "trainer", rank=rank, world_size=2)
if rank == 1:
    run_trainer()
rpc.shutdown()
