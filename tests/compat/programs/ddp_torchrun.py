"""The DDP tutorial series, steps 3 and 4 (multigpu_torchrun.py's and multinode.py's shape, the
same program): launched by torchrun/tbrun, standalone or with --rdzv-backend c10d, with snapshots
so a restarted job resumes where it stopped."""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup():
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")


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
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.device = self.local_rank if torch.cuda.is_available() else torch.device("cpu")
        self.model = model.to(self.device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for source, targets in self.train_data:
            source, targets = source.to(self.device), targets.to(self.device)
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
            total += loss.detach()
        torch.distributed.all_reduce(total, op=torch.distributed.ReduceOp.SUM)
        return total.item() / (len(self.train_data) * torch.distributed.get_world_size())

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(),
                    "OPTIMIZER_STATE": self.optimizer.state_dict(), "EPOCHS_RUN": epoch}
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs, stop_after):
        loss = None
        for epoch in range(self.epochs_run, max_epochs):
            loss = self._run_epoch(epoch)
            if self.global_rank == 0:
                print(f"[rank {self.global_rank}] Epoch {epoch} | loss {loss:.4f}")
                if epoch % self.save_every == 0 or epoch == max_epochs - 1:
                    self._save_snapshot(epoch + 1)
            torch.distributed.barrier()
            if stop_after is not None and epoch + 1 == stop_after:
                return None  # a simulated interruption: the next launch resumes from the snapshot
        return loss


def main(save_every, total_epochs, batch_size, snapshot_path, stop_after):
    ddp_setup()
    model = torch.nn.Linear(20, 1)
    with torch.no_grad():
        model.weight.copy_(torch.linspace(-0.5, 0.5, 20).reshape(1, 20))
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=5e-2, momentum=0.5)
    dataset = MyTrainDataset(256)
    loader = DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False,
                        sampler=DistributedSampler(dataset))
    loss = Trainer(model, loader, optimizer, save_every, snapshot_path).train(total_epochs, stop_after)
    if loss is not None and int(os.environ["RANK"]) == 0:
        print(f"FINAL_LOSS {loss:.6f}")
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("save_every", type=int)
    parser.add_argument("--batch_size", default=16, type=int)
    parser.add_argument("--snapshot", default="snapshot.pt")
    parser.add_argument("--stop_after", default=None, type=int)
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.snapshot, args.stop_after)
