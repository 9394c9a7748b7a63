"""DataLoader: batching rules, reproducible shuffling, and real forked workers (equality with
num_workers=0, error propagation, dead workers, timeouts, persistence, no pickle)."""
import multiprocessing
import os
import pickle
import signal
import time

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset,
                                    SequentialSampler, TensorDataset, get_worker_info)

pytestmark = pytest.mark.timeout(60)


class DictData(Dataset):
    """Samples mixing the types default_collate handles."""

    def __init__(self, n=23):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full((2, 3), i, np.float32), "y": i, "w": float(i) / 2,
                "name": f"item{i}", "t": tb.tensor([i, -i])}


def as_plain(batch):
    """A batch as nested Python lists (tensors/arrays -> lists) for equality checks."""
    if isinstance(batch, (tb.Tensor, np.ndarray)):
        return ("array", str(batch.dtype), np.asarray(batch).tolist())
    if isinstance(batch, dict):
        return {k: as_plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [as_plain(v) for v in batch]
    return batch


def collect(loader):
    return [as_plain(b) for b in loader]


def test_batches_sizes_and_len():
    ds = TensorDataset(tb.arange(10).float(), tb.arange(10))
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3 and [len(y) for _, y in loader] == [4, 4, 2]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [x.shape for x, _ in DataLoader(ds, batch_size=4, drop_last=True)] == [(4,), (4,)]
    assert [y.item() for _, y in DataLoader(ds, batch_size=None)][:3] == [0, 1, 2]
    custom = DataLoader(ds, batch_sampler=[[0, 9], [5]])
    assert [y.tolist() for _, y in custom] == [[0, 9], [5]]


def test_default_collate_through_the_loader():
    batch = next(iter(DataLoader(DictData(), batch_size=3)))
    assert batch["x"].shape == (3, 2, 3) and batch["x"].dtype == tb.float32
    assert batch["y"].tolist() == [0, 1, 2] and batch["y"].dtype == tb.int64
    assert batch["w"].dtype == tb.float64
    assert batch["name"] == ["item0", "item1", "item2"]
    assert batch["t"].tolist() == [[0, 0], [1, -1], [2, -2]]


def test_argument_validation():
    ds = TensorDataset(tb.zeros(4))
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="mutually exclusive with batch_size"):
        DataLoader(ds, batch_size=2, batch_sampler=[[0]])
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="pickle"):
        DataLoader(ds, num_workers=1, multiprocessing_context="spawn")
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(ds, persistent_workers=True)


def test_shuffle_is_reproducible_with_a_generator():
    ds = TensorDataset(tb.arange(50))

    def order(seed):
        g = tb.Generator().manual_seed(seed)
        return [y.tolist() for (y,) in DataLoader(ds, batch_size=7, shuffle=True, generator=g)]

    assert order(3) == order(3)
    assert order(3) != order(4)
    flat = sum(order(3), [])
    assert sorted(flat) == list(range(50)) and flat != list(range(50))
    tb.manual_seed(9)
    a = [y.tolist() for (y,) in DataLoader(ds, batch_size=7, shuffle=True)]
    tb.manual_seed(9)
    b = [y.tolist() for (y,) in DataLoader(ds, batch_size=7, shuffle=True)]
    assert a == b  # the global seed drives shuffling when no generator is given


@pytest.mark.parametrize("num_workers", [1, 3])
def test_workers_give_the_same_batches_as_the_main_process(num_workers):
    def run(nw):
        g = tb.Generator().manual_seed(11)
        return collect(DataLoader(DictData(), batch_size=4, shuffle=True, generator=g,
                                  num_workers=nw))

    assert run(num_workers) == run(0)


def test_workers_with_tensor_dataset_and_custom_collate():
    ds = TensorDataset(tb.randn(40, 3), tb.arange(40))
    ref = collect(DataLoader(ds, batch_size=6))
    assert collect(DataLoader(ds, batch_size=6, num_workers=2, prefetch_factor=3)) == ref

    def collate(samples):
        return {"sum": float(sum(s[1].item() for s in samples)), "n": len(samples),
                "raw": b"\x00\x01"}
    out = list(DataLoader(ds, batch_size=10, num_workers=2, collate_fn=collate))
    assert [b["sum"] for b in out] == [45.0, 145.0, 245.0, 345.0]
    assert out[0]["raw"] == b"\x00\x01"


def test_in_order_false_yields_every_batch():
    ds = TensorDataset(tb.arange(30))
    batches = [y.tolist() for (y,) in DataLoader(ds, batch_size=4, num_workers=2, in_order=False)]
    assert len(batches) == 8 and sorted(sum(batches, [])) == list(range(30))


class FailingData(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 9:
            raise KeyError(f"no sample {i}")
        return np.float32(i)


def test_worker_error_is_reraised_naming_worker_and_batch():
    loader = DataLoader(FailingData(), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(RuntimeError) as err:
        for b in loader:
            got.append(b.tolist())
    msg = str(err.value)
    assert "Caught KeyError in DataLoader worker process 0 while fetching batch 4" in msg
    assert "no sample 9" in msg and "Traceback" in msg
    assert got == [[0, 1], [2, 3], [4, 5], [6, 7]]  # the batches before the failing one
    time.sleep(0.1)
    assert not [p for p in multiprocessing.active_children() if "dataloader" in p.name]


def test_main_process_error_is_the_original_exception():
    with pytest.raises(KeyError, match="no sample 9"):
        list(DataLoader(FailingData(), batch_size=2))


class KillingData(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return np.float32(i)


def test_dead_worker_is_reported_not_waited_for():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker \d \(pid \d+\) exited unexpectedly.*signal 9"):
        list(DataLoader(KillingData(), batch_size=2, num_workers=2))
    assert time.monotonic() - start < 10


class SlowData(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(30 if i == 2 else 0)
        return np.float32(i)


def test_timeout_bounds_the_wait_for_a_batch():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(DataLoader(SlowData(), batch_size=2, num_workers=1, timeout=0.5))
    assert time.monotonic() - start < 10


class Unsendable(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return {1, 2}


def test_unsendable_batch_types_fail_clearly():
    with pytest.raises(RuntimeError, match="never pickles"):
        list(DataLoader(Unsendable(), batch_size=None, num_workers=1))


class WhoAmI(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return np.array([os.getpid(), info.id, info.num_workers, info.seed,
                         np.random.randint(1 << 30), int(tb.randint(0, 1 << 30, (1,)).item())])


def test_worker_info_seeds_and_init_fn():
    assert get_worker_info() is None
    inits = multiprocessing.get_context("fork").Array("i", [0, 0])

    def init_fn(worker_id):
        inits[worker_id] = 100 + worker_id

    g = tb.Generator().manual_seed(0)
    rows = np.concatenate([b.numpy() for b in DataLoader(WhoAmI(), batch_size=2, num_workers=2,
                                                         worker_init_fn=init_fn, generator=g)])
    assert list(inits) == [100, 101]
    assert set(rows[:, 1]) == {0, 1} and set(rows[:, 2]) == {2}
    seeds = {int(r[1]): int(r[3]) for r in rows}
    assert seeds[1] == seeds[0] + 1  # base_seed + worker id, as in PyTorch
    assert len(set(rows[:, 4])) > 1 and len(set(rows[:, 5])) > 1  # numpy and tb RNGs differ
    g2 = tb.Generator().manual_seed(0)
    again = np.concatenate([b.numpy() for b in DataLoader(WhoAmI(), batch_size=2, num_workers=2,
                                                          generator=g2)])
    np.testing.assert_array_equal(again[:, 3:], rows[:, 3:])  # same generator, same worker RNGs


def test_persistent_workers_survive_epochs_and_early_breaks():
    loader = DataLoader(WhoAmI(), batch_size=2, num_workers=2, persistent_workers=True)
    first = np.concatenate([b.numpy() for b in loader])
    for _b in loader:  # leave the epoch early: the in-flight batches must be drained
        break
    second = np.concatenate([b.numpy() for b in loader])
    assert set(first[:, 0]) == set(second[:, 0])  # the same processes
    assert len(second) == 8
    pids = set(first[:, 0].tolist())
    loader._iterator._shutdown()
    time.sleep(0.1)
    for pid in pids:
        with pytest.raises(OSError):
            os.kill(int(pid), 0)


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def test_iterable_dataset_single_and_multi_worker():
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    got = [b.tolist() for b in DataLoader(Stream(10), batch_size=2, num_workers=2)]
    assert sorted(sum(got, [])) == list(range(10))
    assert got[0] == [0, 2] and got[1] == [1, 3]  # workers take turns, as in PyTorch
    loader = DataLoader(Stream(6), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):  # a new epoch restarts each worker's stream
        assert sorted(sum((b.tolist() for b in loader), [])) == list(range(6))
    loader._iterator._shutdown()
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(3), shuffle=True)


def test_workers_never_pickle(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("pickle was used")

    for name in ("dumps", "loads", "dump", "load"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(pickle, "Pickler", refuse)
    ref = collect(DataLoader(DictData(), batch_size=5))
    # the patched module is inherited by the forked workers too
    assert collect(DataLoader(DictData(), batch_size=5, num_workers=2)) == ref


def test_pin_memory_is_accepted():
    ds = TensorDataset(tb.arange(4))
    assert [y.tolist() for (y,) in DataLoader(ds, batch_size=2, pin_memory=True)] == [[0, 1],
                                                                                     [2, 3]]


def test_batch_sampler_drives_worker_batches():
    ds = TensorDataset(tb.arange(10))
    bs = BatchSampler(SequentialSampler(ds), batch_size=3, drop_last=True)
    assert [y.tolist() for (y,) in DataLoader(ds, batch_sampler=bs, num_workers=2)] == \
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_persistent_workers_shuffle_like_the_main_process_every_epoch():
    ds = TensorDataset(tb.arange(20))

    def epochs(**kw):
        loader = DataLoader(ds, batch_size=6, shuffle=True,
                            generator=tb.Generator().manual_seed(2), **kw)
        out = [[y.tolist() for (y,) in loader] for _ in range(3)]
        if kw.get("persistent_workers"):
            loader._iterator._shutdown()
        return out

    ref = epochs()
    assert ref[0] != ref[1]
    assert epochs(num_workers=2, persistent_workers=True) == ref
    assert epochs(num_workers=2) == ref


def test_workers_leave_quietly_when_the_main_side_goes_away():
    it = iter(DataLoader(TensorDataset(tb.arange(100)), batch_size=2, num_workers=2))
    next(it)
    procs = [w.proc for w in it._workers]
    for w in it._workers:  # what the kernel does when the main process dies
        os.close(w.task_fd)
        os.close(w.result_fd)
    for p in procs:
        p.join(5)
        assert p.exitcode == 0  # EOF or a broken pipe: a clean exit, no traceback
    it._workers.clear()
