"""Train a small CNN (or an MLP) on scikit-learn's bundled digits with TensorBrain.

The data set ships with scikit-learn (1,797 8x8 grey images of the digits 0-9), so nothing is
downloaded. The script is written like the torchrun tutorial's ``Trainer``: one class with
``_run_batch``, ``_run_epoch``, ``_save_snapshot`` and ``_load_snapshot``. Every ``--save-every``
epochs it writes model + optimizer + epoch counter to ``--snapshot`` with ``tb.save`` (atomic:
a crash mid-save keeps the previous file), and when that file exists at start it resumes from
it, so killing and relaunching continues where it stopped with the same parameters an
uninterrupted run would have had.

    python examples/train_digits.py --epochs 15
    python examples/train_digits.py --model mlp --epochs 15
    python examples/train_digits.py --epochs 15 --save-every 1 --snapshot /tmp/digits.safetensors

Data parallel, unchanged (the main job; see docs/ddp.md):

    tbrun --standalone --nproc_per_node 2 examples/train_digits.py --epochs 15
    tbrun --standalone --nproc_per_node 2 --max_restarts 3 examples/train_digits.py \
        --epochs 15 --save-every 1 --snapshot /tmp/digits.safetensors

Under ``tbrun`` (``WORLD_SIZE`` is set) the script joins the process group, wraps the model in
``DistributedDataParallel`` (BatchNorm converted to ``SyncBatchNorm``), and gives each rank its
shard of every batch with a ``DistributedSampler`` whose shuffle comes from ``seed + epoch``.
``--batch-size`` is the *global* batch, split over the ranks, so N processes compute the same
updates as one (up to float rounding) and reach the same test accuracy. Losses and accuracies
are all-reduced before they are printed; only rank 0 shows the progress bar and writes
snapshots (``--save-every``), and after a failure ``tbrun --max_restarts`` relaunches every rank,
which resume from the last snapshot.

Requirements: ``pip install scikit-learn tqdm safetensors`` (the ``examples`` extra).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn import functional as F
from tensorbrain.utils.data import DataLoader, DistributedSampler, TensorDataset


# ***** data *****
def load_digits_datasets(test_fraction: float = 0.2, split_seed: int = 0):
    """(train, test) TensorDatasets of (N, 1, 8, 8) float32 images in [0, 1] and int64 labels,
    split reproducibly and stratified by class (scikit-learn's train_test_split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction,
                                              random_state=split_seed, stratify=y)
    return (TensorDataset(tb.from_numpy(x_tr), tb.from_numpy(y_tr)),
            TensorDataset(tb.from_numpy(x_te), tb.from_numpy(y_te)))


def build_loaders(train_set, test_set, batch_size, num_workers=0, seed=0, rank=0,
                  world_size=1):
    """This rank's loaders: training batches of ``batch_size // world_size`` from a
    ``DistributedSampler`` (shuffled by ``seed + epoch``; with one process it is a plain seeded
    shuffle), and every ``world_size``-th test image for the sharded evaluation."""
    if batch_size % world_size:
        raise ValueError(f"--batch-size {batch_size} is the global batch and must be divisible "
                         f"by the number of processes ({world_size})")
    # Rank r's k-th batch is drawn from positions [k*B, (k+1)*B) of the shared permutation, so
    # the ranks' k-th batches together are exactly one process's k-th batch.
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=seed)
    train = DataLoader(train_set, batch_size=batch_size // world_size, sampler=sampler,
                       num_workers=num_workers, persistent_workers=num_workers > 0)
    test = DataLoader(test_set, batch_size=256, sampler=list(range(rank, len(test_set),
                                                                   world_size)))
    return train, test


# ***** models *****
class SmallCNN(nn.Module):
    """conv3x3(16)-BN-ReLU, conv3x3(32)-BN-ReLU, 2x2 max pool, 512-64-10 head: 38k parameters,
    enough for 8x8 digits (99% test accuracy) and a quarter of the compute of 32/64 channels."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
                                        nn.Linear(64, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def build_model(name: str) -> nn.Module:
    if name == "cnn":
        return SmallCNN()
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    raise ValueError(f"unknown model {name!r}: use 'cnn' or 'mlp'")


def rank_and_world_size():
    """(rank, world size) from the default process group when one is initialised, else (0, 1)."""
    try:
        dist = tb.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (AttributeError, ImportError):
        pass  # the process-group API is not there (or not initialised): a single process
    return 0, 1


def setup_distributed():
    """Join the process group when launched by tbrun/torchrun (WORLD_SIZE is set)."""
    if "WORLD_SIZE" in os.environ and not tb.distributed.is_initialized():
        tb.distributed.init_process_group("tcp")  # env:// from RANK, WORLD_SIZE, MASTER_*
    return rank_and_world_size()


def all_reduce_sums(*values):
    """Sum Python numbers over the ranks (metrics for the report); unchanged in one process."""
    rank, world = rank_and_world_size()
    if world == 1:
        return values
    t = tb.tensor(np.asarray(values, dtype=np.float64))
    tb.distributed.all_reduce(t)
    return tuple(t.tolist())


def unwrap(model):
    """The user's module inside a DDP wrapper (snapshots are saved without the 'module.' prefix,
    so a snapshot from N processes loads in one and vice versa)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# ***** training *****
class Trainer:
    """Trains ``model`` epoch by epoch, evaluates, and snapshots (torchrun tutorial layout)."""

    def __init__(self, model, train_loader, test_loader, optimizer, save_every=0,
                 snapshot_path=None, seed=0, device="cpu", progress=True, log=print):
        self.rank, self.world_size = rank_and_world_size()
        self.model = model.to(device)
        self.device = device
        self.train_loader, self.test_loader = train_loader, test_loader
        self.optimizer = optimizer
        self.save_every, self.snapshot_path = save_every, snapshot_path
        self.seed = seed
        self.progress = progress and self.rank == 0
        self.log = log if self.rank == 0 else (lambda *a, **k: None)
        self.epochs_run = 0
        self.history = []
        if snapshot_path and os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)

    def _run_batch(self, source, targets):
        """One optimisation step; returns (summed loss, number correct) for the batch."""
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()
        correct = int((output.data.argmax(1) == targets.data).sum())
        return loss.item() * len(targets), correct

    def _run_epoch(self, epoch):
        """One pass over the training data, shuffled by ``seed + epoch``."""
        sampler = self.train_loader.sampler
        if hasattr(sampler, "set_epoch"):  # a DistributedSampler
            sampler.set_epoch(epoch)
        if self.train_loader.generator is not None:
            self.train_loader.generator.manual_seed(self.seed + epoch)
        self.model.train()
        total_loss = correct = seen = 0
        batches = self.train_loader
        if self.progress:
            from tqdm import tqdm
            batches = tqdm(batches, desc=f"epoch {epoch + 1}", leave=False, unit="batch")
        for source, targets in batches:
            source, targets = source.to(self.device), targets.to(self.device)
            loss_sum, ok = self._run_batch(source, targets)
            total_loss += loss_sum
            correct += ok
            seen += len(targets)
        total_loss, correct, seen = all_reduce_sums(total_loss, correct, seen)
        return total_loss / max(seen, 1), correct / max(seen, 1)

    def evaluate(self):
        """(mean loss, accuracy) on the test loader, in eval mode and without a graph."""
        self.model.eval()
        total_loss = correct = seen = 0
        with tb.no_grad():
            for source, targets in self.test_loader:
                source, targets = source.to(self.device), targets.to(self.device)
                output = self.model(source)
                total_loss += F.cross_entropy(output, targets, reduction="sum").item()
                correct += int((output.data.argmax(1) == targets.data).sum())
                seen += len(targets)
        self.model.train()
        total_loss, correct, seen = all_reduce_sums(total_loss, correct, seen)
        return total_loss / max(seen, 1), correct / max(seen, 1)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": unwrap(self.model).state_dict(),
                    "OPTIMIZER_STATE": self.optimizer.state_dict(),
                    "EPOCHS_RUN": epoch + 1}
        tb.save(snapshot, self.snapshot_path)
        self.log(f"epoch {epoch + 1}: snapshot saved to {self.snapshot_path}")

    def _load_snapshot(self, path):
        snapshot = tb.load(path, map_location=self.device)
        unwrap(self.model).load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = int(snapshot["EPOCHS_RUN"])
        self.log(f"resuming training from snapshot {path} at epoch {self.epochs_run + 1}")

    def train(self, max_epochs, crash_at_epoch=0):
        for epoch in range(self.epochs_run, max_epochs):
            if epoch + 1 == crash_at_epoch and os.environ.get("TB_RESTART_COUNT", "0") == "0":
                # a simulated failure once rank 0's last snapshot is on disk (all ranks meet
                # first: the last rank could otherwise die before rank 0 wrote it), then tbrun
                # stops the others and restarts all
                if tb.distributed.is_initialized():
                    tb.distributed.barrier()
                if self.rank == self.world_size - 1:
                    os._exit(17)
            start = time.perf_counter()
            train_loss, train_acc = self._run_epoch(epoch)
            test_loss, test_acc = self.evaluate()
            seconds = time.perf_counter() - start
            self.history.append({"epoch": epoch + 1, "train_loss": train_loss,
                                 "train_acc": train_acc, "test_loss": test_loss,
                                 "test_acc": test_acc, "seconds": seconds})
            self.log(f"epoch {epoch + 1:3d}/{max_epochs}  train loss {train_loss:.4f} "
                     f"acc {100 * train_acc:5.1f}%  |  test loss {test_loss:.4f} "
                     f"acc {100 * test_acc:5.1f}%  ({seconds:.2f} s)")
            self.epochs_run = epoch + 1
            if self.rank == 0 and self.snapshot_path and self.save_every and \
                    (epoch + 1) % self.save_every == 0:
                self._save_snapshot(epoch)
        return self.history


def build_optimizer(name, params, lr):
    if name == "adam":
        return tb.optim.Adam(params, lr=lr)
    if name == "sgd":
        return tb.optim.SGD(params, lr=lr, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}: use 'adam' or 'sgd'")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    p.add_argument("--epochs", type=int, default=10, help="total epochs (default 10)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="global batch, split over the processes (default 64)")
    p.add_argument("--lr", type=float, default=2e-3, help="learning rate (default 2e-3)")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--save-every", type=int, default=0, help="snapshot every N epochs (0: never)")
    p.add_argument("--snapshot", default=None, help="snapshot path; resumed from when it exists")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument("--no-sync-bn", action="store_true",
                   help="with several processes, keep per-rank BatchNorm statistics")
    p.add_argument("--crash-at-epoch", type=int, default=0,
                   help="demo/test of --max_restarts: the last rank dies at the start of this "
                        "epoch (1-based), after the ranks meet there (so the previous "
                        "epoch's snapshot is written), in the first attempt (TB_RESTART_COUNT=0)")
    args = p.parse_args(argv)
    if args.save_every and not args.snapshot:
        p.error("--save-every needs --snapshot PATH")
    return args


def main(argv=None):
    """Run training; returns the Trainer (its ``history`` holds the per-epoch figures)."""
    args = parse_args(argv)
    rank, world_size = setup_distributed()
    tb.manual_seed(args.seed)
    train_set, test_set = load_digits_datasets()
    train_loader, test_loader = build_loaders(train_set, test_set, args.batch_size,
                                              args.workers, args.seed, rank, world_size)
    model = build_model(args.model)
    if world_size > 1:
        if not args.no_sync_bn:  # batch statistics over the global batch, as one process
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = nn.parallel.DistributedDataParallel(model.to(args.device))
    optimizer = build_optimizer(args.optimizer, model.parameters(), args.lr)
    trainer = Trainer(model, train_loader, test_loader, optimizer, args.save_every,
                      args.snapshot, args.seed, args.device, progress=not args.no_progress)
    trainer.log(f"{args.model}: {sum(p.numel() for p in model.parameters()):,} parameters, "
                f"{len(train_set)} training / {len(test_set)} test images, "
                f"world size {trainer.world_size}")
    start = time.perf_counter()
    trainer.train(args.epochs, args.crash_at_epoch)
    if trainer.history:
        trainer.log(f"final test accuracy {100 * trainer.history[-1]['test_acc']:.2f}% "
                    f"after {time.perf_counter() - start:.1f} s")
    if world_size > 1:
        tb.distributed.destroy_process_group()
    return trainer


if __name__ == "__main__":
    main(sys.argv[1:])
