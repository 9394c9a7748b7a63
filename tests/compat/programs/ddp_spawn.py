"""The DDP tutorial series, step 2 (multigpu.py's shape): mp.spawn + DistributedDataParallel."""
import os

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)
    init_process_group(backend=backend, rank=rank, world_size=world_size)


class MyTrainDataset(Dataset):
    def __init__(self, size):
        rng = np.random.default_rng(0)
        x = rng.random((size, 20), dtype=np.float32)
        w = rng.standard_normal((20, 1)).astype(np.float32)
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(x @ w)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id):
        self.gpu_id = gpu_id
        self.model = DDP(model.to(gpu_id), device_ids=[gpu_id] if torch.cuda.is_available() else None)
        self.train_data = train_data
        self.optimizer = optimizer

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for source, targets in self.train_data:
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
            total += loss.detach()
        torch.distributed.all_reduce(total)
        return total.item() / (len(self.train_data) * torch.distributed.get_world_size())

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            loss = self._run_epoch(epoch)
            if torch.distributed.get_rank() == 0:
                print(f"[GPU{self.gpu_id}] Epoch {epoch} | loss {loss:.4f}")
        return loss


def main(rank, world_size, total_epochs, batch_size, port):
    ddp_setup(rank, world_size, port)
    model = torch.nn.Linear(20, 1)
    with torch.no_grad():
        model.weight.copy_(torch.linspace(-0.5, 0.5, 20).reshape(1, 20))
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=5e-2)
    dataset = MyTrainDataset(256)
    loader = DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False,
                        sampler=DistributedSampler(dataset))
    device = rank if torch.cuda.is_available() else "cpu"
    loss = Trainer(model, loader, optimizer, device).train(total_epochs)
    if rank == 0:
        print(f"FINAL_LOSS {loss:.6f}")
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("--batch_size", default=16, type=int)
    parser.add_argument("--world_size", default=2, type=int)
    parser.add_argument("--port", default=29517, type=int)
    args = parser.parse_args()
    mp.spawn(main, args=(args.world_size, args.total_epochs, args.batch_size, args.port),
             nprocs=args.world_size)
