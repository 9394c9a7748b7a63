"""Hogwild training (the shape of pytorch/examples mnist_hogwild): processes share one model."""
import argparse

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def make_data():
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = torch.from_numpy((digits.data / 16.0).astype(np.float32))
    y = torch.from_numpy(digits.target.astype(np.int64))
    return TensorDataset(x, y)


def train(rank, args, model, dataset):
    torch.manual_seed(args.seed + rank)
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.5)
    model.train()
    for _ in range(args.epochs):
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
    print(f"{rank}: done, last batch loss {loss.item():.4f}")


def evaluate(model, dataset):
    model.eval()
    with torch.no_grad():
        x, y = dataset.tensors
        return F.nll_loss(model(x), y).item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    dataset = make_data()
    model = Net()
    model.share_memory()  # gradients are allocated lazily, so they are not shared here
    before = evaluate(model, dataset)
    mp.spawn(train, args=(args, model, dataset), nprocs=args.num_processes)
    after = evaluate(model, dataset)
    print(f"loss before {before:.4f} after {after:.4f}")
    assert after < before, "the children's updates did not reach the shared model"
    print(f"FINAL_LOSS {after:.6f}")
