"""The DDP tutorial series, step 1 (single_gpu.py's shape): a Trainer on one device."""
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class MyTrainDataset(Dataset):
    def __init__(self, size):
        rng = np.random.default_rng(0)
        x = rng.random((size, 20), dtype=np.float32)
        w = rng.standard_normal((20, 1)).astype(np.float32)
        self.data = [(torch.from_numpy(x[i]), torch.from_numpy(x[i] @ w)) for i in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id, save_every):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.last_loss = None

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        total = 0.0
        for source, targets in self.train_data:
            source, targets = source.to(self.gpu_id), targets.to(self.gpu_id)
            total += self._run_batch(source, targets).item()
        self.last_loss = total / len(self.train_data)

    def _save_checkpoint(self, epoch):
        ckp = self.model.state_dict()
        torch.save(ckp, self.path)
        print(f"Epoch {epoch} | Training checkpoint saved at {self.path}")

    def train(self, max_epochs, path):
        self.path = path
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs():
    train_set = MyTrainDataset(256)
    torch.manual_seed(0)
    model = torch.nn.Linear(20, 1)
    with torch.no_grad():  # the same start in every framework, so final losses compare
        model.weight.copy_(torch.linspace(-0.5, 0.5, 20).reshape(1, 20))
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=5e-2)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False)


def main(device, total_epochs, save_every, batch_size, path):
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, device, save_every)
    trainer.train(total_epochs, path)
    print(f"FINAL_LOSS {trainer.last_loss:.6f}")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("save_every", type=int)
    parser.add_argument("--batch_size", default=32, type=int)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    args = parser.parse_args()
    device = 0 if torch.cuda.is_available() else "cpu"
    main(device, args.total_epochs, args.save_every, args.batch_size, args.checkpoint)
    sys.exit(0)
