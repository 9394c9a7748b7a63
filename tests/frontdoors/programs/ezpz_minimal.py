# An ezpz program in the style of ezpz's examples/minimal.py and its README (written here).
import os
import time

import numpy as np
import torch

import ezpz

logger = ezpz.get_logger(__name__)

BATCH = int(os.environ.get("BATCH_SIZE", 8))
STEPS = int(os.environ.get("TRAIN_ITERS", 6))
BACKEND = os.environ.get("BACKEND", "DDP")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(12, 24), torch.nn.Linear(24, 12)])

    def forward(self, x):
        return self.layers[1](torch.relu(self.layers[0](x)))


@ezpz.timeitlogit(rank=ezpz.get_rank())
def setup():
    rank = ezpz.setup_torch(backend=BACKEND, seed=int(os.environ.get("SEED", 0)))
    ezpz.print_dist_setup()
    device_type = ezpz.get_torch_device_type()
    model = Net()
    model.to(device_type)
    logger.info(f"{model=}")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    if BACKEND.lower() == "horovod":
        import horovod.torch as hvd
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    elif ezpz.get_world_size() > 1:
        model = ezpz.dist.wrap_model_for_ddp(model)
    return rank, model, optimizer


@ezpz.timeitlogit(rank=ezpz.get_rank())
def train(model, optimizer):
    world, rank = ezpz.get_world_size(), ezpz.get_rank()
    device_type = ezpz.get_torch_device_type()
    data = np.random.default_rng(5).random((STEPS * BATCH * world, 12)).astype(np.float32)
    model.train()
    summary = ""
    for step in range(STEPS):
        t0 = time.perf_counter()
        lo = (step * world + rank) * BATCH
        x = torch.from_numpy(data[lo:lo + BATCH]).to(device_type)
        y = model(x)
        loss = ((y - x) ** 2).sum() / BATCH
        dtf = (t1 := time.perf_counter()) - t0
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        dtb = time.perf_counter() - t1
        summary = ezpz.summarize_dict({"iter": step, "loss": loss.item(), "dt": dtf + dtb,
                                       "dtf": dtf, "dtb": dtb})
        logger.info(summary)
    return model


def main():
    rank, model, optimizer = setup()
    model = train(model, optimizer)
    if rank == 0 and os.environ.get("OUT"):
        torch.save(getattr(model, "module", model).state_dict(), os.environ["OUT"])
    ezpz.cleanup()


if __name__ == "__main__":
    main()
