"""Datasets, random_split and default_collate (vs torch's default_collate when installed)."""
import collections

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.utils.data import (ConcatDataset, Dataset, Subset, TensorDataset,
                                    default_collate, default_convert, random_split)


def test_tensor_dataset():
    ds = TensorDataset(tb.arange(6).reshape(3, 2), tb.tensor([1, 2, 3]))
    assert len(ds) == 3
    x, y = ds[1]
    assert x.tolist() == [2, 3] and y.item() == 2
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(tb.zeros(3), tb.zeros(4))
    with pytest.raises(TypeError, match="from_numpy"):
        TensorDataset(np.zeros(3))


def test_subset_concat_and_add():
    ds = TensorDataset(tb.arange(10))
    sub = Subset(ds, [7, 2, 5])
    assert [sub[i][0].item() for i in range(3)] == [7, 2, 5]
    both = ds + sub
    assert isinstance(both, ConcatDataset) and len(both) == 13
    assert both[11][0].item() == 2 and both[-1][0].item() == 5


def test_random_split_counts_fractions_and_reproducibility():
    ds = TensorDataset(tb.arange(10))
    a, b = random_split(ds, [7, 3], generator=tb.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    c, d = random_split(ds, [7, 3], generator=tb.Generator().manual_seed(0))
    assert c.indices == a.indices
    parts = random_split(range(11), [0.5, 0.3, 0.2], generator=tb.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [6, 3, 2]  # remainder round-robin, as in PyTorch
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [5, 6])


Point = collections.namedtuple("Point", "x y")


def test_default_collate_rules():
    b = default_collate([(np.zeros(2, np.float32), 1, 0.5, "a", True),
                         (np.ones(2, np.float32), 2, 1.5, "b", False)])
    assert isinstance(b, list) and b[0].shape == (2, 2) and b[1].dtype == tb.int64
    assert b[2].dtype == tb.float64 and b[3] == ["a", "b"] and b[4].dtype == tb.bool
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3]
    d = default_collate([{"a": tb.ones(2)}, {"a": tb.zeros(2)}])
    assert d["a"].tolist() == [[1, 1], [0, 0]]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([tb.zeros(2), tb.zeros(3)])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])
    assert default_convert({"a": np.zeros(1), "b": "s"})["a"].shape == (1,)


def test_default_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    samples = [{"img": np.full((2, 2), i, np.float32), "label": i, "score": i / 3,
                "pair": (i, float(i)), "tag": f"t{i}", "flag": bool(i % 2),
                "n": np.int32(i)} for i in range(3)]
    ours, theirs = default_collate(samples), torch_collate(samples)

    def same(a, b):
        if isinstance(b, torch.Tensor):
            assert str(a.dtype) == str(b.dtype).replace("torch.", "")
            np.testing.assert_array_equal(a._data, b.numpy())
        elif isinstance(b, dict):
            assert type(a) is type(b) and list(a) == list(b)
            for k in b:
                same(a[k], b[k])
        elif isinstance(b, (list, tuple)):
            assert type(a) is type(b) and len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        else:
            assert a == b
    same(ours, theirs)


class Squares(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i * i


def test_plain_dataset_protocol():
    ds = Squares()
    assert [ds[i] for i in range(len(ds))] == [0, 1, 4, 9]
    with pytest.raises(NotImplementedError):
        Dataset()[0]
